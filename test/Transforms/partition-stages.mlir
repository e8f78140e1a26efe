// RUN: zb-opt %s -split-input-file --zb-partition-stages="stages=4" | FileCheck %s --check-prefixes=CHECK,FOUR
// RUN: zb-opt %s -split-input-file --zb-partition-stages="stages=2 chunks=2" | FileCheck %s --check-prefixes=CHECK,LOOP
// RUN: zb-opt %s -split-input-file --zb-partition-stages="stages=2 chunks=2 placement=v" | FileCheck %s --check-prefixes=CHECK,V
// RUN: zb-opt %s -split-input-file --zb-partition-stages="stages=4" | FileCheck %s --check-prefix=NOCUT

// No marker survives anywhere in the output.
// NOCUT-NOT: pipe.cut

// Three pipe.cut markers make four stages, whatever the placement: each op
// lands in the stage given by the markers before it, the markers disappear
// (NOCUT), each parameter goes to the one stage that uses it, values
// crossing a boundary become the next stage's inputs (%h0 skips stage 1,
// which hands it through), and the data %x goes to both stages that read
// it, %t to the last only. The placement maps stages to ranks: one per rank (FOUR),
// s mod 2 (LOOP), or s and 3-s on one rank (V).
// CHECK-LABEL: func.func @markers(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>, %[[T:[^:]*]]: tensor<4x8xf32>, %[[W0:[^:]*]]: tensor<4x8xf32> {zb.param = "w0"}, %[[W1:[^:]*]]: tensor<4x8xf32> {zb.param = "w1"}, %[[W2:[^:]*]]: tensor<4x8xf32> {zb.param = "w2"}, %[[W3:[^:]*]]: tensor<4x8xf32> {zb.param = "w3"})
// FOUR: %[[S0:.*]] = pipe.stage 0 on rank 0 data(%[[X]] : tensor<4x8xf32>) params(%[[W0]] : tensor<4x8xf32>) -> tensor<4x8xf32> forward {
// LOOP: %[[S0:.*]] = pipe.stage 0 on rank 0 data(%[[X]] : tensor<4x8xf32>) params(%[[W0]] : tensor<4x8xf32>) -> tensor<4x8xf32> forward {
// V:    %[[S0:.*]] = pipe.stage 0 on rank 0 data(%[[X]] : tensor<4x8xf32>) params(%[[W0]] : tensor<4x8xf32>) -> tensor<4x8xf32> forward {
// CHECK-NEXT: ^bb0(%[[X0:[^:]*]]: tensor<4x8xf32>, %[[W00:[^:]*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[A:.*]] = arith.mulf %[[X0]], %[[W00]]
// CHECK-NEXT: pipe.yield %[[A]] : tensor<4x8xf32>
// CHECK-NEXT: }
// FOUR: %[[S1:.*]]:2 = pipe.stage 1 on rank 1 inputs(%[[S0]] : tensor<4x8xf32>) params(%[[W1]] : tensor<4x8xf32>) -> tensor<4x8xf32>, tensor<4x8xf32> forward {
// LOOP: %[[S1:.*]]:2 = pipe.stage 1 on rank 1 inputs(%[[S0]] : tensor<4x8xf32>) params(%[[W1]] : tensor<4x8xf32>) -> tensor<4x8xf32>, tensor<4x8xf32> forward {
// V:    %[[S1:.*]]:2 = pipe.stage 1 on rank 1 inputs(%[[S0]] : tensor<4x8xf32>) params(%[[W1]] : tensor<4x8xf32>) -> tensor<4x8xf32>, tensor<4x8xf32> forward {
// CHECK-NEXT: ^bb0(%[[H0:[^:]*]]: tensor<4x8xf32>, %[[W11:[^:]*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[B:.*]] = arith.mulf %[[H0]], %[[W11]]
// CHECK-NEXT: pipe.yield %[[H0]], %[[B]] : tensor<4x8xf32>, tensor<4x8xf32>
// CHECK-NEXT: }
// FOUR: %[[S2:.*]] = pipe.stage 2 on rank 2 inputs(%[[S1]]#0, %[[S1]]#1 : tensor<4x8xf32>, tensor<4x8xf32>) params(%[[W2]] : tensor<4x8xf32>) -> tensor<4x8xf32> forward {
// LOOP: %[[S2:.*]] = pipe.stage 2 on rank 0 inputs(%[[S1]]#0, %[[S1]]#1 : tensor<4x8xf32>, tensor<4x8xf32>) params(%[[W2]] : tensor<4x8xf32>) -> tensor<4x8xf32> forward {
// V:    %[[S2:.*]] = pipe.stage 2 on rank 1 inputs(%[[S1]]#0, %[[S1]]#1 : tensor<4x8xf32>, tensor<4x8xf32>) params(%[[W2]] : tensor<4x8xf32>) -> tensor<4x8xf32> forward {
// CHECK-NEXT: ^bb0(%[[H0B:[^:]*]]: tensor<4x8xf32>, %[[H1:[^:]*]]: tensor<4x8xf32>, %[[W22:[^:]*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[C:.*]] = arith.mulf %[[H1]], %[[W22]]
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[C]], %[[H0B]]
// CHECK-NEXT: pipe.yield %[[R]] : tensor<4x8xf32>
// CHECK-NEXT: }
// FOUR: %[[S3:.*]] = pipe.stage 3 on rank 3 inputs(%[[S2]] : tensor<4x8xf32>) data(%[[X]], %[[T]] : tensor<4x8xf32>, tensor<4x8xf32>) params(%[[W3]] : tensor<4x8xf32>) -> tensor<f32> forward {
// LOOP: %[[S3:.*]] = pipe.stage 3 on rank 1 inputs(%[[S2]] : tensor<4x8xf32>) data(%[[X]], %[[T]] : tensor<4x8xf32>, tensor<4x8xf32>) params(%[[W3]] : tensor<4x8xf32>) -> tensor<f32> forward {
// V:    %[[S3:.*]] = pipe.stage 3 on rank 0 inputs(%[[S2]] : tensor<4x8xf32>) data(%[[X]], %[[T]] : tensor<4x8xf32>, tensor<4x8xf32>) params(%[[W3]] : tensor<4x8xf32>) -> tensor<f32> forward {
// CHECK-NEXT: ^bb0(%[[H2:[^:]*]]: tensor<4x8xf32>, %[[X3:[^:]*]]: tensor<4x8xf32>, %[[T3:[^:]*]]: tensor<4x8xf32>, %[[W33:[^:]*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[D:.*]] = arith.mulf %[[H2]], %[[W33]]
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[D]], %[[X3]]
// CHECK-NEXT: %[[E:.*]] = arith.subf %[[M]], %[[T3]]
// CHECK: %[[L:.*]] = linalg.reduce ins(%[[E]]
// CHECK: pipe.yield %[[L]] : tensor<f32>
// CHECK: return %[[S3]] : tensor<f32>
func.func @markers(%x: tensor<4x8xf32>, %t: tensor<4x8xf32>, %w0: tensor<4x8xf32> {zb.param = "w0"}, %w1: tensor<4x8xf32> {zb.param = "w1"}, %w2: tensor<4x8xf32> {zb.param = "w2"}, %w3: tensor<4x8xf32> {zb.param = "w3"}) -> tensor<f32> {
  %a = arith.mulf %x, %w0 : tensor<4x8xf32>
  %h0 = pipe.cut %a : tensor<4x8xf32>
  %b = arith.mulf %h0, %w1 : tensor<4x8xf32>
  %h1 = pipe.cut %b : tensor<4x8xf32>
  %c = arith.mulf %h1, %w2 : tensor<4x8xf32>
  %r = arith.addf %c, %h0 : tensor<4x8xf32>
  %h2 = pipe.cut %r : tensor<4x8xf32>
  %d = arith.mulf %h2, %w3 : tensor<4x8xf32>
  %m = arith.mulf %d, %x : tensor<4x8xf32>
  %e = arith.subf %m, %t : tensor<4x8xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.reduce ins(%e : tensor<4x8xf32>) outs(%z : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}

// -----

// No markers: the cost model cuts a stack of 8 identical layers
// (matmul + bias + ReLU) into 4 stages of 2 layers each: stage s owns the
// weights and biases of layers 2s and 2s+1, and only the activation
// crosses each boundary. The shared zero fill is recreated in every stage.
// CHECK-LABEL: func.func @stack8(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x16xf32>,
// CHECK-SAME: %[[W0:[^:]*]]: tensor<16x16xf32> {zb.param = "l0.w"}, %[[B0:[^:]*]]: tensor<16xf32> {zb.param = "l0.b"}
// CHECK-SAME: %[[W1:[^:]*]]: tensor<16x16xf32> {zb.param = "l1.w"}, %[[B1:[^:]*]]: tensor<16xf32> {zb.param = "l1.b"}
// CHECK-SAME: %[[W2:[^:]*]]: tensor<16x16xf32> {zb.param = "l2.w"}, %[[B2:[^:]*]]: tensor<16xf32> {zb.param = "l2.b"}
// CHECK-SAME: %[[W3:[^:]*]]: tensor<16x16xf32> {zb.param = "l3.w"}, %[[B3:[^:]*]]: tensor<16xf32> {zb.param = "l3.b"}
// CHECK-SAME: %[[W4:[^:]*]]: tensor<16x16xf32> {zb.param = "l4.w"}, %[[B4:[^:]*]]: tensor<16xf32> {zb.param = "l4.b"}
// CHECK-SAME: %[[W5:[^:]*]]: tensor<16x16xf32> {zb.param = "l5.w"}, %[[B5:[^:]*]]: tensor<16xf32> {zb.param = "l5.b"}
// CHECK-SAME: %[[W6:[^:]*]]: tensor<16x16xf32> {zb.param = "l6.w"}, %[[B6:[^:]*]]: tensor<16xf32> {zb.param = "l6.b"}
// CHECK-SAME: %[[W7:[^:]*]]: tensor<16x16xf32> {zb.param = "l7.w"}, %[[B7:[^:]*]]: tensor<16xf32> {zb.param = "l7.b"}
// FOUR: %[[S0:.*]] = pipe.stage 0 on rank 0 data(%[[X]] : tensor<8x16xf32>) params(%[[W0]], %[[B0]], %[[W1]], %[[B1]] :
// LOOP: %[[S0:.*]] = pipe.stage 0 on rank 0 data(%[[X]] : tensor<8x16xf32>) params(%[[W0]], %[[B0]], %[[W1]], %[[B1]] :
// V:    %[[S0:.*]] = pipe.stage 0 on rank 0 data(%[[X]] : tensor<8x16xf32>) params(%[[W0]], %[[B0]], %[[W1]], %[[B1]] :
// CHECK-SAME: -> tensor<8x16xf32>
// CHECK: linalg.fill
// CHECK-COUNT-2: linalg.matmul
// CHECK-NOT: linalg.matmul
// CHECK: pipe.yield
// FOUR: %[[S1:.*]] = pipe.stage 1 on rank 1 inputs(%[[S0]] : tensor<8x16xf32>) params(%[[W2]], %[[B2]], %[[W3]], %[[B3]] :
// LOOP: %[[S1:.*]] = pipe.stage 1 on rank 1 inputs(%[[S0]] : tensor<8x16xf32>) params(%[[W2]], %[[B2]], %[[W3]], %[[B3]] :
// V:    %[[S1:.*]] = pipe.stage 1 on rank 1 inputs(%[[S0]] : tensor<8x16xf32>) params(%[[W2]], %[[B2]], %[[W3]], %[[B3]] :
// CHECK-SAME: -> tensor<8x16xf32>
// CHECK: linalg.fill
// CHECK-COUNT-2: linalg.matmul
// CHECK-NOT: linalg.matmul
// CHECK: pipe.yield
// FOUR: %[[S2:.*]] = pipe.stage 2 on rank 2 inputs(%[[S1]] : tensor<8x16xf32>) params(%[[W4]], %[[B4]], %[[W5]], %[[B5]] :
// LOOP: %[[S2:.*]] = pipe.stage 2 on rank 0 inputs(%[[S1]] : tensor<8x16xf32>) params(%[[W4]], %[[B4]], %[[W5]], %[[B5]] :
// V:    %[[S2:.*]] = pipe.stage 2 on rank 1 inputs(%[[S1]] : tensor<8x16xf32>) params(%[[W4]], %[[B4]], %[[W5]], %[[B5]] :
// CHECK-SAME: -> tensor<8x16xf32>
// CHECK: linalg.fill
// CHECK-COUNT-2: linalg.matmul
// CHECK-NOT: linalg.matmul
// CHECK: pipe.yield
// FOUR: %[[S3:.*]] = pipe.stage 3 on rank 3 inputs(%[[S2]] : tensor<8x16xf32>) params(%[[W6]], %[[B6]], %[[W7]], %[[B7]] :
// LOOP: %[[S3:.*]] = pipe.stage 3 on rank 1 inputs(%[[S2]] : tensor<8x16xf32>) params(%[[W6]], %[[B6]], %[[W7]], %[[B7]] :
// V:    %[[S3:.*]] = pipe.stage 3 on rank 0 inputs(%[[S2]] : tensor<8x16xf32>) params(%[[W6]], %[[B6]], %[[W7]], %[[B7]] :
// CHECK-SAME: -> tensor<f32>
// CHECK: linalg.fill
// CHECK-COUNT-2: linalg.matmul
// CHECK-NOT: linalg.matmul
// CHECK: linalg.reduce
// CHECK: return %[[S3]] : tensor<f32>
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
func.func @stack8(%x: tensor<8x16xf32>,
    %w0: tensor<16x16xf32> {zb.param = "l0.w"},
    %b0: tensor<16xf32> {zb.param = "l0.b"},
    %w1: tensor<16x16xf32> {zb.param = "l1.w"},
    %b1: tensor<16xf32> {zb.param = "l1.b"},
    %w2: tensor<16x16xf32> {zb.param = "l2.w"},
    %b2: tensor<16xf32> {zb.param = "l2.b"},
    %w3: tensor<16x16xf32> {zb.param = "l3.w"},
    %b3: tensor<16xf32> {zb.param = "l3.b"},
    %w4: tensor<16x16xf32> {zb.param = "l4.w"},
    %b4: tensor<16xf32> {zb.param = "l4.b"},
    %w5: tensor<16x16xf32> {zb.param = "l5.w"},
    %b5: tensor<16xf32> {zb.param = "l5.b"},
    %w6: tensor<16x16xf32> {zb.param = "l6.w"},
    %b6: tensor<16xf32> {zb.param = "l6.b"},
    %w7: tensor<16x16xf32> {zb.param = "l7.w"},
    %b7: tensor<16xf32> {zb.param = "l7.b"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m0 = linalg.matmul ins(%x, %w0 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h0 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m0, %b0 : tensor<8x16xf32>, tensor<16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %m1 = linalg.matmul ins(%h0, %w1 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h1 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m1, %b1 : tensor<8x16xf32>, tensor<16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %m2 = linalg.matmul ins(%h1, %w2 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h2 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m2, %b2 : tensor<8x16xf32>, tensor<16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %m3 = linalg.matmul ins(%h2, %w3 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h3 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m3, %b3 : tensor<8x16xf32>, tensor<16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %m4 = linalg.matmul ins(%h3, %w4 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h4 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m4, %b4 : tensor<8x16xf32>, tensor<16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %m5 = linalg.matmul ins(%h4, %w5 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h5 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m5, %b5 : tensor<8x16xf32>, tensor<16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %m6 = linalg.matmul ins(%h5, %w6 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h6 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m6, %b6 : tensor<8x16xf32>, tensor<16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %m7 = linalg.matmul ins(%h6, %w7 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h7 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m7, %b7 : tensor<8x16xf32>, tensor<16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%h7 : tensor<8x16xf32>) outs(%l0 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  return %loss : tensor<f32>
}
