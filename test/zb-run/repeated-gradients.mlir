// Two parameters whose gradients are one value (here both unused, so both
// are the same zero tensor; in ResNet two biases whose gradients are the
// same sum): the gradient function returns it twice, and each parameter
// still gets its own gradient.
// RUN: rm -rf %t && mkdir -p %t
// RUN: env ZB_CACHE_DIR=%t/cache zb-run %s --grads --seed 1 --check-grad | FileCheck %s

// CHECK: zb-run: unused: 1 microbatch, mean loss
// CHECK: check-grad: worst relative error
func.func @unused(%x: tensor<4xf32> {zb.param = "x"},
                  %a: tensor<3xf32> {zb.param = "a"},
                  %b: tensor<3xf32> {zb.param = "b"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>], iterator_types = ["reduction"]}
      ins(%x : tensor<4xf32>) outs(%init : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}
