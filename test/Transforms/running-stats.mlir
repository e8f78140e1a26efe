// RUN: zb-opt %s --zb-partition-stages="stages=2" --zb-autodiff --zb-split-backward | FileCheck %s

// A running statistic stays with the stage that computes its operand (the
// data's mean sinks to stage 0, the hidden mean follows the cut to stage
// 1), in the forward region only: autodiff gives it no adjoint and the
// B and W regions do not record it again.
// CHECK-LABEL: func.func @stats
// CHECK: pipe.stage 0 on rank 0
// CHECK: forward {
// CHECK: pipe.running_stat %{{.*}} {buffer = "x.mean", momentum = 1.000000e-01 : f64} : tensor<8xf32>
// CHECK: } backward_input {
// CHECK-NOT: pipe.running_stat
// CHECK: pipe.stage 1 on rank 1
// CHECK: forward {
// CHECK: pipe.running_stat %{{.*}} {buffer = "h.mean", momentum = 2.000000e-01 : f64} : tensor<8xf32>
// CHECK: } backward_input {
// CHECK-NOT: pipe.running_stat
// CHECK: return

#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#all = affine_map<(i, j) -> ()>

func.func @stats(%x: tensor<4x8xf32>,
                 %w1: tensor<8x8xf32> {zb.param = "w1"},
                 %w2: tensor<8x8xf32> {zb.param = "w2"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e8 = tensor.empty() : tensor<8xf32>
  %z8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
  %xm = linalg.generic {indexing_maps = [#id, #col],
                        iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%z8 : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  pipe.running_stat %xm {buffer = "x.mean", momentum = 0.1 : f64} : tensor<8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x8xf32>)
                     outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = pipe.cut %h : tensor<4x8xf32>
  %hm = linalg.generic {indexing_maps = [#id, #col],
                        iterator_types = ["reduction", "parallel"]}
      ins(%c : tensor<4x8xf32>) outs(%z8 : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  pipe.running_stat %hm {buffer = "h.mean", momentum = 0.2 : f64} : tensor<8xf32>
  %y = linalg.matmul ins(%c, %w2 : tensor<4x8xf32>, tensor<8x8xf32>)
                     outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id, #all],
                       iterator_types = ["reduction", "reduction"]}
      ins(%y : tensor<4x8xf32>) outs(%z0 : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.mulf %a, %a : f32
    %r = arith.addf %acc, %s : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
