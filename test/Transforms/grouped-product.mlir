// RUN: zb-opt %s --zb-autodiff --zb-split-backward | FileCheck %s

// A grouped product (a mixture of experts' rows times their expert's
// weight, zb/Analysis/GroupedProduct.h) and its gradients: the input
// gradient is a grouped product of dy and the weights in B, the weight
// gradient one summing each group's rows in W. Each counts 2 FLOPs per
// term of the rows' own group, 2 * 6 * 5 * 4 = 240, not the 720 of its
// loops over all 3 groups.
// CHECK-LABEL: func.func @experts
// CHECK: pipe.stage 0
// CHECK-SAME: cost_b = 2.400000e+02 : f64, cost_f = 2.400000e+02 : f64, cost_w = 2.400000e+02 : f64
// CHECK: } backward_input {
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "reduction", "parallel"]}
// CHECK-SAME: outs(%{{.*}} : tensor<6x4xf32>)
// CHECK: linalg.index 2
// CHECK: arith.cmpi eq
// CHECK: } backward_weight {
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "parallel", "parallel"]}
// CHECK-SAME: outs(%{{.*}} : tensor<3x4x5xf32>)
// CHECK: linalg.index 2
// CHECK: arith.cmpi eq
#x = affine_map<(r, n, e, k) -> (r, k)>
#w = affine_map<(r, n, e, k) -> (e, k, n)>
#g = affine_map<(r, n, e, k) -> (r)>
#y = affine_map<(r, n, e, k) -> (r, n)>
#id = affine_map<(i, j) -> (i, j)>
func.func @experts(%x: tensor<6x4xf32>, %g: tensor<6xi64>, %w: tensor<3x4x5xf32>) -> tensor<6x5xf32> {
  %o = pipe.stage 0 on rank 0 inputs(%x, %g : tensor<6x4xf32>, tensor<6xi64>) params(%w : tensor<3x4x5xf32>) -> tensor<6x5xf32> forward {
  ^bb0(%ax: tensor<6x4xf32>, %ag: tensor<6xi64>, %aw: tensor<3x4x5xf32>):
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<6x5xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6x5xf32>) -> tensor<6x5xf32>
    %p = linalg.generic {indexing_maps = [#x, #w, #g, #y], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%ax, %aw, %ag : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<6xi64>) outs(%f : tensor<6x5xf32>) {
    ^bb0(%a: f32, %b: f32, %gi: i64, %acc: f32):
      %i = linalg.index 2 : index
      %ii = arith.index_cast %i : index to i64
      %hit = arith.cmpi eq, %gi, %ii : i64
      %m = arith.mulf %a, %b : f32
      %s = arith.select %hit, %m, %zero : f32
      %sum = arith.addf %acc, %s : f32
      linalg.yield %sum : f32
    } -> tensor<6x5xf32>
    pipe.yield %p : tensor<6x5xf32>
  }
  return %o : tensor<6x5xf32>
}
