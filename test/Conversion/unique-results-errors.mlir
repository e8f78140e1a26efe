// RUN: zb-opt %s --zb-unique-results -split-input-file -verify-diagnostics

// A sum that is not its own argument (bufferization copied it) would
// leave the caller's buffer unchanged.
// expected-error @below {{gradient sums: result 1 was not updated in place (it is not its argument)}}
func.func @copied(%w: memref<4xf32>, %s: memref<4xf32>) -> (memref<f32>, memref<4xf32>) attributes {zb.grad_sums = 1} {
  %loss = memref.alloc() : memref<f32>
  %c = memref.alloc() : memref<4xf32>
  memref.copy %s, %c : memref<4xf32> to memref<4xf32>
  return %loss, %c : memref<f32>, memref<4xf32>
}

// -----

// Sums returned in another order than they are taken.
// expected-error @below {{gradient sums: result 1 was not updated in place (it is not its argument)}}
func.func @swapped(%s0: memref<4xf32>, %s1: memref<4xf32>) -> (memref<f32>, memref<4xf32>, memref<4xf32>) attributes {zb.grad_sums = 2} {
  %loss = memref.alloc() : memref<f32>
  return %loss, %s1, %s0 : memref<f32>, memref<4xf32>, memref<4xf32>
}

// -----

// More sums than results.
// expected-error @below {{gradient sums: 2 sums but 1 results}}
func.func @too_few_results(%s0: memref<4xf32>, %s1: memref<4xf32>) -> memref<4xf32> attributes {zb.grad_sums = 2} {
  return %s1 : memref<4xf32>
}
