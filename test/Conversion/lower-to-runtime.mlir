// RUN: zb-opt %s --zb-partition-stages="stages=2" --zb-autodiff --zb-split-backward --zb-schedule="schedule=1f1b microbatches=2" --zb-insert-comm --zb-lower-to-runtime=unroll=true | FileCheck %s --check-prefixes=CHECK,ONEF
// RUN: zb-opt %s --zb-partition-stages="stages=2" --zb-autodiff --zb-split-backward --zb-schedule="schedule=zb-h1 microbatches=2" --zb-insert-comm --zb-lower-to-runtime=unroll=true | FileCheck %s --check-prefixes=CHECK,H1

// A two-stage model (x @ w0 | (h @ w1 - t)^2 summed) run for two
// microbatches. Stage regions become private functions; each rank's program
// becomes @zb_rank<r>_step(params of r..., data...) calling them in the
// schedule's order. Activations go over channel 0 (rank 0 -> 1), input
// gradients over channel 1 (rank 1 -> 0); zbrt_send/recv_f32 take
// (buffer, peer, channel). Data arrive stacked [M][...] and are sliced per
// microbatch; the last stage's backward is seeded with 1/M = 0.5. Under
// 1F1B each BW runs B then W at once; ZB-H1 defers rank 1's Ws to the end,
// so their B->W stash lives from B to W.

// The stage table the runtime reads for its measurements:
// CHECK: module attributes {zb.stages = {cost_b = array<f64: 0.000000e+00, 9.600000e+01>, cost_f = array<f64: 6.400000e+01, 8.800000e+01>, cost_w = array<f64: 6.400000e+01, 6.400000e+01>, mem_b = array<i64: 32, 96>, mem_w = array<i64: 64, 64>, param_bytes = array<i64: 64, 64>, rank = array<i64: 0, 1>}}
// CHECK-NOT: pipe.stage
// CHECK-NOT: sched.program
// CHECK-DAG: func.func private @zbrt_send_f32(memref<*xf32>, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @zbrt_recv_f32(memref<*xf32>, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @zbrt_action_begin(i32, i64, i64)
// CHECK-DAG: func.func private @zbrt_action_end(i32, i64, i64)

// Stage 0 (data x, param w0); its B has no input gradient to produce.
// CHECK-LABEL: func.func private @zb_stage0_forward(
// CHECK-SAME: tensor<2x4xf32>, %{{.*}}: tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-LABEL: func.func private @zb_stage0_backward_input(
// CHECK-SAME: ) {
// CHECK-NEXT: return{{$}}
// CHECK-LABEL: func.func private @zb_stage0_backward_weight(
// CHECK-SAME: -> tensor<4x4xf32>
// Stage 1 (input h, data t, param w1) returns the loss and its stash.
// CHECK-LABEL: func.func private @zb_stage1_forward(
// CHECK-SAME: %{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<4x4xf32>) -> (tensor<f32>, tensor<2x4xf32>)
// CHECK-LABEL: func.func private @zb_stage1_backward_input(
// CHECK-SAME: %{{.*}}: tensor<f32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-LABEL: func.func private @zb_stage1_backward_weight(
// CHECK-SAME: -> tensor<4x4xf32>

// CHECK-LABEL: func.func private @zb_stage0_add_grads(
// CHECK-SAME: %[[S:.*]]: tensor<4x4xf32>, %[[G:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[S]], %[[G]] :
// CHECK: arith.addf
// CHECK-LABEL: func.func @zb_rank0_step(
// CHECK-SAME: %[[W0:[^:]*]]: tensor<4x4xf32>, %[[X:[^:]*]]: tensor<2x2x4xf32>, %[[T:[^:]*]]: tensor<2x2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>)
// CHECK-SAME: attributes {zb.microbatches = 2 : i64, zb.params = ["w0"], zb.rank = 0 : i64}
// Every action is recorded: phase (0 = F), stage, microbatch.
// CHECK-DAG: %[[PF:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[S0:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[MB0:.*]] = arith.constant 0 : i64
// CHECK: call @zbrt_action_begin(%[[PF]], %[[S0]], %[[MB0]])
// CHECK-NEXT: %[[X0:.*]] = tensor.extract_slice %[[X]][0, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<2x2x4xf32> to tensor<2x4xf32>
// CHECK-NEXT: call @zb_stage0_forward(%[[X0]], %[[W0]])
// CHECK-NEXT: call @zbrt_action_end(%[[PF]], %[[S0]], %[[MB0]])
// CHECK-DAG: %[[P:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[C:.*]] = arith.constant 0 : i64
// CHECK: call @zbrt_send_f32(%{{.*}}, %[[P]], %[[C]])
// CHECK: %[[X1:.*]] = tensor.extract_slice %[[X]][1, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<2x2x4xf32> to tensor<2x4xf32>
// CHECK: call @zb_stage0_forward(%[[X1]], %[[W0]])
// CHECK-DAG: %[[P:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[C:.*]] = arith.constant 0 : i64
// CHECK: call @zbrt_send_f32(%{{.*}}, %[[P]], %[[C]])
// CHECK-DAG: %[[P:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[C:.*]] = arith.constant 1 : i64
// CHECK: call @zbrt_recv_f32(%{{.*}}, %[[P]], %[[C]])
// CHECK-NEXT: %[[G0:.*]] = bufferization.to_tensor
// CHECK: call @zb_stage0_backward_input(%[[X0]], %[[G0]])
// CHECK: %[[DW0:.*]] = call @zb_stage0_backward_weight(%[[G0]], %[[X0]])
// CHECK-DAG: %[[P:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[C:.*]] = arith.constant 1 : i64
// CHECK: call @zbrt_recv_f32(%{{.*}}, %[[P]], %[[C]])
// CHECK-NEXT: %[[G1:.*]] = bufferization.to_tensor
// CHECK: call @zb_stage0_backward_input(%[[X1]], %[[G1]])
// CHECK: %[[DW1:.*]] = call @zb_stage0_backward_weight(%[[G1]], %[[X1]])
// Gradients accumulate over the microbatches; the first stage's loss is 0.
// Each later microbatch's gradients are added with one call.
// CHECK: %[[DW:.*]] = call @zb_stage0_add_grads(%[[DW0]], %[[DW1]])
// CHECK: %[[L:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<f32>)
// CHECK: return %[[L]], %[[DW]] : tensor<f32>, tensor<4x4xf32>

// CHECK-LABEL: func.func @zb_rank1_step(
// CHECK-SAME: %[[W1:[^:]*]]: tensor<4x4xf32>, %[[X:[^:]*]]: tensor<2x2x4xf32>, %[[T:[^:]*]]: tensor<2x2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>)
// CHECK-SAME: attributes {zb.microbatches = 2 : i64, zb.params = ["w1"], zb.rank = 1 : i64}
// CHECK-DAG: %[[P:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[C:.*]] = arith.constant 0 : i64
// CHECK: call @zbrt_recv_f32(%{{.*}}, %[[P]], %[[C]])
// CHECK-NEXT: %[[H0:.*]] = bufferization.to_tensor
// CHECK: %[[T0:.*]] = tensor.extract_slice %[[T]][0, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<2x2x4xf32> to tensor<2x4xf32>
// CHECK: %[[F0:.*]]:2 = call @zb_stage1_forward(%[[H0]], %[[T0]], %[[W1]])
// CHECK: %[[SEED0:.*]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[B0:.*]]:2 = call @zb_stage1_backward_input(%[[F0]]#1, %[[T0]], %[[W1]], %[[H0]], %[[SEED0]])
// ONEF: %[[DW0:.*]] = call @zb_stage1_backward_weight(%[[B0]]#1, %[[H0]])
// H1-NOT: @zb_stage1_backward_weight
// CHECK-DAG: %[[P:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[C:.*]] = arith.constant 1 : i64
// CHECK: %[[DX0:.*]] = bufferization.to_buffer %[[B0]]#0
// CHECK: call @zbrt_send_f32(%{{.*}}, %[[P]], %[[C]])
// H1-NOT: @zb_stage1_backward_weight
// CHECK-DAG: %[[P:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[C:.*]] = arith.constant 0 : i64
// CHECK: call @zbrt_recv_f32(%{{.*}}, %[[P]], %[[C]])
// CHECK-NEXT: %[[H1:.*]] = bufferization.to_tensor
// CHECK: %[[T1:.*]] = tensor.extract_slice %[[T]][1, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<2x2x4xf32> to tensor<2x4xf32>
// CHECK: %[[F1:.*]]:2 = call @zb_stage1_forward(%[[H1]], %[[T1]], %[[W1]])
// The losses are summed here, then averaged at the end.
// CHECK: tensor.empty() : tensor<f32>
// CHECK-NEXT: %[[LS:.*]] = linalg.generic {{.*}} ins(%[[F0]]#0, %[[F1]]#0 :
// CHECK: %[[SEED1:.*]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[B1:.*]]:2 = call @zb_stage1_backward_input(%[[F1]]#1, %[[T1]], %[[W1]], %[[H1]], %[[SEED1]])
// ONEF: %[[DW1:.*]] = call @zb_stage1_backward_weight(%[[B1]]#1, %[[H1]])
// ONEF: %[[DW:.*]] = call @zb_stage1_add_grads(%[[DW0]], %[[DW1]])
// CHECK-DAG: %[[P:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[C:.*]] = arith.constant 1 : i64
// CHECK: %[[DX1:.*]] = bufferization.to_buffer %[[B1]]#0
// CHECK: call @zbrt_send_f32(%{{.*}}, %[[P]], %[[C]])
// H1: %[[DW0:.*]] = call @zb_stage1_backward_weight(%[[B0]]#1, %[[H0]])
// H1: %[[DW1:.*]] = call @zb_stage1_backward_weight(%[[B1]]#1, %[[H1]])
// H1: %[[DW:.*]] = call @zb_stage1_add_grads(%[[DW0]], %[[DW1]])
// CHECK: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[LS]] : tensor<f32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: arith.mulf %[[IN]], %[[HALF]] : f32
// CHECK: return %[[LOSS]], %[[DW]] : tensor<f32>, tensor<4x4xf32>
// CHECK-NOT: func.func
// CHECK-NOT: sched.program

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
