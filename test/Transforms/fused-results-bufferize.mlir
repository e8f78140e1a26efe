// RUN: zb-opt %s --zb-fuse-elementwise --cse --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s

// A returned producer fused into its reader (--zb-fuse-elementwise): after
// CSE both results start from one tensor.empty, and bufferization must
// still give them a buffer each (otherwise the stash would hold the
// reader's values), as the CPU and GPU pipelines rely on.
// CHECK-LABEL: func.func @returned_producer
// CHECK-DAG: %[[A:.*]] = memref.alloc() {{.*}} : memref<4x8xf32>
// CHECK-DAG: %[[B:.*]] = memref.alloc() {{.*}} : memref<4x8xf32>
// CHECK: linalg.generic {{.*}} outs(%[[A]], %[[B]] : memref<4x8xf32>, memref<4x8xf32>)
// CHECK: return %[[A]], %[[B]]
func.func @returned_producer(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %t = math.tanh %p : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  return %a, %g : tensor<4x8xf32>, tensor<4x8xf32>
}
