// RUN: zb-opt %s --zb-partition-stages="stages=2" | FileCheck %s

// Four products of equal FLOPs: the residual r = x·w0, then two
// projections of n = relu(r) (q = n·wq, k = n·wk, as an attention's query
// and key of its normalised input), then (q + k)·w1 added to r. Cutting
// where at most two values cross gives stages of one and three products
// (after n: r and n cross; after q + k: r and the sum); the cost model also
// cuts after q, where three values cross (r, n and q), as it does inside an
// attention, into two stages of two products each.
// CHECK-LABEL: func.func @projections(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x16xf32>,
// CHECK-SAME: %[[W0:[^:]*]]: tensor<16x16xf32> {zb.param = "w0"}, %[[WQ:[^:]*]]: tensor<16x16xf32> {zb.param = "wq"}, %[[WK:[^:]*]]: tensor<16x16xf32> {zb.param = "wk"}, %[[W1:[^:]*]]: tensor<16x16xf32> {zb.param = "w1"}
// CHECK: %[[S0:.*]]:3 = pipe.stage 0 on rank 0 data(%[[X]] : tensor<8x16xf32>) params(%[[W0]], %[[WQ]] :
// CHECK-SAME: -> tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-COUNT-2: linalg.matmul
// CHECK-NOT: linalg.matmul
// CHECK: pipe.yield
// CHECK: pipe.stage 1 on rank 1 inputs(%[[S0]]#0, %[[S0]]#1, %[[S0]]#2 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) params(%[[WK]], %[[W1]] :
// CHECK-COUNT-2: linalg.matmul
// CHECK-NOT: linalg.matmul
// CHECK: linalg.reduce
#id = affine_map<(i, j) -> (i, j)>
func.func @projections(%x: tensor<8x16xf32>,
    %w0: tensor<16x16xf32> {zb.param = "w0"},
    %wq: tensor<16x16xf32> {zb.param = "wq"},
    %wk: tensor<16x16xf32> {zb.param = "wk"},
    %w1: tensor<16x16xf32> {zb.param = "w1"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r = linalg.matmul ins(%x, %w0 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.maximumf %a, %zero : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  %q = linalg.matmul ins(%h, %wq : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %k = linalg.matmul ins(%h, %wk : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%q, %k : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.addf %a, %b : f32
    linalg.yield %t : f32
  } -> tensor<8x16xf32>
  %m = linalg.matmul ins(%s, %w1 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %r : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.addf %a, %b : f32
    linalg.yield %t : f32
  } -> tensor<8x16xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%y : tensor<8x16xf32>) outs(%l0 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  return %loss : tensor<f32>
}
