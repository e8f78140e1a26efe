// RUN: zb-opt %s --zb-mark-triangular-products --split-input-file | FileCheck %s

// Causal attention's forward: the scores' product feeds only the scaling and
// the mask, which puts -inf above the diagonal, so its terms there are not
// needed (loops m = d1, n = d2 of the batch_matmul); the softmax of the
// masked scores is zero there, so P V's terms with k (d3) > m (d1) vanish.
// CHECK-LABEL: func.func @forward
// CHECK: linalg.batch_matmul {zb.skip_terms = array<i64: 1, 2>}
// CHECK: linalg.softmax
// CHECK: linalg.batch_matmul {zb.skip_terms = array<i64: 1, 3>}
#id = affine_map<(b, i, j) -> (b, i, j)>
#mask = affine_map<(b, i, j) -> (i, j)>
func.func @forward(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %mask = arith.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %e = tensor.empty() : tensor<2x4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%f : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) {
  ^bb0(%x: f32, %out: f32):
    %c = arith.constant 0.125 : f32
    %y = arith.mulf %x, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x4xf32>
  %masked = linalg.generic {indexing_maps = [#id, #mask, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scaled, %mask : tensor<2x4x4xf32>, tensor<4x4xi1>) outs(%e : tensor<2x4x4xf32>) {
  ^bb0(%x: f32, %m: i1, %out: f32):
    %ninf = arith.constant 0xFF800000 : f32
    %y = arith.select %m, %ninf, %x : f32
    linalg.yield %y : f32
  } -> tensor<2x4x4xf32>
  %p = linalg.softmax dimension(2) ins(%masked : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %e2 = tensor.empty() : tensor<2x4x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>) outs(%f2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Nothing to skip: a mask that keeps the upper triangle (-inf below the
// diagonal); scores that are also returned (read above the diagonal); a
// softmax over the rows' other dimension; a mask that is not uniform above
// the diagonal.
// CHECK-LABEL: func.func @nothing
// CHECK-NOT: zb.skip_terms
#id = affine_map<(b, i, j) -> (b, i, j)>
#mask = affine_map<(b, i, j) -> (i, j)>
func.func @nothing(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %lower = arith.constant dense<[[false, false, false, false], [true, false, false, false], [true, true, false, false], [true, true, true, false]]> : tensor<4x4xi1>
  %ragged = arith.constant dense<[[false, true, true, true], [false, false, false, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %e = tensor.empty() : tensor<2x4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%f : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %masked = linalg.generic {indexing_maps = [#id, #mask, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %lower : tensor<2x4x4xf32>, tensor<4x4xi1>) outs(%e : tensor<2x4x4xf32>) {
  ^bb0(%x: f32, %m: i1, %out: f32):
    %ninf = arith.constant 0xFF800000 : f32
    %y = arith.select %m, %ninf, %x : f32
    linalg.yield %y : f32
  } -> tensor<2x4x4xf32>
  %p = linalg.softmax dimension(2) ins(%masked : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %e2 = tensor.empty() : tensor<2x4x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>) outs(%f2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s2 = linalg.batch_matmul ins(%q, %kt : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%f : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %masked2 = linalg.generic {indexing_maps = [#id, #mask, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s2, %ragged : tensor<2x4x4xf32>, tensor<4x4xi1>) outs(%e : tensor<2x4x4xf32>) {
  ^bb0(%x: f32, %m: i1, %out: f32):
    %ninf = arith.constant 0xFF800000 : f32
    %y = arith.select %m, %ninf, %x : f32
    linalg.yield %y : f32
  } -> tensor<2x4x4xf32>
  %p2 = linalg.softmax dimension(1) ins(%masked2 : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %o2 = linalg.batch_matmul ins(%p2, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>) outs(%f2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %p3 = linalg.softmax dimension(2) ins(%masked2 : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %o3 = linalg.batch_matmul ins(%p3, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>) outs(%f2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o, %s2, %o2, %o3 : tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Across a pipeline's regions: stage 0 hands P (the masked softmax) to
// stage 1, whose forward multiplies it by V (k > m vanishes); its B gets P
// from the F->B stash and computes dS = P (dP - rowsum(P dP)) from
// dP = dO V^T, which it reads only where P multiplies it (dP's terms above
// the diagonal are not needed: m = d1, n = d2); its W gets P again from
// the B->W stash and computes dV = P^T dO (P indexed (k, m): m > k
// vanishes, loops d1, d2).
// CHECK-LABEL: func.func @stages
// CHECK: pipe.stage 0
// CHECK: linalg.softmax
// CHECK: pipe.stage 1
// CHECK: forward
// CHECK: linalg.batch_matmul {zb.skip_terms = array<i64: 1, 3>}
// CHECK: backward_input
// CHECK: %[[DP:.*]] = linalg.generic
// CHECK-SAME: zb.skip_terms = array<i64: 1, 2>
// CHECK: backward_weight
// CHECK: linalg.generic
// CHECK-SAME: zb.skip_terms = array<i64: 1, 2>
#id = affine_map<(b, i, j) -> (b, i, j)>
#mask = affine_map<(b, i, j) -> (i, j)>
#rows = affine_map<(b, i, j) -> (b, i)>
#do = affine_map<(b, m, n, k) -> (b, m, k)>
#v = affine_map<(b, m, n, k) -> (b, n, k)>
#dp = affine_map<(b, m, n, k) -> (b, m, n)>
#pt = affine_map<(b, k, m, n) -> (b, k, m)>
#dot = affine_map<(b, k, m, n) -> (b, k, n)>
#dv = affine_map<(b, k, m, n) -> (b, m, n)>
func.func @stages(%s: tensor<1x4x4xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %p = pipe.stage 0 on rank 0 inputs(%s : tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    forward {
    ^bb0(%x: tensor<1x4x4xf32>):
      %mask = arith.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
      %e = tensor.empty() : tensor<1x4x4xf32>
      %masked = linalg.generic {indexing_maps = [#id, #mask, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %mask : tensor<1x4x4xf32>, tensor<4x4xi1>) outs(%e : tensor<1x4x4xf32>) {
      ^bb0(%a: f32, %m: i1, %o: f32):
        %ninf = arith.constant 0xFF800000 : f32
        %y = arith.select %m, %ninf, %a : f32
        linalg.yield %y : f32
      } -> tensor<1x4x4xf32>
      %sm = linalg.softmax dimension(2) ins(%masked : tensor<1x4x4xf32>) outs(%e : tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
      pipe.yield %sm : tensor<1x4x4xf32>
    }
  %o = pipe.stage 1 on rank 1 inputs(%p : tensor<1x4x4xf32>) params(%v : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
    forward {
    ^bb0(%pp: tensor<1x4x4xf32>, %vv: tensor<1x4x8xf32>):
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<1x4x8xf32>
      %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
      %out = linalg.batch_matmul ins(%pp, %vv : tensor<1x4x4xf32>, tensor<1x4x8xf32>) outs(%f : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
      pipe.yield %out : tensor<1x4x8xf32> stash(%pp, %vv : tensor<1x4x4xf32>, tensor<1x4x8xf32>)
    } backward_input {
    ^bb0(%bp: tensor<1x4x4xf32>, %bv: tensor<1x4x8xf32>, %do: tensor<1x4x8xf32>):
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<1x4x4xf32>
      %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
      %dp = linalg.generic {indexing_maps = [#do, #v, #dp], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%do, %bv : tensor<1x4x8xf32>, tensor<1x4x8xf32>) outs(%f : tensor<1x4x4xf32>) {
      ^bb0(%a: f32, %b: f32, %acc: f32):
        %t = arith.mulf %a, %b : f32
        %r = arith.addf %acc, %t : f32
        linalg.yield %r : f32
      } -> tensor<1x4x4xf32>
      %e1 = tensor.empty() : tensor<1x4xf32>
      %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x4xf32>) -> tensor<1x4xf32>
      %rs = linalg.generic {indexing_maps = [#id, #id, #rows], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dp, %bp : tensor<1x4x4xf32>, tensor<1x4x4xf32>) outs(%f1 : tensor<1x4xf32>) {
      ^bb0(%a: f32, %b: f32, %acc: f32):
        %t = arith.mulf %a, %b : f32
        %r = arith.addf %acc, %t : f32
        linalg.yield %r : f32
      } -> tensor<1x4xf32>
      %ds = linalg.generic {indexing_maps = [#id, #id, #rows, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%bp, %dp, %rs : tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4xf32>) outs(%e : tensor<1x4x4xf32>) {
      ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
        %t = arith.subf %b, %c : f32
        %r = arith.mulf %a, %t : f32
        linalg.yield %r : f32
      } -> tensor<1x4x4xf32>
      pipe.yield %ds : tensor<1x4x4xf32> stash(%bp, %do : tensor<1x4x4xf32>, tensor<1x4x8xf32>)
    } backward_weight {
    ^bb0(%wp: tensor<1x4x4xf32>, %wdo: tensor<1x4x8xf32>):
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<1x4x8xf32>
      %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
      %dv = linalg.generic {indexing_maps = [#pt, #dot, #dv], iterator_types = ["parallel", "reduction", "parallel", "parallel"]} ins(%wp, %wdo : tensor<1x4x4xf32>, tensor<1x4x8xf32>) outs(%f : tensor<1x4x8xf32>) {
      ^bb0(%a: f32, %b: f32, %acc: f32):
        %t = arith.mulf %a, %b : f32
        %r = arith.addf %acc, %t : f32
        linalg.yield %r : f32
      } -> tensor<1x4x8xf32>
      pipe.yield %dv : tensor<1x4x8xf32>
    }
  return %o : tensor<1x4x8xf32>
}

// -----

// The mask as index arithmetic in the scaling's body (examples/gpt.mlir's
// form): column > row selects -inf. With the comparison the other way round
// (-inf below the diagonal) nothing is skipped.
// CHECK-LABEL: func.func @index_mask
// CHECK: linalg.batch_matmul {zb.skip_terms = array<i64: 1, 2>}
// CHECK: linalg.batch_matmul {zb.skip_terms = array<i64: 1, 3>}
// CHECK-LABEL: func.func @index_mask_below
// CHECK-NOT: zb.skip_terms
#id = affine_map<(b, i, j) -> (b, i, j)>
func.func @index_mask(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<2x4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%f : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) {
  ^bb0(%x: f32, %out: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %y = arith.mulf %x, %scale : f32
    %above = arith.cmpi ugt, %j, %i : index
    %r = arith.select %above, %ninf, %y : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4xf32>
  %p = linalg.softmax dimension(2) ins(%masked : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %e2 = tensor.empty() : tensor<2x4x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>) outs(%f2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

func.func @index_mask_below(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<2x4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%f : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) {
  ^bb0(%x: f32, %out: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %below = arith.cmpi ugt, %i, %j : index
    %r = arith.select %below, %ninf, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4xf32>
  %p = linalg.softmax dimension(2) ins(%masked : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %e2 = tensor.empty() : tensor<2x4x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>) outs(%f2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Scores whose upper half meets P's zeros only after a division: 1/0 is not
// finite, so changing them there could change the result; not marked. (P V
// still is.)
// CHECK-LABEL: func.func @division
// CHECK: %[[S:.*]] = linalg.batch_matmul ins
// CHECK: linalg.batch_matmul {zb.skip_terms = array<i64: 1, 3>}
#id = affine_map<(b, i, j) -> (b, i, j)>
func.func @division(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %x: tensor<2x4x4xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<2x4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %out: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %above = arith.cmpi ugt, %j, %i : index
    %r = arith.select %above, %ninf, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4xf32>
  %p = linalg.softmax dimension(2) ins(%masked : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%f : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %w = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %p : tensor<2x4x4xf32>, tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %one = arith.constant 1.0 : f32
    %r = arith.divf %one, %a : f32
    %y = arith.mulf %r, %b : f32
    linalg.yield %y : f32
  } -> tensor<2x4x4xf32>
  %e2 = tensor.empty() : tensor<2x4x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>) outs(%f2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %w, %o : tensor<2x4x4xf32>, tensor<2x4x8xf32>
}

// -----

// A cut between the scores and their mask, unsplit backwards: stage 0's
// scores go to stage 1's mask (unread above the diagonal); stage 0's
// backward gets the masked gradient stage 1's backward yields for them
// (zero above the diagonal), so dQ = dS K leaves out k (d3) > m (d1).
// CHECK-LABEL: func.func @across_stages
// CHECK: pipe.stage 0
// CHECK: linalg.batch_matmul {zb.skip_terms = array<i64: 1, 2>}
// CHECK: backward
// CHECK: linalg.generic
// CHECK-SAME: zb.skip_terms = array<i64: 1, 3>
// CHECK: pipe.stage 1
#id = affine_map<(b, i, j) -> (b, i, j)>
#mask = affine_map<(b, i, j) -> (i, j)>
#ds = affine_map<(b, m, n, k) -> (b, m, k)>
#k = affine_map<(b, m, n, k) -> (b, n, k)>
#dq = affine_map<(b, m, n, k) -> (b, m, n)>
func.func @across_stages(%q: tensor<1x4x8xf32>, %kt: tensor<1x8x4xf32>, %k: tensor<1x8x4xf32>) -> tensor<1x4x4xf32> {
  %s = pipe.stage 0 on rank 0 inputs(%q : tensor<1x4x8xf32>) data(%kt, %k : tensor<1x8x4xf32>, tensor<1x8x4xf32>) -> tensor<1x4x4xf32>
    forward {
    ^bb0(%fq: tensor<1x4x8xf32>, %fkt: tensor<1x8x4xf32>, %fk: tensor<1x8x4xf32>):
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<1x4x4xf32>
      %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
      %sc = linalg.batch_matmul ins(%fq, %fkt : tensor<1x4x8xf32>, tensor<1x8x4xf32>) outs(%f : tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
      pipe.yield %sc : tensor<1x4x4xf32> stash(%fk : tensor<1x8x4xf32>)
    } backward {
    ^bb0(%bk: tensor<1x8x4xf32>, %ds: tensor<1x4x4xf32>):
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<1x4x8xf32>
      %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
      %dq = linalg.generic {indexing_maps = [#ds, #k, #dq], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ds, %bk : tensor<1x4x4xf32>, tensor<1x8x4xf32>) outs(%f : tensor<1x4x8xf32>) {
      ^bb0(%a: f32, %b: f32, %acc: f32):
        %t = arith.mulf %a, %b : f32
        %r = arith.addf %acc, %t : f32
        linalg.yield %r : f32
      } -> tensor<1x4x8xf32>
      pipe.yield %dq : tensor<1x4x8xf32>
    }
  %p = pipe.stage 1 on rank 1 inputs(%s : tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    forward {
    ^bb0(%x: tensor<1x4x4xf32>):
      %mask = arith.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
      %e = tensor.empty() : tensor<1x4x4xf32>
      %masked = linalg.generic {indexing_maps = [#id, #mask, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %mask : tensor<1x4x4xf32>, tensor<4x4xi1>) outs(%e : tensor<1x4x4xf32>) {
      ^bb0(%a: f32, %m: i1, %out: f32):
        %ninf = arith.constant 0xFF800000 : f32
        %y = arith.select %m, %ninf, %a : f32
        linalg.yield %y : f32
      } -> tensor<1x4x4xf32>
      pipe.yield %masked : tensor<1x4x4xf32>
    } backward {
    ^bb0(%dm: tensor<1x4x4xf32>):
      %mask = arith.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
      %e = tensor.empty() : tensor<1x4x4xf32>
      %dx = linalg.generic {indexing_maps = [#id, #mask, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%dm, %mask : tensor<1x4x4xf32>, tensor<4x4xi1>) outs(%e : tensor<1x4x4xf32>) {
      ^bb0(%a: f32, %m: i1, %out: f32):
        %z = arith.constant 0.0 : f32
        %y = arith.select %m, %z, %a : f32
        linalg.yield %y : f32
      } -> tensor<1x4x4xf32>
      pipe.yield %dx : tensor<1x4x4xf32>
    }
  return %p : tensor<1x4x4xf32>
}
