// RUN: zb-opt %s --zb-pipeline="stages=1 microbatches=1 schedule=1f1b target=gpu lower-to-cpu=false" | FileCheck %s --check-prefix=GPU
// RUN: zb-opt %s --zb-pipeline="stages=1 microbatches=1 schedule=1f1b target=cpu lower-to-cpu=false" | FileCheck %s --check-prefix=CPU

// A mixture of experts' grouped product: for the GPU the pipeline expands
// it to every group's batched product (cuBLAS has no grouped gemm) before
// the partition and autodiff, which count and differentiate what runs
// there; the CPU keeps it for the runtime's grouped gemms. Forward FLOPs:
// on the GPU the batched product 2 * 3 * 6 * 5 * 4 = 720, the pick of each
// row's group 6 * 5 * 3 * 2 = 180 and the loss 60; on the CPU the grouped
// product 2 * 6 * 5 * 4 = 240 and the loss. Backward (all W: x is data):
// the loss's adjoint (60), then on the GPU the pick's (6 * 5 * 3 = 90, a
// select per point: the adjoint where the group is picked, else 0) and a
// batched product (720), on the CPU a grouped one (240).
// GPU: cost_b = array<f64: 0.000000e+00>, cost_f = array<f64: 9.600000e+02>, cost_w = array<f64: 8.700000e+02>
// GPU: tensor<3x6x5xf32>
// CPU: cost_b = array<f64: 0.000000e+00>, cost_f = array<f64: 3.000000e+02>, cost_w = array<f64: 3.000000e+02>
// CPU-NOT: tensor<3x6x5xf32>
#x = affine_map<(r, n, e, k) -> (r, k)>
#w = affine_map<(r, n, e, k) -> (e, k, n)>
#g = affine_map<(r, n, e, k) -> (r)>
#y = affine_map<(r, n, e, k) -> (r, n)>
#all = affine_map<(r, n) -> (r, n)>
#none = affine_map<(r, n) -> ()>
func.func @experts(%x: tensor<6x4xf32>, %g: tensor<6xi64>, %w: tensor<3x4x5xf32> {zb.param = "w"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x5xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6x5xf32>) -> tensor<6x5xf32>
  %p = linalg.generic {indexing_maps = [#x, #w, #g, #y], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%x, %w, %g : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<6xi64>) outs(%f : tensor<6x5xf32>) {
  ^bb0(%a: f32, %b: f32, %gi: i64, %acc: f32):
    %i = linalg.index 2 : index
    %ii = arith.index_cast %i : index to i64
    %hit = arith.cmpi eq, %gi, %ii : i64
    %m = arith.mulf %a, %b : f32
    %s = arith.select %hit, %m, %zero : f32
    %sum = arith.addf %acc, %s : f32
    linalg.yield %sum : f32
  } -> tensor<6x5xf32>
  %e0 = tensor.empty() : tensor<f32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#all, #none], iterator_types = ["reduction", "reduction"]} ins(%p : tensor<6x5xf32>) outs(%f0 : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %sum = arith.addf %acc, %sq : f32
    linalg.yield %sum : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
