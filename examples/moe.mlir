// A mixture-of-experts classifier: 16 features -> 32 (ReLU) -> a layer of
// 4 experts (32 -> 64, ReLU, -> 32), each sample routed to one expert (the
// router's top 1, weighted by its softmax probability) and added back to
// its input -> 10 classes, mean softmax cross-entropy. Written for one
// microbatch of 8 samples; the two pipe.cut markers split it into three
// pipeline stages.
//
// The experts' products are grouped products (each row times the weight of
// its group, zb/Analysis/GroupedProduct.h): on the CPU the runtime
// multiplies each expert's rows in one gemm, on the GPU the pipeline
// expands them to every expert's batched gemm.
//
// Arguments: %x (features) and %labels (class ids) are data; the others are
// parameters, named by their zb.param attribute.

#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#row = affine_map<(i, j) -> (i)>
#vec = affine_map<(i) -> (i)>
#scalar = affine_map<(i) -> ()>
// Grouped products over (row r, column n, expert e, inner k).
#gx = affine_map<(r, n, e, k) -> (r, k)>
#gw = affine_map<(r, n, e, k) -> (e, k, n)>
#gg = affine_map<(r, n, e, k) -> (r)>
#gy = affine_map<(r, n, e, k) -> (r, n)>

func.func @moe(%x: tensor<8x16xf32>, %labels: tensor<8xi64>,
               %w1: tensor<16x32xf32> {zb.param = "l1.weight"},
               %b1: tensor<32xf32> {zb.param = "l1.bias"},
               %wr: tensor<32x4xf32> {zb.param = "router.weight"},
               %up: tensor<4x32x64xf32> {zb.param = "experts.up"},
               %down: tensor<4x64x32xf32> {zb.param = "experts.down"},
               %wh: tensor<32x10xf32> {zb.param = "head.weight"},
               %bh: tensor<10xf32> {zb.param = "head.bias"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %inv_batch = arith.constant 0.125 : f32
  %experts = arith.constant 4 : i64

  // Layer 1: relu(x @ w1 + b1).
  %e1 = tensor.empty() : tensor<8x32xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %m1 = linalg.matmul ins(%x, %w1 : tensor<8x16xf32>, tensor<16x32xf32>)
                      outs(%z1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %a1 = linalg.generic {indexing_maps = [#id, #col, #id],
                        iterator_types = ["parallel", "parallel"]}
      ins(%m1, %b1 : tensor<8x32xf32>, tensor<32xf32>) outs(%e1 : tensor<8x32xf32>) {
  ^bb0(%m: f32, %b: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x32xf32>
  %h1 = pipe.cut %a1 : tensor<8x32xf32>

  // The router: logits h1 @ wr, each sample's expert the first of the
  // largest (an integer computation, no gradient), its weight that
  // expert's softmax probability.
  %er = tensor.empty() : tensor<8x4xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<8x4xf32>) -> tensor<8x4xf32>
  %route = linalg.matmul ins(%h1, %wr : tensor<8x32xf32>, tensor<32x4xf32>)
                         outs(%zr : tensor<8x4xf32>) -> tensor<8x4xf32>
  %e8 = tensor.empty() : tensor<8xf32>
  %rmax0 = linalg.fill ins(%ninf : f32) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
  %rmax = linalg.reduce ins(%route : tensor<8x4xf32>) outs(%rmax0 : tensor<8xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %m = arith.maximumf %in, %acc : f32
      linalg.yield %m : f32
    }
  %ei = tensor.empty() : tensor<8xi64>
  %g0 = linalg.fill ins(%experts : i64) outs(%ei : tensor<8xi64>) -> tensor<8xi64>
  %group = linalg.generic {indexing_maps = [#id, #row, #row],
                           iterator_types = ["parallel", "reduction"]}
      ins(%route, %rmax : tensor<8x4xf32>, tensor<8xf32>) outs(%g0 : tensor<8xi64>) {
  ^bb0(%l: f32, %m: f32, %acc: i64):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %hit = arith.cmpf oeq, %l, %m : f32
    %cand = arith.select %hit, %ji, %experts : i64
    %first = arith.minsi %acc, %cand : i64
    linalg.yield %first : i64
  } -> tensor<8xi64>
  %probs = linalg.softmax dimension(1) ins(%route : tensor<8x4xf32>)
                                       outs(%er : tensor<8x4xf32>) -> tensor<8x4xf32>
  %z8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
  %weight = linalg.generic {indexing_maps = [#id, #row, #row],
                            iterator_types = ["parallel", "reduction"]}
      ins(%probs, %group : tensor<8x4xf32>, tensor<8xi64>) outs(%z8 : tensor<8xf32>) {
  ^bb0(%p: f32, %g: i64, %acc: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %hit = arith.cmpi eq, %ji, %g : i64
    %v = arith.select %hit, %p, %zero : f32
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>

  // The chosen expert: relu(h1 @ up[g]) @ down[g], two grouped products.
  %e64 = tensor.empty() : tensor<8x64xf32>
  %z64 = linalg.fill ins(%zero : f32) outs(%e64 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %hidden = linalg.generic {indexing_maps = [#gx, #gw, #gg, #gy],
                            iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%h1, %up, %group : tensor<8x32xf32>, tensor<4x32x64xf32>, tensor<8xi64>)
      outs(%z64 : tensor<8x64xf32>) {
  ^bb0(%a: f32, %w: f32, %g: i64, %acc: f32):
    %e = linalg.index 2 : index
    %ei64 = arith.index_cast %e : index to i64
    %hit = arith.cmpi eq, %g, %ei64 : i64
    %p = arith.mulf %a, %w : f32
    %t = arith.select %hit, %p, %zero : f32
    %s = arith.addf %acc, %t : f32
    linalg.yield %s : f32
  } -> tensor<8x64xf32>
  %act = linalg.generic {indexing_maps = [#id, #id],
                         iterator_types = ["parallel", "parallel"]}
      ins(%hidden : tensor<8x64xf32>) outs(%e64 : tensor<8x64xf32>) {
  ^bb0(%h: f32, %o: f32):
    %r = arith.maximumf %h, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x64xf32>
  %out = linalg.generic {indexing_maps = [#gx, #gw, #gg, #gy],
                         iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%act, %down, %group : tensor<8x64xf32>, tensor<4x64x32xf32>, tensor<8xi64>)
      outs(%z1 : tensor<8x32xf32>) {
  ^bb0(%a: f32, %w: f32, %g: i64, %acc: f32):
    %e = linalg.index 2 : index
    %ei64 = arith.index_cast %e : index to i64
    %hit = arith.cmpi eq, %g, %ei64 : i64
    %p = arith.mulf %a, %w : f32
    %t = arith.select %hit, %p, %zero : f32
    %s = arith.addf %acc, %t : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  // Added back, weighted by the router: h1 + p * expert(h1).
  %a2 = linalg.generic {indexing_maps = [#id, #row, #id, #id],
                        iterator_types = ["parallel", "parallel"]}
      ins(%out, %weight, %h1 : tensor<8x32xf32>, tensor<8xf32>, tensor<8x32xf32>)
      outs(%e1 : tensor<8x32xf32>) {
  ^bb0(%v: f32, %p: f32, %h: f32, %o: f32):
    %pv = arith.mulf %p, %v : f32
    %s = arith.addf %h, %pv : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  %h2 = pipe.cut %a2 : tensor<8x32xf32>

  // The head: logits = h2 @ wh + bh.
  %e3 = tensor.empty() : tensor<8x10xf32>
  %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<8x10xf32>) -> tensor<8x10xf32>
  %m3 = linalg.matmul ins(%h2, %wh : tensor<8x32xf32>, tensor<32x10xf32>)
                      outs(%z3 : tensor<8x10xf32>) -> tensor<8x10xf32>
  %logits = linalg.generic {indexing_maps = [#id, #col, #id],
                            iterator_types = ["parallel", "parallel"]}
      ins(%m3, %bh : tensor<8x10xf32>, tensor<10xf32>) outs(%e3 : tensor<8x10xf32>) {
  ^bb0(%m: f32, %b: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    linalg.yield %s : f32
  } -> tensor<8x10xf32>

  // Cross-entropy per sample: log(sum(exp(l - max))) + max - l[label].
  %mx0 = linalg.fill ins(%ninf : f32) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
  %mx = linalg.reduce ins(%logits : tensor<8x10xf32>) outs(%mx0 : tensor<8xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %m = arith.maximumf %in, %acc : f32
      linalg.yield %m : f32
    }
  %se = linalg.generic {indexing_maps = [#id, #row, #row],
                        iterator_types = ["parallel", "reduction"]}
      ins(%logits, %mx : tensor<8x10xf32>, tensor<8xf32>) outs(%z8 : tensor<8xf32>) {
  ^bb0(%l: f32, %m: f32, %acc: f32):
    %d = arith.subf %l, %m : f32
    %e = math.exp %d : f32
    %s = arith.addf %acc, %e : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %picked = linalg.generic {indexing_maps = [#id, #row, #row],
                            iterator_types = ["parallel", "reduction"]}
      ins(%logits, %labels : tensor<8x10xf32>, tensor<8xi64>) outs(%z8 : tensor<8xf32>) {
  ^bb0(%l: f32, %lab: i64, %acc: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %hit = arith.cmpi eq, %ji, %lab : i64
    %v = arith.select %hit, %l, %zero : f32
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>

  // Mean over the microbatch.
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#vec, #vec, #vec, #scalar],
                          iterator_types = ["reduction"]}
      ins(%se, %mx, %picked : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%s: f32, %m: f32, %p: f32, %acc: f32):
    %lg = math.log %s : f32
    %t = arith.addf %lg, %m : f32
    %u = arith.subf %t, %p : f32
    %w = arith.mulf %u, %inv_batch : f32
    %r = arith.addf %acc, %w : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}
