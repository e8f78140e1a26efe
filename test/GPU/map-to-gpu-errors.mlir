// RUN: zb-opt %s --zb-map-to-gpu -split-input-file -verify-diagnostics
// RUN: not zb-opt %s --zb-map-to-gpu="block-size=2048" 2>&1 | FileCheck %s --check-prefix=BLOCK

// BLOCK: error: zb-map-to-gpu: block-size 2048 is not in [1, 1024]

// The host cannot read device memory.
func.func @host_load(%x: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error @below {{zb-map-to-gpu: host code accesses a device buffer outside a kernel}}
  %v = memref.load %x[%c0] : memref<4xf32>
  return %v : f32
}

// -----

// A host loop that also calls a function cannot become a kernel: its
// buffer accesses are named.
func.func private @callee()
func.func @loop_with_call(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    func.call @callee() : () -> ()
    // expected-error @below {{zb-map-to-gpu: host code accesses a device buffer outside a kernel}}
    memref.store %f, %x[%i] : memref<4xf32>
  }
  return
}

// -----

func.func @unranked_copy(%x: memref<*xf32>, %y: memref<*xf32>) {
  // expected-error @below {{'memref.copy' op zb-map-to-gpu: a copy of unranked memrefs has no kernel form; copy ranked buffers}}
  memref.copy %x, %y : memref<*xf32> to memref<*xf32>
  return
}
