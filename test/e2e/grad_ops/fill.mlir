// linalg.fill as an init and as a constant operand: a non-zero fill (1.5)
// as the accumulator of a sum reduction (its value shifts the result, no
// gradient flows into it), a zero fill as a matmul init, and a fill used as
// an elementwise operand.
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @fill(%a: tensor<3x4xf64> {zb.param = "a"},
                %b: tensor<4x3xf64> {zb.param = "b"}) -> tensor<f64> {
  %zero = arith.constant 0.0 : f64
  %c15 = arith.constant 1.5 : f64
  %cm2 = arith.constant -2.0 : f64
  %e3 = tensor.empty() : tensor<3xf64>
  %f3 = linalg.fill ins(%c15 : f64) outs(%e3 : tensor<3xf64>) -> tensor<3xf64>
  %rs = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<3x4xf64>) outs(%f3 : tensor<3xf64>) {
  ^bb0(%p: f64, %acc: f64):
    %q = arith.mulf %p, %p : f64
    %s = arith.addf %acc, %q : f64
    linalg.yield %s : f64
  } -> tensor<3xf64>
  %e33 = tensor.empty() : tensor<3x3xf64>
  %z33 = linalg.fill ins(%zero : f64) outs(%e33 : tensor<3x3xf64>) -> tensor<3x3xf64>
  %m = linalg.matmul ins(%a, %b : tensor<3x4xf64>, tensor<4x3xf64>) outs(%z33 : tensor<3x3xf64>) -> tensor<3x3xf64>
  %k = linalg.fill ins(%cm2 : f64) outs(%e33 : tensor<3x3xf64>) -> tensor<3x3xf64>
  %y = linalg.generic {indexing_maps = [#id, #id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %k, %rs : tensor<3x3xf64>, tensor<3x3xf64>, tensor<3xf64>) outs(%e33 : tensor<3x3xf64>) {
  ^bb0(%p: f64, %q: f64, %r: f64, %o: f64):
    %t = arith.mulf %p, %q : f64
    %u = arith.mulf %t, %r : f64
    linalg.yield %u : f64
  } -> tensor<3x3xf64>
  // Loss = sum over all entries of 0.5 * y^2 + w * y, with the fixed
  // non-uniform weights w = ((3*d0 + 5*d1) mod 7) * 0.375 - 1.
  %loss_zero = arith.constant 0.0 : f64
  %loss_e = tensor.empty() : tensor<f64>
  %loss_init = linalg.fill ins(%loss_zero : f64) outs(%loss_e : tensor<f64>) -> tensor<f64>
  %loss = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                          iterator_types = ["reduction", "reduction"]}
      ins(%y : tensor<3x3xf64>) outs(%loss_init : tensor<f64>) {
  ^bb0(%l_v: f64, %l_acc: f64):
    %l_i0 = linalg.index 0 : index
    %l_i1 = linalg.index 1 : index
    %l_k0 = arith.constant 3 : index
    %l_t0 = arith.muli %l_i0, %l_k0 : index
    %l_k1 = arith.constant 5 : index
    %l_t1 = arith.muli %l_i1, %l_k1 : index
    %l_s0 = arith.addi %l_t0, %l_t1 : index
    %l_seven = arith.constant 7 : index
    %l_m = arith.remsi %l_s0, %l_seven : index
    %l_mi = arith.index_cast %l_m : index to i64
    %l_mf = arith.sitofp %l_mi : i64 to f64
    %l_step = arith.constant 0.375 : f64
    %l_minus1 = arith.constant -1.0 : f64
    %l_ws = arith.mulf %l_mf, %l_step : f64
    %l_w = arith.addf %l_ws, %l_minus1 : f64
    %l_half = arith.constant 0.5 : f64
    %l_vv = arith.mulf %l_v, %l_v : f64
    %l_sq = arith.mulf %l_vv, %l_half : f64
    %l_wv = arith.mulf %l_w, %l_v : f64
    %l_term = arith.addf %l_sq, %l_wv : f64
    %l_r = arith.addf %l_acc, %l_term : f64
    linalg.yield %l_r : f64
  } -> tensor<f64>
  return %loss : tensor<f64>
}
