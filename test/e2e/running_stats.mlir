// Two tanh layers with two running statistics: the batch mean of the data
// (stage 0; it does not depend on the parameters) and the batch mean of the
// squared hidden activation (stage 1; it moves with w1 as training goes).
// The loss is mean(y^2) over the microbatch's 4 x 8 outputs.

#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#all = affine_map<(i, j) -> ()>

func.func @stats(%x: tensor<4x8xf32>,
                 %w1: tensor<8x8xf32> {zb.param = "w1"},
                 %w2: tensor<8x8xf32> {zb.param = "w2"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %quarter = arith.constant 0.25 : f32
  %inv = arith.constant 0.03125 : f32
  %e8 = tensor.empty() : tensor<8xf32>
  %z8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
  %xm = linalg.generic {indexing_maps = [#id, #col],
                        iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%z8 : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.mulf %a, %quarter : f32
    %r = arith.addf %acc, %s : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  pipe.running_stat %xm {buffer = "x.running_mean", momentum = 0.1 : f64} : tensor<8xf32>

  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x8xf32>)
                     outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = linalg.generic {indexing_maps = [#id, #id],
                       iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %c = pipe.cut %t : tensor<4x8xf32>

  %hm = linalg.generic {indexing_maps = [#id, #col],
                        iterator_types = ["reduction", "parallel"]}
      ins(%c : tensor<4x8xf32>) outs(%z8 : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %s = arith.mulf %sq, %quarter : f32
    %r = arith.addf %acc, %s : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  pipe.running_stat %hm {buffer = "h.running_sq", init = 1.0 : f64, momentum = 0.2 : f64} : tensor<8xf32>

  %y = linalg.matmul ins(%c, %w2 : tensor<4x8xf32>, tensor<8x8xf32>)
                     outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id, #all],
                       iterator_types = ["reduction", "reduction"]}
      ins(%y : tensor<4x8xf32>) outs(%z0 : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %s = arith.mulf %sq, %inv : f32
    %r = arith.addf %acc, %s : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
