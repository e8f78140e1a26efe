// RUN: zb-opt %s --zb-unique-results | FileCheck %s
// RUN: zb-opt %s --zb-unique-results | FileCheck %s --check-prefix=RESHAPED

// A private function returning one buffer twice returns it once; callers
// use the first result for both.
// CHECK-LABEL: func.func private @twice
// CHECK-SAME: -> memref<4xf32>
// CHECK: return %{{.*}} : memref<4xf32>
func.func private @twice(%a: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %b = memref.alloc() : memref<4xf32>
  memref.copy %a, %b : memref<4xf32> to memref<4xf32>
  return %b, %b : memref<4xf32>, memref<4xf32>
}

// CHECK-LABEL: func.func @caller
// CHECK: %[[R:.*]] = call @twice(%{{.*}}) : (memref<4xf32>) -> memref<4xf32>
// CHECK: %[[C:.*]] = memref.alloc() : memref<4xf32>
// CHECK: memref.copy %[[R]], %[[C]]
// CHECK: return %[[R]], %[[C]]
func.func @caller(%a: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %r:2 = call @twice(%a) : (memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
  return %r#0, %r#1 : memref<4xf32>, memref<4xf32>
}

// Public functions keep their signature: a repeated result is returned as
// a copy of its own, so that each result can become an out-parameter (a
// model's gradient function returns one value for two biases whose
// gradients are the same sum).
// CHECK-LABEL: func.func @public_twice
// CHECK-SAME: -> (memref<4xf32>, memref<4xf32>)
// CHECK: %[[C:.*]] = memref.alloc() : memref<4xf32>
// CHECK: memref.copy %[[A:.*]], %[[C]]
// CHECK: return %[[A]], %[[C]]
func.func @public_twice(%a: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  return %a, %a : memref<4xf32>, memref<4xf32>
}

// A gradient function with zb.grad_sums = 2 returns its last two arguments,
// updated in place: it stops returning them and keeps the loss.
// CHECK-LABEL: func.func @model_grad_acc
// CHECK-SAME: (%{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>, %{{.*}}: memref<2xf32>) -> memref<f32>
// CHECK: return %{{.*}} : memref<f32>
func.func @model_grad_acc(%w: memref<4xf32>, %s0: memref<4xf32>, %s1: memref<2xf32>) -> (memref<f32>, memref<4xf32>, memref<2xf32>) attributes {zb.grad_sums = 2} {
  %loss = memref.alloc() : memref<f32>
  return %loss, %s0, %s1 : memref<f32>, memref<4xf32>, memref<2xf32>
}

// A buffer returned through a reshape is allocated in the returned shape;
// its writer gets the inverse reshape as a view, and the function returns
// the allocation itself (an out-parameter without a copy). Either way
// round; an argument's reshape is left as it is.
// RESHAPED-LABEL: func.func private @reshaped
// RESHAPED-NOT: memref.alloc() {{.*}}: memref<8x8xf32>
// RESHAPED: return
// CHECK-LABEL: func.func private @reshaped
// CHECK-DAG: %[[E:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x4x8xf32>
// CHECK-DAG: %[[EV:.*]] = memref.collapse_shape %[[E]] {{\[}}[0, 1], [2]] : memref<2x4x8xf32> into memref<8x8xf32>
// CHECK-DAG: %[[C:.*]] = memref.alloc() : memref<64xf32>
// CHECK-DAG: %[[CV:.*]] = memref.expand_shape %[[C]] {{\[}}[0, 1]] output_shape [8, 8] : memref<64xf32> into memref<8x8xf32>
// CHECK-DAG: memref.copy %arg0, %[[EV]]
// CHECK-DAG: memref.copy %arg0, %[[CV]]
// CHECK: %[[A:.*]] = memref.expand_shape %arg0
// CHECK: return %[[E]], %[[C]], %[[A]]
func.func private @reshaped(%a: memref<8x8xf32>) -> (memref<2x4x8xf32>, memref<64xf32>, memref<2x4x8xf32>) {
  %b = memref.alloc() {alignment = 64 : i64} : memref<8x8xf32>
  memref.copy %a, %b : memref<8x8xf32> to memref<8x8xf32>
  %e = memref.expand_shape %b [[0, 1], [2]] output_shape [2, 4, 8] : memref<8x8xf32> into memref<2x4x8xf32>
  %c = memref.alloc() : memref<8x8xf32>
  memref.copy %a, %c : memref<8x8xf32> to memref<8x8xf32>
  %f = memref.collapse_shape %c [[0, 1]] : memref<8x8xf32> into memref<64xf32>
  %g = memref.expand_shape %a [[0, 1], [2]] output_shape [2, 4, 8] : memref<8x8xf32> into memref<2x4x8xf32>
  return %e, %f, %g : memref<2x4x8xf32>, memref<64xf32>, memref<2x4x8xf32>
}
