// RUN: zb-opt %s --split-input-file --zb-deallocate-buffers --verify-diagnostics | FileCheck %s

// Each allocation is freed right after the last use of it or of a view of
// it; a use inside a region counts at the op holding the region.
// CHECK-LABEL: func.func @straight_line(
// CHECK: %[[A:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK: %[[B:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK: linalg.fill {{.*}} outs(%[[A]]
// CHECK: %[[V:.*]] = memref.collapse_shape %[[A]]
// CHECK: memref.copy %[[V]], %{{.*}}
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[B]]
// CHECK: }
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK-NEXT: return
func.func @straight_line(%out: memref<32xf32>) {
  %a = memref.alloc() : memref<4x8xf32>
  %b = memref.alloc() : memref<4x8xf32>
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%a : memref<4x8xf32>)
  %v = memref.collapse_shape %a [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  memref.copy %v, %out : memref<32xf32> to memref<32xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    memref.store %zero, %b[%i, %c0] : memref<4x8xf32>
  }
  return
}

// -----

// An unused allocation is freed at once; one the input frees is left alone.
// CHECK-LABEL: func.func @unused_and_freed(
// CHECK: %[[U:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memref.dealloc %[[U]]
// CHECK-NEXT: %[[F:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memref.dealloc %[[F]]
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @unused_and_freed() {
  %u = memref.alloc() : memref<4xf32>
  %f = memref.alloc() : memref<4xf32>
  memref.dealloc %f : memref<4xf32>
  return
}

// -----

// A buffer that leaves its block cannot be freed there.
func.func @escapes() -> memref<4xf32> {
  %a = memref.alloc() : memref<4xf32>
  %v = memref.cast %a : memref<4xf32> to memref<?xf32>
  %w = memref.cast %v : memref<?xf32> to memref<4xf32>
  // expected-error @+1 {{'func.return' op takes a buffer allocated at}}
  return %w : memref<4xf32>
}
