// An MLP classifier: 16 features -> 32 -> 32 -> 10 classes, ReLU, mean
// softmax cross-entropy. Written for one microbatch of 8 samples; the two
// pipe.cut markers split it into three pipeline stages.
//
// Arguments: %x (features) and %labels (class ids) are data; the others are
// parameters, named by their zb.param attribute.

#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#row = affine_map<(i, j) -> (i)>
#vec = affine_map<(i) -> (i)>
#scalar = affine_map<(i) -> ()>

func.func @mlp(%x: tensor<8x16xf32>, %labels: tensor<8xi64>,
               %w1: tensor<16x32xf32> {zb.param = "l1.weight"},
               %b1: tensor<32xf32> {zb.param = "l1.bias"},
               %w2: tensor<32x32xf32> {zb.param = "l2.weight"},
               %b2: tensor<32xf32> {zb.param = "l2.bias"},
               %w3: tensor<32x10xf32> {zb.param = "l3.weight"},
               %b3: tensor<10xf32> {zb.param = "l3.bias"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %inv_batch = arith.constant 0.125 : f32

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

  // Layer 2: relu(h1 @ w2 + b2).
  %m2 = linalg.matmul ins(%h1, %w2 : tensor<8x32xf32>, tensor<32x32xf32>)
                      outs(%z1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %a2 = linalg.generic {indexing_maps = [#id, #col, #id],
                        iterator_types = ["parallel", "parallel"]}
      ins(%m2, %b2 : tensor<8x32xf32>, tensor<32xf32>) outs(%e1 : tensor<8x32xf32>) {
  ^bb0(%m: f32, %b: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x32xf32>
  %h2 = pipe.cut %a2 : tensor<8x32xf32>

  // Layer 3: logits = h2 @ w3 + b3.
  %e3 = tensor.empty() : tensor<8x10xf32>
  %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<8x10xf32>) -> tensor<8x10xf32>
  %m3 = linalg.matmul ins(%h2, %w3 : tensor<8x32xf32>, tensor<32x10xf32>)
                      outs(%z3 : tensor<8x10xf32>) -> tensor<8x10xf32>
  %logits = linalg.generic {indexing_maps = [#id, #col, #id],
                            iterator_types = ["parallel", "parallel"]}
      ins(%m3, %b3 : tensor<8x10xf32>, tensor<10xf32>) outs(%e3 : tensor<8x10xf32>) {
  ^bb0(%m: f32, %b: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    linalg.yield %s : f32
  } -> tensor<8x10xf32>

  // Cross-entropy per sample: log(sum(exp(l - max))) + max - l[label].
  %er = tensor.empty() : tensor<8xf32>
  %mx0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  %mx = linalg.reduce ins(%logits : tensor<8x10xf32>) outs(%mx0 : tensor<8xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %m = arith.maximumf %in, %acc : f32
      linalg.yield %m : f32
    }
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  %se = linalg.generic {indexing_maps = [#id, #row, #row],
                        iterator_types = ["parallel", "reduction"]}
      ins(%logits, %mx : tensor<8x10xf32>, tensor<8xf32>) outs(%zr : tensor<8xf32>) {
  ^bb0(%l: f32, %m: f32, %acc: f32):
    %d = arith.subf %l, %m : f32
    %e = math.exp %d : f32
    %s = arith.addf %acc, %e : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %picked = linalg.generic {indexing_maps = [#id, #row, #row],
                            iterator_types = ["parallel", "reduction"]}
      ins(%logits, %labels : tensor<8x10xf32>, tensor<8xi64>) outs(%zr : tensor<8xf32>) {
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
