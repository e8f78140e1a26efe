// RUN: zb-opt %s --zb-fuse-elementwise | FileCheck %s

#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>

// A bias add feeding a ReLU becomes one generic; the matmul keeps its named
// form (it must still become a gemm call).
// CHECK-LABEL: func.func @bias_relu
// CHECK: linalg.matmul
// CHECK: linalg.generic
// CHECK:   arith.addf
// CHECK:   arith.maximumf
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @bias_relu(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.maximumf %p, %zero : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// A producer used twice is not fused (it would be computed twice).
// CHECK-LABEL: func.func @shared_producer
// CHECK-COUNT-3: linalg.generic
func.func @shared_producer(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = math.exp %p : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.negf %p : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.mulf %p, %p : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %b, %c : tensor<4xf32>, tensor<4xf32>
}

// A producer whose body reads its own output is not fused into a consumer
// with more loops (the output would be re-read and rewritten per extra
// iteration).
// CHECK-LABEL: func.func @reads_own_output
// CHECK-COUNT-2: linalg.generic
func.func @reads_own_output(%x: tensor<4xf32>, %y: tensor<4x3xf32>, %init: tensor<4xf32>) -> tensor<4x3xf32> {
  %a = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %e = tensor.empty() : tensor<4x3xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %y : tensor<4xf32>, tensor<4x3xf32>) outs(%e : tensor<4x3xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.mulf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x3xf32>
  return %b : tensor<4x3xf32>
}

// A bf16 stash widened back to f32 (--zb-narrow-stash) is not fused into a
// contraction written as a generic, even one that still carries an unused
// input (which the same rewrite then drops): the contraction stays a gemm
// candidate. An elementwise consumer takes the widening as usual.
#km = affine_map<(k, i, j) -> (k, i)>
#kn = affine_map<(k, i, j) -> (k, j)>
#mn = affine_map<(k, i, j) -> (i, j)>
// CHECK-LABEL: func.func @widened_stash
// CHECK: %[[W:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<8x4xbf16>) outs(%{{.*}} : tensor<8x4xf32>)
// CHECK: arith.extf
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "parallel"]} ins(%[[W]], %{{.*}} : tensor<8x4xf32>, tensor<8x6xf32>)
// CHECK-NOT: arith.extf
// CHECK: linalg.yield
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<8x4xbf16>)
// CHECK: arith.extf
// CHECK: math.exp
func.func @widened_stash(%x: tensor<8x4xbf16>, %y: tensor<8x6xf32>, %unused: tensor<4x6xf32>, %init: tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<8x4xf32>) {
  %e = tensor.empty() : tensor<8x4xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x4xbf16>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  %r = linalg.generic {indexing_maps = [#km, #kn, #mn, #mn], iterator_types = ["reduction", "parallel", "parallel"]} ins(%w, %y, %unused : tensor<8x4xf32>, tensor<8x6xf32>, tensor<4x6xf32>) outs(%init : tensor<4x6xf32>) {
  ^bb0(%p: f32, %q: f32, %u: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  %w2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x4xbf16>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  %x2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w2 : tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  return %r, %x2 : tensor<4x6xf32>, tensor<8x4xf32>
}

// Nor is any other producer, here a ReLU's derivative (which the first
// layer's weight gradient alone reads when no input gradient is needed),
// into a contraction whose body still holds autodiff's product with 1.0
// and a dead recomputation: the bodies are folded first, so the
// contraction is recognised and stays a gemm candidate.
// CHECK-LABEL: func.func @relu_derivative
// CHECK: %[[D:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: arith.select
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "parallel"]} ins(%[[D]], %{{.*}} : tensor<8x4xf32>, tensor<8x6xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: arith.addf
// CHECK-NEXT: linalg.yield
func.func @relu_derivative(%pre: tensor<8x4xf32>, %g: tensor<8x4xf32>, %x: tensor<8x6xf32>, %w: tensor<4x6xf32>, %init: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<8x4xf32>
  %d = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%pre, %g : tensor<8x4xf32>, tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %pos = arith.cmpf ogt, %p, %zero : f32
    %m = arith.select %pos, %one, %zero : f32
    %v = arith.mulf %m, %q : f32
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  %r = linalg.generic {indexing_maps = [#km, #kn, #mn, #mn], iterator_types = ["reduction", "parallel", "parallel"]} ins(%d, %x, %w : tensor<8x4xf32>, tensor<8x6xf32>, tensor<4x6xf32>) outs(%init : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %u: f32, %o: f32):
    %dead = arith.mulf %b, %u : f32
    %c1 = arith.constant 1.0 : f32
    %b1 = arith.mulf %b, %c1 : f32
    %prod = arith.mulf %b1, %a : f32
    %s = arith.addf %o, %prod : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}

// A row reduction of a product, sum(dy * y) as a softmax's backward has,
// is not a matrix product (no m and n of its own to each input): the
// producer of y still fuses into it.
#row = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @row_dot
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: math.exp
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
func.func @row_dot(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]} ins(%dy, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// A bf16 stash narrowed at the end of the forward from an elementwise
// producer that other ops also read: the copy joins its producer, which
// writes both the f32 value and its bf16 copy; the other reader takes the
// fused op's f32 result.
// CHECK-LABEL: func.func @narrowed_stash
// CHECK: %[[F:.*]]:2 = linalg.generic
// CHECK: %[[S:.*]] = arith.addf
// CHECK: %[[N:.*]] = arith.truncf %[[S]] : f32 to bf16
// CHECK: linalg.yield %[[S]], %[[N]] : f32, bf16
// CHECK-NOT: arith.truncf
// CHECK: %[[M:.*]] = linalg.matmul ins(%[[F]]#0, %[[F]]#0 :
// CHECK: return %[[M]], %[[F]]#1
func.func @narrowed_stash(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>)
    -> (tensor<4x4xf32>, tensor<4x4xbf16>) {
  %e = tensor.empty() : tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %s = arith.addf %u, %v : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %m = linalg.matmul ins(%a, %a : tensor<4x4xf32>, tensor<4x4xf32>)
      outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %e2 = tensor.empty() : tensor<4x4xbf16>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x4xf32>) outs(%e2 : tensor<4x4xbf16>) {
  ^bb0(%u: f32, %o: bf16):
    %t = arith.truncf %u : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x4xbf16>
  return %m, %n : tensor<4x4xf32>, tensor<4x4xbf16>
}

// A stash narrowed from a matrix product stays a copy of its own.
// CHECK-LABEL: func.func @narrowed_product
// CHECK: linalg.matmul
// CHECK: linalg.generic
// CHECK: arith.truncf
func.func @narrowed_product(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xbf16>) {
  %e = tensor.empty() : tensor<4x4xf32>
  %m = linalg.matmul ins(%x, %x : tensor<4x4xf32>, tensor<4x4xf32>)
      outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %e2 = tensor.empty() : tensor<4x4xbf16>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<4x4xf32>) outs(%e2 : tensor<4x4xbf16>) {
  ^bb0(%u: f32, %o: bf16):
    %t = arith.truncf %u : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x4xbf16>
  return %m, %n : tensor<4x4xf32>, tensor<4x4xbf16>
}

// A stash narrowed from a transpose (attention's heads): the transpose,
// generalised, writes both.
// CHECK-LABEL: func.func @narrowed_transpose
// CHECK-NOT: linalg.transpose
// CHECK: %[[F:.*]]:2 = linalg.generic
// CHECK: arith.truncf
// CHECK-NOT: linalg.generic
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @narrowed_transpose(%x: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<8x4xbf16>) {
  %e = tensor.empty() : tensor<8x4xf32>
  %t = linalg.transpose ins(%x : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<8x4xbf16>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<8x4xf32>) outs(%e2 : tensor<8x4xbf16>) {
  ^bb0(%u: f32, %o: bf16):
    %c = arith.truncf %u : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<8x4xbf16>
  return %t, %n : tensor<8x4xf32>, tensor<8x4xbf16>
}

// A bias add on a gemm's (token, feature) rows and the residual add after it
// on (batch, token, feature): the residual add takes the rows' shape, the
// two fuse, and the sum is reshaped once, at the end.
// CHECK-LABEL: func.func @bias_residual_across_reshape
// CHECK: %[[M:.*]] = linalg.matmul
// CHECK: %[[R:.*]] = tensor.collapse_shape %arg3 {{\[}}[0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[R]], %[[M]], %arg2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>)
// CHECK: arith.addf
// CHECK: arith.addf
// CHECK-NOT: linalg.generic
// CHECK: %[[E:.*]] = tensor.expand_shape %[[S]] {{\[}}[0, 1], [2]] output_shape [2, 4, 8] : tensor<8x8xf32> into tensor<2x4x8xf32>
// CHECK: return %[[E]]
func.func @bias_residual_across_reshape(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %res: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<8x8xf32>, tensor<8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %x3 = tensor.expand_shape %a [[0, 1], [2]] output_shape [2, 4, 8] : tensor<8x8xf32> into tensor<2x4x8xf32>
  %e3 = tensor.empty() : tensor<2x4x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j, k)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%res, %x3 : tensor<2x4x8xf32>, tensor<2x4x8xf32>) outs(%e3 : tensor<2x4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}

// An op that adds into an argument in place (a gradient sum) keeps the
// argument's shape across a reshape, or bufferization would no longer see
// the update in place. A contraction is left for the gemm lowering as it
// is.
// CHECK-LABEL: func.func @kept_across_reshape
// CHECK: %[[G:.*]] = tensor.expand_shape %arg0
// CHECK: linalg.generic {{.*}} ins(%[[G]] : tensor<2x4x8xf32>) outs(%arg1 : tensor<2x4x8xf32>)
// CHECK: %[[H:.*]] = tensor.expand_shape %arg2
// CHECK: linalg.generic {{.*}} ins(%[[H]], %arg3 : tensor<2x4x8xf32>, tensor<8x8xf32>) outs(%{{.*}} : tensor<2x4x8xf32>)
// CHECK-NOT: tensor.collapse_shape
func.func @kept_across_reshape(%g: tensor<8x8xf32>, %sum: tensor<2x4x8xf32>, %h: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %g3 = tensor.expand_shape %g [[0, 1], [2]] output_shape [2, 4, 8] : tensor<8x8xf32> into tensor<2x4x8xf32>
  %acc = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j, k)>],
                         iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g3 : tensor<2x4x8xf32>) outs(%sum : tensor<2x4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8xf32>
  %h3 = tensor.expand_shape %h [[0, 1], [2]] output_shape [2, 4, 8] : tensor<8x8xf32> into tensor<2x4x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%h3, %w : tensor<2x4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<2x4x8xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %t = arith.mulf %u, %v : f32
    %s = arith.addf %o, %t : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8xf32>
  return %acc, %p : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// A bias add that the function returns (a forward's stash) and GELU-like
// op reads: one generic writes both, and nothing reads the bias add back.
// A producer returned and read by two ops stays on its own, as does one
// that its reader broadcasts (the fused op would write it once per row).
// CHECK-LABEL: func.func @returned_producer
// CHECK: %[[F:.*]]:2 = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<8xf32>)
// CHECK: %[[S:.*]] = arith.addf
// CHECK: %[[T:.*]] = math.tanh %[[S]]
// CHECK: linalg.yield %[[S]], %[[T]]
// CHECK-NOT: linalg.generic
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @returned_producer(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %t = math.tanh %p : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  return %a, %g : tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @returned_and_shared
// CHECK-COUNT-3: linalg.generic
// CHECK-NOT: linalg.generic
func.func @returned_and_shared(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %t = math.tanh %p : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  %e3 = tensor.empty() : tensor<4x8xf32>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e3 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %t = math.exp %p : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  return %a, %g, %h : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @returned_and_broadcast
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT: linalg.generic
func.func @returned_and_broadcast(%x: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(j) -> (j)>, affine_map<(j) -> (j)>, affine_map<(j) -> (j)>], iterator_types = ["parallel"]}
      ins(%x, %b : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %t = math.tanh %p : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  return %a, %g : tensor<8xf32>, tensor<4x8xf32>
}

// Nor into a grouped product (a mixture of experts' rows times their
// expert's weight): the activation before it stays its own op, so that the
// product still lowers to the runtime's grouped gemms.
#gx = affine_map<(r, n, e, k) -> (r, k)>
#gw = affine_map<(r, n, e, k) -> (e, k, n)>
#gg = affine_map<(r, n, e, k) -> (r)>
#gy = affine_map<(r, n, e, k) -> (r, n)>
// CHECK-LABEL: func.func @grouped_product
// CHECK: %[[ACT:.*]] = linalg.generic
// CHECK: math.tanh
// CHECK: linalg.generic {{.*}} ins(%[[ACT]], %{{.*}}, %{{.*}} : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<6xi64>)
// CHECK-NOT: math.tanh
// CHECK: linalg.yield
func.func @grouped_product(%x: tensor<6x4xf32>, %w: tensor<3x4x5xf32>, %g: tensor<6xi64>) -> tensor<6x5xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x4xf32>
  %act = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %t = math.tanh %p : f32
    linalg.yield %t : f32
  } -> tensor<6x4xf32>
  %e2 = tensor.empty() : tensor<6x5xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e2 : tensor<6x5xf32>) -> tensor<6x5xf32>
  %y = linalg.generic {indexing_maps = [#gx, #gw, #gg, #gy], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%act, %w, %g : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<6xi64>) outs(%f : tensor<6x5xf32>) {
  ^bb0(%a: f32, %b: f32, %gi: i64, %acc: f32):
    %i = linalg.index 2 : index
    %ii = arith.index_cast %i : index to i64
    %hit = arith.cmpi eq, %gi, %ii : i64
    %m = arith.mulf %a, %b : f32
    %s = arith.select %hit, %m, %zero : f32
    %sum = arith.addf %acc, %s : f32
    linalg.yield %sum : f32
  } -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// An op that reads its positions (a convolution's patches gathering its
// input) keeps its loops across a reshape: collapsed, it would recover each
// position with a division and a remainder per element.
// CHECK-LABEL: func.func @positions_kept_across_reshape
// CHECK: %[[P:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]
// CHECK: linalg.index 0
// CHECK: linalg.index 2
// CHECK-NOT: affine.delinearize_index
// CHECK-NOT: arith.divsi
// CHECK: } -> tensor<2x4x8xf32>
// CHECK: tensor.collapse_shape %[[P]] {{\[}}[0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
func.func @positions_kept_across_reshape(%x: tensor<16xf32>, %y: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %e = tensor.empty() : tensor<2x4x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      outs(%e : tensor<2x4x8xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %k = linalg.index 2 : index
    %at = arith.addi %i, %k : index
    %v = tensor.extract %x[%at] : tensor<16xf32>
    linalg.yield %v : f32
  } -> tensor<2x4x8xf32>
  %c = tensor.collapse_shape %p [[0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
  %e2 = tensor.empty() : tensor<8x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%c, %y : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e2 : tensor<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}
