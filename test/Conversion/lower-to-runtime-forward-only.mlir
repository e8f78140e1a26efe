// RUN: zb-opt %s --zb-partition-stages="stages=2" --zb-autodiff --zb-split-backward --zb-schedule="schedule=zb-h1 microbatches=2 forward-only=1" | FileCheck %s --check-prefix=PROGRAM
// RUN: zb-opt %s --zb-partition-stages="stages=2" --zb-autodiff --zb-split-backward --zb-schedule="schedule=zb-h1 microbatches=2 forward-only=1" --zb-insert-comm --zb-lower-to-runtime | FileCheck %s
// RUN: not zb-opt %s --zb-partition-stages="stages=2" --zb-autodiff --zb-schedule="schedule=1f1b microbatches=2 forward-only=1 replicas=2" 2>&1 | FileCheck %s --check-prefix=REPLICAS

// Evaluation through the pipeline (zb-run --eval --np P): --zb-schedule
// with forward-only keeps ZB-H1's F actions alone, in its order, and marks
// the program forward_only; --zb-insert-comm sends the activations only,
// and each step function runs the forwards, adding the loss, with no
// backward, W or gradient sum (the sums it returns stay zero).

// PROGRAM: sched.program ranks 2 stages 2 microbatches 2 attributes {forward_only, schedule = "zb-h1", stage_ranks = array<i64: 0, 1>}
// PROGRAM-NEXT: rank 0 {
// PROGRAM-NEXT: sched.compute F stage 0 microbatch 0
// PROGRAM-NEXT: sched.compute F stage 0 microbatch 1
// PROGRAM-NEXT: }
// PROGRAM-NEXT: rank 1 {
// PROGRAM-NEXT: sched.compute F stage 1 microbatch 0
// PROGRAM-NEXT: sched.compute F stage 1 microbatch 1
// PROGRAM-NEXT: }

// Rank 0: F, send per microbatch; rank 1: recv, F. The one slot (64
// bytes) is each microbatch's activation between its send or recv and F.
// CHECK-DAG: memref.global "private" constant @zb_rank0_actions : memref<4x3xi64> = dense<{{\[}}[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]]>
// CHECK-DAG: memref.global "private" constant @zb_rank1_actions : memref<4x3xi64> = dense<{{\[}}[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]]>
// CHECK-LABEL: func.func @zb_rank1_step(
// CHECK-SAME: -> (tensor<f32>, tensor<4x4xf32>)
// CHECK: call @zbrt_recv_f32(
// CHECK: func.call @zb_stage1_forward(
// CHECK-NOT: backward
// CHECK-NOT: add_grads
// CHECK: return

// REPLICAS: error: --zb-schedule: a forward-only program evaluates one pipeline; it takes no 'replicas'

#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
func.func @tiny(%x: tensor<2x4xf32>, %t: tensor<2x4xf32>, %w0: tensor<4x4xf32> {zb.param = "w0"}, %w1: tensor<4x4xf32> {zb.param = "w1"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %a = linalg.matmul ins(%x, %w0 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = pipe.cut %a : tensor<2x4xf32>
  %b = linalg.matmul ins(%h, %w1 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%b, %t : tensor<2x4xf32>, tensor<2x4xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %d = arith.subf %p, %q : f32
    %m = arith.mulf %d, %d : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}
