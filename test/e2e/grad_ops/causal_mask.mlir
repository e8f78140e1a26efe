// Integer and index computations in bodies, non-differentiable: a causal
// mask (linalg.index + arith.cmpi + arith.select to -inf) before
// linalg.softmax, and a multiplicative mask made with arith.index_cast and
// arith.sitofp (lower triangle weighted by (i - j + 1)).
#id = affine_map<(h, i, j) -> (h, i, j)>
func.func @causal_mask(%s: tensor<2x4x4xf64> {zb.param = "scores"},
                       %v: tensor<2x4x4xf64> {zb.param = "v"}) -> tensor<f64> {
  %ninf = arith.constant 0xFFF0000000000000 : f64
  %e = tensor.empty() : tensor<2x4x4xf64>
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<2x4x4xf64>) outs(%e : tensor<2x4x4xf64>) {
  ^bb0(%x: f64, %o: f64):
    %qi = linalg.index 1 : index
    %kj = linalg.index 2 : index
    %fut = arith.cmpi ugt, %kj, %qi : index
    %r = arith.select %fut, %ninf, %x : f64
    linalg.yield %r : f64
  } -> tensor<2x4x4xf64>
  %p = linalg.softmax dimension(2) ins(%masked : tensor<2x4x4xf64>) outs(%e : tensor<2x4x4xf64>) -> tensor<2x4x4xf64>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p, %v : tensor<2x4x4xf64>, tensor<2x4x4xf64>) outs(%e : tensor<2x4x4xf64>) {
  ^bb0(%pv: f64, %vv: f64, %o: f64):
    %qi = linalg.index 1 : index
    %kj = linalg.index 2 : index
    %qi64 = arith.index_cast %qi : index to i64
    %kj64 = arith.index_cast %kj : index to i64
    %past = arith.cmpi sle, %kj64, %qi64 : i64
    %pasti = arith.extui %past : i1 to i64
    %d = arith.subi %qi64, %kj64 : i64
    %c1 = arith.constant 1 : i64
    %d1 = arith.addi %d, %c1 : i64
    %wi = arith.muli %d1, %pasti : i64
    %wf = arith.sitofp %wi : i64 to f64
    %pw = arith.mulf %pv, %wf : f64
    %t = arith.mulf %pw, %vv : f64
    %u = arith.addf %t, %pv : f64
    linalg.yield %u : f64
  } -> tensor<2x4x4xf64>
  // Loss = sum over all entries of 0.5 * y^2 + w * y, with the fixed
  // non-uniform weights w = ((3*d0 + 5*d1 + 2*d2) mod 7) * 0.375 - 1.
  %loss_zero = arith.constant 0.0 : f64
  %loss_e = tensor.empty() : tensor<f64>
  %loss_init = linalg.fill ins(%loss_zero : f64) outs(%loss_e : tensor<f64>) -> tensor<f64>
  %loss = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> ()>],
                          iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%y : tensor<2x4x4xf64>) outs(%loss_init : tensor<f64>) {
  ^bb0(%l_v: f64, %l_acc: f64):
    %l_i0 = linalg.index 0 : index
    %l_i1 = linalg.index 1 : index
    %l_i2 = linalg.index 2 : index
    %l_k0 = arith.constant 3 : index
    %l_t0 = arith.muli %l_i0, %l_k0 : index
    %l_k1 = arith.constant 5 : index
    %l_t1 = arith.muli %l_i1, %l_k1 : index
    %l_k2 = arith.constant 2 : index
    %l_t2 = arith.muli %l_i2, %l_k2 : index
    %l_s0 = arith.addi %l_t0, %l_t1 : index
    %l_s1 = arith.addi %l_s0, %l_t2 : index
    %l_seven = arith.constant 7 : index
    %l_m = arith.remsi %l_s1, %l_seven : index
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
