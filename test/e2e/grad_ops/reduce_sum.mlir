// linalg.reduce with an addf body: over dims [0, 2] of a 3-d parameter and
// over dim 1 of a 2-d one (both with fill-zero inits), multiplied together.
#v = affine_map<(i) -> (i)>
func.func @reduce_sum(%a: tensor<3x4x5xf64> {zb.param = "a"},
                      %b: tensor<4x6xf64> {zb.param = "b"}) -> tensor<f64> {
  %zero = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<4xf64>
  %z = linalg.fill ins(%zero : f64) outs(%e : tensor<4xf64>) -> tensor<4xf64>
  %ra = linalg.reduce ins(%a : tensor<3x4x5xf64>) outs(%z : tensor<4xf64>) dimensions = [0, 2]
    (%in: f64, %acc: f64) {
      %s = arith.addf %in, %acc : f64
      linalg.yield %s : f64
    }
  %rb = linalg.reduce ins(%b : tensor<4x6xf64>) outs(%z : tensor<4xf64>) dimensions = [1]
    (%in: f64, %acc: f64) {
      %s = arith.addf %acc, %in : f64
      linalg.yield %s : f64
    }
  %y = linalg.generic {indexing_maps = [#v, #v, #v], iterator_types = ["parallel"]}
      ins(%ra, %rb : tensor<4xf64>, tensor<4xf64>) outs(%e : tensor<4xf64>) {
  ^bb0(%p: f64, %q: f64, %o: f64):
    %m = arith.mulf %p, %q : f64
    linalg.yield %m : f64
  } -> tensor<4xf64>
  // Loss = sum over all entries of 0.5 * y^2 + w * y, with the fixed
  // non-uniform weights w = ((3*d0) mod 7) * 0.375 - 1.
  %loss_zero = arith.constant 0.0 : f64
  %loss_e = tensor.empty() : tensor<f64>
  %loss_init = linalg.fill ins(%loss_zero : f64) outs(%loss_e : tensor<f64>) -> tensor<f64>
  %loss = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>],
                          iterator_types = ["reduction"]}
      ins(%y : tensor<4xf64>) outs(%loss_init : tensor<f64>) {
  ^bb0(%l_v: f64, %l_acc: f64):
    %l_i0 = linalg.index 0 : index
    %l_k0 = arith.constant 3 : index
    %l_t0 = arith.muli %l_i0, %l_k0 : index
    %l_seven = arith.constant 7 : index
    %l_m = arith.remsi %l_t0, %l_seven : index
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
