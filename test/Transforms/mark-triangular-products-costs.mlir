// RUN: zb-opt %s --split-input-file --zb-autodiff --zb-split-backward | FileCheck %s --check-prefix=WHOLE
// RUN: zb-opt %s --split-input-file --zb-autodiff --zb-split-backward --zb-mark-triangular-products | FileCheck %s --check-prefix=MARKED

// The stage's costs count the terms its products compute. Of each 2 x 4 x 4
// x 8 product of causal attention (2 * 256 FLOPs whole), a marked one
// computes the 10 of 16 pairs of its two triangular loops: 2 * 160. The
// forward: S = Q K^T and P V (512 -> 320 each), the mask's select (32) and
// the softmax (5 * 32): 1216 -> 832. The backward's four products (dP, dV,
// dQ, dK) save 192 each: 2208 -> 1440.
// WHOLE: pipe.stage 0
// WHOLE-SAME: cost_b = 2.208000e+03 : f64, cost_f = 1.216000e+03 : f64, cost_w = 0.000000e+00 : f64
// MARKED: pipe.stage 0
// MARKED-SAME: cost_b = 1.440000e+03 : f64, cost_f = 8.320000e+02 : f64, cost_w = 0.000000e+00 : f64
#id = affine_map<(b, i, j) -> (b, i, j)>
#mask = affine_map<(b, i, j) -> (i, j)>
func.func @attention(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %o = pipe.stage 0 on rank 0 inputs(%q, %kt, %v : tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> forward {
  ^bb0(%aq: tensor<2x4x8xf32>, %akt: tensor<2x8x4xf32>, %av: tensor<2x4x8xf32>):
    %zero = arith.constant 0.0 : f32
    %mask = arith.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
    %e = tensor.empty() : tensor<2x4x4xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %s = linalg.batch_matmul ins(%aq, %akt : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%f : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %masked = linalg.generic {indexing_maps = [#id, #mask, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %mask : tensor<2x4x4xf32>, tensor<4x4xi1>) outs(%e : tensor<2x4x4xf32>) {
    ^bb0(%x: f32, %m: i1, %out: f32):
      %ninf = arith.constant 0xFF800000 : f32
      %y = arith.select %m, %ninf, %x : f32
      linalg.yield %y : f32
    } -> tensor<2x4x4xf32>
    %p = linalg.softmax dimension(2) ins(%masked : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %e2 = tensor.empty() : tensor<2x4x8xf32>
    %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %r = linalg.batch_matmul ins(%p, %av : tensor<2x4x4xf32>, tensor<2x4x8xf32>) outs(%f2 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    pipe.yield %r : tensor<2x4x8xf32>
  }
  return %o : tensor<2x4x8xf32>
}

// -----

// Triangles of unequal sides, marked by hand: 6 x 8 x 4 with k <= m keeps
// 1 + 2 + 3 + 4 + 4 + 4 = 18 of the 24 (m, k) pairs, times n = 8, two
// FLOPs each: 288; 4 x 8 x 6 with k <= m keeps 1 + 2 + 3 + 4 = 10 of 24:
// 160 (whole: 384 each). Both runs count the marks.
// WHOLE: pipe.stage 0
// WHOLE-SAME: cost_f = 4.480000e+02 : f64
// MARKED: pipe.stage 0
// MARKED-SAME: cost_f = 4.480000e+02 : f64
func.func @rectangles(%a: tensor<6x4xf32>, %b: tensor<4x8xf32>, %c: tensor<4x6xf32>, %d: tensor<6x8xf32>) -> (tensor<6x8xf32>, tensor<4x8xf32>) {
  %o:2 = pipe.stage 0 on rank 0 inputs(%a, %b, %c, %d : tensor<6x4xf32>, tensor<4x8xf32>, tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>, tensor<4x8xf32> forward {
  ^bb0(%xa: tensor<6x4xf32>, %xb: tensor<4x8xf32>, %xc: tensor<4x6xf32>, %xd: tensor<6x8xf32>):
    %zero = arith.constant 0.0 : f32
    %e1 = tensor.empty() : tensor<6x8xf32>
    %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<6x8xf32>) -> tensor<6x8xf32>
    %p1 = linalg.matmul {zb.skip_terms = array<i64: 0, 2>} ins(%xa, %xb : tensor<6x4xf32>, tensor<4x8xf32>) outs(%f1 : tensor<6x8xf32>) -> tensor<6x8xf32>
    %e2 = tensor.empty() : tensor<4x8xf32>
    %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x8xf32>) -> tensor<4x8xf32>
    %p2 = linalg.matmul {zb.skip_terms = array<i64: 0, 2>} ins(%xc, %xd : tensor<4x6xf32>, tensor<6x8xf32>) outs(%f2 : tensor<4x8xf32>) -> tensor<4x8xf32>
    pipe.yield %p1, %p2 : tensor<6x8xf32>, tensor<4x8xf32>
  }
  return %o#0, %o#1 : tensor<6x8xf32>, tensor<4x8xf32>
}
