// Max and min reductions with ties: the max over k of [a, a, c] (a read
// twice, selected by linalg.index; c broadcast) and the min over k of the
// broadcast [b, b, b]. Tied elements share the output's adjoint evenly: where a > c
// each copy of a takes half, so that a's gradient is the output's (max(a,
// a, c) = a there); the min of three copies of b is b, whose gradient is
// the output's, not three times it.
#in = affine_map<(i, j, k) -> (i, j)>
#in3 = affine_map<(i, j, k) -> (i, j, k)>
#out = affine_map<(i, j, k) -> (i, j)>
#id = affine_map<(i, j) -> (i, j)>
func.func @reduce_max_ties(%a: tensor<4x3xf64> {zb.param = "a"},
                           %c: tensor<4x3xf64> {zb.param = "c"},
                           %b: tensor<4x3xf64> {zb.param = "b"}) -> tensor<f64> {
  %ninf = arith.constant 0xFFF0000000000000 : f64
  %pinf = arith.constant 0x7FF0000000000000 : f64
  %e = tensor.empty() : tensor<4x3xf64>
  %mx0 = linalg.fill ins(%ninf : f64) outs(%e : tensor<4x3xf64>) -> tensor<4x3xf64>
  %mn0 = linalg.fill ins(%pinf : f64) outs(%e : tensor<4x3xf64>) -> tensor<4x3xf64>
  %e3 = tensor.empty() : tensor<4x3x3xf64>
  %cc = linalg.broadcast ins(%c : tensor<4x3xf64>) outs(%e3 : tensor<4x3x3xf64>) dimensions = [2]
  %mx = linalg.generic {indexing_maps = [#in, #in3, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %cc : tensor<4x3xf64>, tensor<4x3x3xf64>) outs(%mx0 : tensor<4x3xf64>) {
  ^bb0(%p: f64, %q: f64, %acc: f64):
    %k = linalg.index 2 : index
    %two = arith.constant 2 : index
    %first = arith.cmpi ult, %k, %two : index
    %x = arith.select %first, %p, %q : f64
    %m = arith.maximumf %acc, %x : f64
    linalg.yield %m : f64
  } -> tensor<4x3xf64>
  %bb = linalg.broadcast ins(%b : tensor<4x3xf64>) outs(%e3 : tensor<4x3x3xf64>) dimensions = [2]
  %mn = linalg.reduce ins(%bb : tensor<4x3x3xf64>) outs(%mn0 : tensor<4x3xf64>) dimensions = [2]
    (%in: f64, %acc: f64) {
      %m = arith.minimumf %in, %acc : f64
      linalg.yield %m : f64
    }
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mx, %mn : tensor<4x3xf64>, tensor<4x3xf64>) outs(%e : tensor<4x3xf64>) {
  ^bb0(%p: f64, %q: f64, %o: f64):
    %m = arith.mulf %p, %q : f64
    %s = arith.addf %m, %q : f64
    linalg.yield %s : f64
  } -> tensor<4x3xf64>
  // Loss = sum over all entries of 0.5 * y^2 + w * y, with the fixed
  // non-uniform weights w = ((3*d0 + d1) mod 7) * 0.375 - 1.
  %loss_zero = arith.constant 0.0 : f64
  %loss_e = tensor.empty() : tensor<f64>
  %loss_init = linalg.fill ins(%loss_zero : f64) outs(%loss_e : tensor<f64>) -> tensor<f64>
  %loss = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                          iterator_types = ["reduction", "reduction"]}
      ins(%y : tensor<4x3xf64>) outs(%loss_init : tensor<f64>) {
  ^bb0(%l_v: f64, %l_acc: f64):
    %l_i0 = linalg.index 0 : index
    %l_i1 = linalg.index 1 : index
    %l_k0 = arith.constant 3 : index
    %l_t0 = arith.muli %l_i0, %l_k0 : index
    %l_t1 = arith.addi %l_t0, %l_i1 : index
    %l_seven = arith.constant 7 : index
    %l_m = arith.remsi %l_t1, %l_seven : index
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
