// Generic reduction forms: a row reduction (sum of (a - row mean)^2, as in
// LayerNorm's variance), a column reduction (sum of a*b over rows), and a
// max reduction of a computed element (max over columns of a*b).
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#col = affine_map<(i, j) -> (j)>
#v = affine_map<(i) -> (i)>
func.func @generic_reduction(%a: tensor<4x4xf64> {zb.param = "a"},
                             %b: tensor<4x4xf64> {zb.param = "b"}) -> tensor<f64> {
  %zero = arith.constant 0.0 : f64
  %ninf = arith.constant 0xFFF0000000000000 : f64
  %quarter = arith.constant 0.25 : f64
  %e = tensor.empty() : tensor<4xf64>
  %z = linalg.fill ins(%zero : f64) outs(%e : tensor<4xf64>) -> tensor<4xf64>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<4x4xf64>) outs(%z : tensor<4xf64>) {
  ^bb0(%p: f64, %acc: f64):
    %s = arith.addf %p, %acc : f64
    linalg.yield %s : f64
  } -> tensor<4xf64>
  %var = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a, %sum : tensor<4x4xf64>, tensor<4xf64>) outs(%z : tensor<4xf64>) {
  ^bb0(%p: f64, %s: f64, %acc: f64):
    %m = arith.mulf %s, %quarter : f64
    %d = arith.subf %p, %m : f64
    %sq = arith.mulf %d, %d : f64
    %r = arith.addf %acc, %sq : f64
    linalg.yield %r : f64
  } -> tensor<4xf64>
  %colsum = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%a, %b : tensor<4x4xf64>, tensor<4x4xf64>) outs(%z : tensor<4xf64>) {
  ^bb0(%p: f64, %q: f64, %acc: f64):
    %m = arith.mulf %p, %q : f64
    %r = arith.addf %acc, %m : f64
    linalg.yield %r : f64
  } -> tensor<4xf64>
  %mx0 = linalg.fill ins(%ninf : f64) outs(%e : tensor<4xf64>) -> tensor<4xf64>
  %rowmax = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a, %b : tensor<4x4xf64>, tensor<4x4xf64>) outs(%mx0 : tensor<4xf64>) {
  ^bb0(%p: f64, %q: f64, %acc: f64):
    %m = arith.mulf %p, %q : f64
    %r = arith.maximumf %acc, %m : f64
    linalg.yield %r : f64
  } -> tensor<4xf64>
  %y = linalg.generic {indexing_maps = [#v, #v, #v, #v], iterator_types = ["parallel"]}
      ins(%var, %colsum, %rowmax : tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) outs(%e : tensor<4xf64>) {
  ^bb0(%p: f64, %q: f64, %r: f64, %o: f64):
    %t = arith.mulf %p, %q : f64
    %u = arith.addf %t, %r : f64
    linalg.yield %u : f64
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
