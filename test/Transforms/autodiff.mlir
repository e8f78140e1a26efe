// RUN: zb-opt %s --zb-autodiff -split-input-file | FileCheck %s
// RUN: zb-opt %s --zb-autodiff=accumulate=true -split-input-file | FileCheck %s --check-prefix=SUMS

// A plain model function gets @f_grad: the loss, then one gradient per
// {zb.param} in argument order (w before b, although the reverse sweep
// reaches b first). The data argument %x gets no gradient, and the matmul's
// weight gradient is a contraction (mul/add body over a reduction dim).
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#all = affine_map<(i, j) -> ()>
// CHECK-LABEL: func.func @f(
// CHECK-NOT: zb.gradient_of
// CHECK: return
// CHECK-LABEL: func.func @f_grad(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32> {zb.param = "w"}, %[[B:[^:]*]]: tensor<16xf32> {zb.param = "b"})
// CHECK-SAME: -> (tensor<f32>, tensor<8x16xf32>, tensor<16xf32>) attributes {zb.gradient_of = @f}
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]
// CHECK: arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NOT: -> tensor<4x8xf32>
// CHECK: %[[DB:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]
// CHECK-SAME: outs(%{{.*}} : tensor<16xf32>)
// CHECK-NOT: -> tensor<4x8xf32>
// CHECK: %[[DW:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "parallel"]
// CHECK-SAME: ins({{.*}}%[[X]]
// CHECK: arith.mulf
// CHECK: %[[ACC:.*]] = arith.addf
// CHECK-NEXT: linalg.yield %[[ACC]]
// CHECK-NEXT: } -> tensor<8x16xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DW]], %[[DB]] : tensor<f32>, tensor<8x16xf32>, tensor<16xf32>

// With accumulate=true the companion is @f_grad_acc instead: one sum per
// parameter after the arguments, each gradient added into its sum (the
// addition's outs), the sums returned after the loss.
// SUMS-NOT: @f_grad(
// SUMS-LABEL: func.func @f_grad_acc(
// SUMS-SAME: %{{[^:]*}}: tensor<4x8xf32>, %{{[^:]*}}: tensor<8x16xf32> {zb.param = "w"}, %{{[^:]*}}: tensor<16xf32> {zb.param = "b"}, %[[SW:[^:]*]]: tensor<8x16xf32>, %[[SB:[^:]*]]: tensor<16xf32>)
// SUMS-SAME: -> (tensor<f32>, tensor<8x16xf32>, tensor<16xf32>) attributes {zb.grad_sums = 2 : i64, zb.gradient_of = @f}
// SUMS: %[[LOSS:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]
// SUMS: %[[DB:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]
// SUMS: %[[DW:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "parallel"]
// SUMS: %[[NW:.*]] = linalg.generic {{.*}} ins(%[[DW]] : tensor<8x16xf32>) outs(%[[SW]] : tensor<8x16xf32>)
// SUMS-NEXT: ^bb0(%[[G:.*]]: f32, %[[S:.*]]: f32):
// SUMS-NEXT: %[[ADD:.*]] = arith.addf %[[S]], %[[G]]
// SUMS-NEXT: linalg.yield %[[ADD]]
// SUMS: %[[NB:.*]] = linalg.generic {{.*}} ins(%[[DB]] : tensor<16xf32>) outs(%[[SB]] : tensor<16xf32>)
// SUMS: return %[[LOSS]], %[[NW]], %[[NB]] : tensor<f32>, tensor<8x16xf32>, tensor<16xf32>
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x16xf32> {zb.param = "w"}, %b: tensor<16xf32> {zb.param = "b"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<4x16xf32>, tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    %r = math.tanh %s : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%a : tensor<4x16xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f32, %acc: f32):
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Activity analysis: the one-hot mask built from integer labels (index,
// index_cast, cmpi, uitofp) is data; its generic gets no adjoint and the
// backward reads the forward's mask as it is. One gradient generic (for
// the parameter), none for the data %x.
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#all = affine_map<(i, j) -> ()>
// CHECK-LABEL: func.func @masked_grad(
// CHECK-SAME: -> (tensor<f32>, tensor<4x8xf32>)
// CHECK: %[[MASK:.*]] = linalg.generic
// CHECK: linalg.index 1
// CHECK: arith.uitofp
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]
// CHECK: arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NOT: linalg.index
// CHECK-NOT: arith.uitofp
// CHECK-NOT: arith.cmpi
// CHECK: %[[DW:.*]] = linalg.generic {{.*}}ins({{.*}}, %[[MASK]] :
// CHECK-NOT: linalg.index
// CHECK-NOT: linalg.generic
// CHECK: return %[[LOSS]], %[[DW]] : tensor<f32>, tensor<4x8xf32>
func.func @masked(%x: tensor<4x8xf32>, %lab: tensor<4xi64>, %w: tensor<4x8xf32> {zb.param}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %mask = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%lab : tensor<4xi64>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%l: i64, %o: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %hit = arith.cmpi eq, %ji, %l : i64
    %f = arith.uitofp %hit : i1 to f32
    linalg.yield %f : f32
  } -> tensor<4x8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %w, %mask : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %m: f32, %o: f32):
    %s = arith.mulf %a, %b : f32
    %t = arith.mulf %s, %m : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%p : tensor<4x8xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A stage: the forward yields its stash (matmul result, input, weight); the
// backward's arguments are that stash, then the cotangent of the result; it
// yields d_input, then d_param, both as contractions over the stashed
// values. Costs and the stash bytes (input + matmul result = 2 * 128 bytes;
// the parameter is not counted) are recorded.
#id = affine_map<(i, j) -> (i, j)>
// CHECK-LABEL: func.func @matmul_stage
// CHECK: pipe.stage 1 on rank 1 inputs(%{{.*}} : tensor<4x8xf32>) params(%{{.*}} : tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-SAME: attributes {cost_b = {{[0-9.]+}}e+{{[0-9]+}} : f64, cost_f = {{[0-9.]+}}e+{{[0-9]+}} : f64, mem_b = 256 : i64} forward {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8x8xf32>):
// CHECK: %[[M:.*]] = linalg.matmul ins(%[[A]], %[[B]]
// CHECK: %[[E:.*]] = linalg.generic
// CHECK: math.exp
// CHECK: pipe.yield %[[E]] : tensor<4x8xf32> stash(%[[M]], %[[B]], %[[A]] : tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT: } backward {
// CHECK-NEXT: ^bb0(%[[SM:.*]]: tensor<4x8xf32>, %[[SB:.*]]: tensor<8x8xf32>, %[[SA:.*]]: tensor<4x8xf32>, %[[DY:.*]]: tensor<4x8xf32>):
// CHECK: %[[DM:.*]] = linalg.generic {{.*}} ins(%[[DY]], %[[SM]] :
// CHECK: math.exp
// CHECK: %[[DA:.*]] = linalg.generic {{.*}}"reduction"{{.*}} ins(%[[DM]], {{.*}}%[[SB]] :
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: } -> tensor<4x8xf32>
// CHECK: %[[DB:.*]] = linalg.generic {{.*}}"reduction"{{.*}} ins(%[[DM]], %[[SA]]
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: } -> tensor<8x8xf32>
// CHECK: pipe.yield %[[DA]], %[[DB]] : tensor<4x8xf32>, tensor<8x8xf32>
func.func @matmul_stage(%x: tensor<4x8xf32>, %w: tensor<8x8xf32> {zb.param}) -> tensor<4x8xf32> {
  %y = pipe.stage 1 on rank 1 inputs(%x : tensor<4x8xf32>) params(%w : tensor<8x8xf32>) -> tensor<4x8xf32>
    forward {
    ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>):
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<4x8xf32>
      %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
      %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
      %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
          ins(%m : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
      ^bb0(%p: f32, %o: f32):
        %t = math.exp %p : f32
        linalg.yield %t : f32
      } -> tensor<4x8xf32>
      pipe.yield %r : tensor<4x8xf32>
    }
  return %y : tensor<4x8xf32>
}

// -----

// Constants are rematerialised in the backward, never stashed: the stash
// holds only the two block arguments (mem_b counts the input alone).
#id = affine_map<(i, j) -> (i, j)>
// CHECK-LABEL: func.func @constant_operand
// CHECK: mem_b = 128 : i64
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4x8xf32>):
// CHECK: pipe.yield %{{.*}} : tensor<4x8xf32> stash(%[[B]], %[[A]] : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT: } backward {
// CHECK-NEXT: ^bb0(%{{[^:]*}}: tensor<4x8xf32>, %{{[^:]*}}: tensor<4x8xf32>, %{{[^:]*}}: tensor<4x8xf32>):
// CHECK: %[[C:.*]] = arith.constant dense<3.000000e+00> : tensor<4x8xf32>
// CHECK: linalg.generic {{.*}}ins({{.*}}, %[[C]] :
func.func @constant_operand(%x: tensor<4x8xf32>, %w: tensor<4x8xf32> {zb.param}) -> tensor<4x8xf32> {
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4x8xf32>) params(%w : tensor<4x8xf32>) -> tensor<4x8xf32>
    forward {
    ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
      %c = arith.constant dense<3.0> : tensor<4x8xf32>
      %e = tensor.empty() : tensor<4x8xf32>
      %r = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
          ins(%a, %b, %c : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
      ^bb0(%p: f32, %q: f32, %k: f32, %o: f32):
        %t = arith.mulf %p, %q : f32
        %u = arith.mulf %t, %k : f32
        linalg.yield %u : f32
      } -> tensor<4x8xf32>
      pipe.yield %r : tensor<4x8xf32>
    }
  return %y : tensor<4x8xf32>
}

// -----

// A stage's data operand gets no gradient: the backward yields d_input and
// d_param only.
#id = affine_map<(i, j) -> (i, j)>
// CHECK-LABEL: func.func @data_operand
// CHECK: } backward {
// CHECK: pipe.yield %{{[^,]*}}, %{{[^,]*}} : tensor<4x8xf32>, tensor<4x8xf32>{{$}}
func.func @data_operand(%x: tensor<4x8xf32>, %mask: tensor<4x8xf32>, %w: tensor<4x8xf32> {zb.param}) -> tensor<4x8xf32> {
  %y = pipe.stage 1 on rank 1 inputs(%x : tensor<4x8xf32>) data(%mask : tensor<4x8xf32>) params(%w : tensor<4x8xf32>) -> tensor<4x8xf32>
    forward {
    ^bb0(%a: tensor<4x8xf32>, %m: tensor<4x8xf32>, %b: tensor<4x8xf32>):
      %e = tensor.empty() : tensor<4x8xf32>
      %r = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
          ins(%a, %b, %m : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
      ^bb0(%p: f32, %q: f32, %k: f32, %o: f32):
        %t = arith.addf %p, %q : f32
        %u = arith.mulf %t, %k : f32
        linalg.yield %u : f32
      } -> tensor<4x8xf32>
      pipe.yield %r : tensor<4x8xf32>
    }
  return %y : tensor<4x8xf32>
}

// -----

// linalg.softmax: the forward stashes its output y; the backward is
// y * (dy - sum(dy * y)) along the softmax dimension.
// CHECK-LABEL: func.func @softmax_stage
// CHECK: %[[Y:.*]] = linalg.softmax dimension(1)
// CHECK: pipe.yield %[[Y]] : tensor<4x8xf32> stash(%[[Y]] : tensor<4x8xf32>)
// CHECK-NEXT: } backward {
// CHECK-NEXT: ^bb0(%[[SY:.*]]: tensor<4x8xf32>, %[[DY:.*]]: tensor<4x8xf32>):
// CHECK: %[[DOT:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[DY]], %[[SY]] : {{.*}}) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[DX:.*]] = linalg.generic {{.*}}ins(%[[SY]], %[[DY]], %[[DOT]] :
// CHECK-NEXT: ^bb0(%[[Y0:.*]]: f32, %[[DY0:.*]]: f32, %[[S0:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[D:.*]] = arith.subf %[[DY0]], %[[S0]]
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[Y0]], %[[D]]
// CHECK: pipe.yield %[[DX]] : tensor<4x8xf32>
func.func @softmax_stage(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4x8xf32>) -> tensor<4x8xf32>
    forward {
    ^bb0(%a: tensor<4x8xf32>):
      %e = tensor.empty() : tensor<4x8xf32>
      %s = linalg.softmax dimension(1) ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
      pipe.yield %s : tensor<4x8xf32>
    }
  return %y : tensor<4x8xf32>
}

// -----

// An embedding lookup (tensor.extract from the table at an integer id
// inside a generic) differentiates into a scatter-add: a zero-filled table
// updated in an scf.for nest with tensor.insert.
#row = affine_map<(i, j) -> (i)>
#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
// CHECK-LABEL: func.func @embedding_grad(
// CHECK-SAME: %[[IDS:[^:]*]]: tensor<4xi64>, %[[WTE:[^:]*]]: tensor<10x8xf32> {zb.param = "wte"})
// CHECK: %[[ZERO:.*]] = linalg.fill {{.*}} -> tensor<10x8xf32>
// CHECK: %[[OUTER:.*]] = scf.for %[[I:.*]] = {{.*}} iter_args(%[[T0:.*]] = %[[ZERO]]) -> (tensor<10x8xf32>)
// CHECK: scf.for %[[J:.*]] = {{.*}} iter_args(%[[T:.*]] = %[[T0]]) -> (tensor<10x8xf32>)
// CHECK-DAG: %[[ID:.*]] = tensor.extract %[[IDS]][%[[I]]] : tensor<4xi64>
// CHECK-DAG: %[[ROW:.*]] = arith.index_cast %[[ID]] : i64 to index
// CHECK: %[[OLD:.*]] = tensor.extract %[[T]][%[[ROW]], %[[J]]]
// CHECK: %[[NEW:.*]] = arith.addf %[[OLD]],
// CHECK: %[[INS:.*]] = tensor.insert %[[NEW]] into %[[T]][%[[ROW]], %[[J]]]
// CHECK: scf.yield %[[INS]]
// CHECK: return %{{.*}}, %[[OUTER]] : tensor<f32>, tensor<10x8xf32>
func.func @embedding(%ids: tensor<4xi64>, %wte: tensor<10x8xf32> {zb.param = "wte"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ids : tensor<4xi64>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%t: i64, %o: f32):
    %c = linalg.index 1 : index
    %r = arith.index_cast %t : i64 to index
    %v = tensor.extract %wte[%r, %c] : tensor<10x8xf32>
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%g : tensor<4x8xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A reshape of a value is recreated in the backward from that value, which
// is stashed instead: the matmul result and the input once each (mem_b =
// 256 + 256 bytes), not again as their expanded and collapsed views.
// CHECK-LABEL: func.func @reshaped_stash
// CHECK: mem_b = 512 : i64
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8x8xf32>):
// CHECK: %[[M:.*]] = linalg.matmul
// CHECK: pipe.yield %{{.*}} : tensor<2x4x8xf32> stash(%[[A]], %[[M]], %[[W]] : tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK-NEXT: } backward {
// CHECK-NEXT: ^bb0(%[[SA:[^:]*]]: tensor<2x4x8xf32>, %[[SM:[^:]*]]: tensor<8x8xf32>, %{{[^:]*}}: tensor<8x8xf32>, %{{[^:]*}}: tensor<2x4x8xf32>):
// CHECK-NEXT: tensor.expand_shape %[[SM]]
// CHECK-NEXT: tensor.collapse_shape %[[SA]]
#id3 = affine_map<(i, j, k) -> (i, j, k)>
func.func @reshaped_stash(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32> {zb.param}) -> tensor<2x4x8xf32> {
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<2x4x8xf32>) params(%w : tensor<8x8xf32>) -> tensor<2x4x8xf32>
    forward {
    ^bb0(%a: tensor<2x4x8xf32>, %b: tensor<8x8xf32>):
      %zero = arith.constant 0.0 : f32
      %flat = tensor.collapse_shape %a [[0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
      %e = tensor.empty() : tensor<8x8xf32>
      %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
      %m = linalg.matmul ins(%flat, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32>
      %m3 = tensor.expand_shape %m [[0, 1], [2]] output_shape [2, 4, 8] : tensor<8x8xf32> into tensor<2x4x8xf32>
      %e3 = tensor.empty() : tensor<2x4x8xf32>
      %r = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
          ins(%m3, %a : tensor<2x4x8xf32>, tensor<2x4x8xf32>) outs(%e3 : tensor<2x4x8xf32>) {
      ^bb0(%p: f32, %q: f32, %o: f32):
        %s = arith.mulf %p, %q : f32
        linalg.yield %s : f32
      } -> tensor<2x4x8xf32>
      pipe.yield %r : tensor<2x4x8xf32>
    }
  return %y : tensor<2x4x8xf32>
}

// -----

// A model without parameters: with accumulate=true its companion takes no
// sums and has no zb.grad_sums (whose least value is 1).
// SUMS-LABEL: func.func @no_params_grad_acc(
// SUMS-SAME: %{{[^:]*}}: tensor<4xf32>) -> tensor<f32> attributes {zb.gradient_of = @no_params}
#v = affine_map<(i) -> (i)>
#s = affine_map<(i) -> ()>
func.func @no_params(%x: tensor<4xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#v, #s], iterator_types = ["reduction"]}
      ins(%x : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%p: f32, %acc: f32):
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The backward is folded before its stash is chosen: the derivative of a
// bias add with respect to the product (dy * 1.0) reads the product no
// more, so the product is not stashed, only what exp's derivative and the
// weight's read (mem_b = 2 * 128 bytes, not 3 * 128), nor the bias.
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>
// CHECK-LABEL: func.func @bias_stash
// CHECK: mem_b = 256 : i64
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x8xf32>, %{{.*}}: tensor<8xf32>):
// CHECK: %[[M:.*]] = linalg.matmul
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%[[M]],
// CHECK: pipe.yield %{{.*}} : tensor<4x8xf32> stash(%[[Y]], %[[W]], %[[A]] : tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT: } backward {
// CHECK-NEXT: ^bb0(%{{[^:]*}}: tensor<4x8xf32>, %{{[^:]*}}: tensor<8x8xf32>, %{{[^:]*}}: tensor<4x8xf32>, %{{[^:]*}}: tensor<4x8xf32>):
func.func @bias_stash(%x: tensor<4x8xf32>, %w: tensor<8x8xf32> {zb.param}, %bias: tensor<8xf32> {zb.param}) -> tensor<4x8xf32> {
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4x8xf32>) params(%w, %bias : tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    forward {
    ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>, %c: tensor<8xf32>):
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<4x8xf32>
      %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
      %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
      %s = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
          ins(%m, %c : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
      ^bb0(%p: f32, %q: f32, %o: f32):
        %t = arith.addf %p, %q : f32
        linalg.yield %t : f32
      } -> tensor<4x8xf32>
      %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
          ins(%s : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
      ^bb0(%p: f32, %o: f32):
        %t = math.exp %p : f32
        linalg.yield %t : f32
      } -> tensor<4x8xf32>
      pipe.yield %r : tensor<4x8xf32>
    }
  return %y : tensor<4x8xf32>
}

// -----

// A bias added inside an activation, f(m + b): m and b reach the body's
// value only through one addf, so their terms are equal, and b's gradient
// sums m's over the rows (a reduction whose body is the sum alone) instead
// of computing exp's derivative a second time. The input gradient and the
// weight gradient both read m's; after the B/W split, W's bias gradient
// needs no forward value (test/Conversion/pipeline.mlir's smaller mem_w).
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>
#all = affine_map<(i, j) -> ()>
// CHECK-LABEL: func.func @fused_bias_grad_grad(
// CHECK: math.exp
// CHECK: %[[DM:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>)
// CHECK: math.exp
// CHECK: } -> tensor<4x8xf32>
// CHECK: %[[DB:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]} ins(%[[DM]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<8xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]*]]: f32, %[[OUT:[^:]*]]: f32):
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[OUT]], %[[IN]] : f32
// CHECK-NEXT: linalg.yield %[[SUM]]
// CHECK-NOT: math.exp
// CHECK: linalg.generic {{.*}} ins(%[[DM]], %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>) outs(%{{.*}} : tensor<8x8xf32>)
// CHECK: return %{{.*}}, %{{.*}}, %[[DB]] :
func.func @fused_bias_grad(%x: tensor<4x8xf32>, %w: tensor<8x8xf32> {zb.param = "w"}, %b: tensor<8xf32> {zb.param = "b"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %t = arith.addf %p, %q : f32
    %u = math.exp %t : f32
    linalg.yield %u : f32
  } -> tensor<4x8xf32>
  %le = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%le : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%y : tensor<4x8xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f32, %o: f32):
    %t = arith.addf %o, %p : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// When the product is read a second time in the body (m * exp(m + b)), the
// two terms differ: b's gradient computes its own (exp's derivative again).
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>
#all = affine_map<(i, j) -> ()>
// CHECK-LABEL: func.func @unshared_bias_grad(
// CHECK-LABEL: func.func @unshared_bias_grad_grad(
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: math.exp
// CHECK: } -> tensor<4x8xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]
// CHECK: math.exp
// CHECK: } -> tensor<8xf32>
func.func @unshared_bias_grad(%x: tensor<4x8xf32>, %w: tensor<8x8xf32> {zb.param = "w"}, %b: tensor<8xf32> {zb.param = "b"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %t = arith.addf %p, %q : f32
    %u = math.exp %t : f32
    %v = arith.mulf %p, %u : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %le = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%le : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%y : tensor<4x8xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f32, %o: f32):
    %t = arith.addf %o, %p : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A precision cast: the loss sums the f64 parameter in f32 (truncf) and
// the f16 parameter in f32 (extf). Each adjoint comes back in its
// parameter's type, cast the other way.
#id = affine_map<(i) -> (i)>
#all = affine_map<(i) -> ()>
// CHECK-LABEL: func.func @mixed_precision_grad(
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<4xf64>)
// CHECK: arith.extf %{{.*}} : f32 to f64
// CHECK: } -> tensor<4xf64>
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<4xf16>)
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: } -> tensor<4xf16>
func.func @mixed_precision(%a: tensor<4xf64> {zb.param = "a"}, %h: tensor<4xf16> {zb.param = "h"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %le = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%le : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id, #id, #all], iterator_types = ["reduction"]}
      ins(%a, %h : tensor<4xf64>, tensor<4xf16>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f64, %q: f16, %o: f32):
    %t = arith.truncf %p : f64 to f32
    %u = arith.extf %q : f16 to f32
    %v = arith.mulf %t, %u : f32
    %s = arith.addf %o, %v : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The adjoint flows through a select's branch as a select of the seeded
// tangent: where the branch is not taken the contribution is an exact zero,
// not 0 * dOut (NaN where dOut is not finite, as past an embedding's
// padding row), as PyTorch's where gives. No product by dOut follows.
#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
// CHECK-LABEL: func.func @where_grad(
// CHECK: ^bb0(%[[D:[^:]*]]: f32, %[[X:[^:]*]]: f32, %{{[^:]*}}: f32, %[[K:[^:]*]]: i1, %{{[^:]*}}: f32):
// CHECK: %[[T:.*]] = arith.mulf %[[X]], %[[D]] : f32
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[S:.*]] = arith.select %[[K]], %[[T]], %[[Z]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
func.func @where(%x: tensor<4x8xf32>, %keep: tensor<4x8xi1>, %w: tensor<4x8xf32> {zb.param}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %w, %keep : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xi1>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %k: i1, %o: f32):
    %s = arith.mulf %a, %b : f32
    %t = arith.select %k, %s, %zero : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%p : tensor<4x8xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}
