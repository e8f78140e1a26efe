// RUN: zb-opt %s --zb-partition-stages="stages=2" --zb-autodiff --zb-split-backward --zb-schedule="schedule=zb-h1 microbatches=2" --zb-insert-comm --zb-lower-to-runtime | FileCheck %s

// The loop form of --zb-lower-to-runtime on the two-stage model of
// lower-to-runtime.mlir under ZB-H1, two microbatches. Each rank's step
// function loops over a constant table, one row per action:
// [template, microbatch, arena offsets of the values it reads and writes].
// Rank 1 receives h (template 0), runs F (1), B (2), sends dh (3) for each
// microbatch, then both Ws (4). A value's slot is freed after its last
// reader: F's stash at 64 dies at B of microbatch 0, so h of microbatch 1
// is received there; h of microbatch 0 (offset 0) is read again by its W
// (B->W stash), so it lives until row 8. Six 64-byte slots at most are live
// at once: 384 bytes.

// W calls its accumulating form, which takes the sum after W's arguments
// and adds the gradient to it in place (outs), which bufferization keeps in
// place; the plain W, no longer called, goes.
// CHECK-NOT: func.func private @zb_stage1_backward_weight(
// CHECK-LABEL: func.func private @zb_stage1_backward_weight_acc(
// CHECK-SAME: %{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2x4xf32>, %[[S:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[G:.*]] = linalg.generic
// CHECK: %[[NEW:.*]] = linalg.generic {{.*}} ins(%[[G]] : tensor<4x4xf32>) outs(%[[S]] : tensor<4x4xf32>)
// CHECK: return %[[NEW]] : tensor<4x4xf32>
// CHECK-NOT: add_grads

// CHECK-DAG: memref.global "private" constant @zb_rank0_actions : memref<10x3xi64> = dense<{{\[}}[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [2, 0, 0], [3, 0, 0], [4, 0, 0], [2, 1, 0], [3, 1, 0], [4, 1, 0]]>
// CHECK-DAG: memref.global "private" constant @zb_rank1_actions : memref<10x6xi64> = dense<{{\[}}[0, 0, 0, 0, 0, 0], [1, 0, 0, 64, 0, 0], [2, 0, 64, 0, 128, 192], [3, 0, 128, 0, 0, 0], [0, 1, 64, 0, 0, 0], [1, 1, 64, 128, 0, 0], [2, 1, 128, 64, 256, 320], [3, 1, 256, 0, 0, 0], [4, 0, 192, 0, 0, 0], [4, 1, 320, 64, 0, 0]]>

// CHECK-LABEL: func.func @zb_rank1_step(
// CHECK-SAME: %[[W1:[^:]*]]: tensor<4x4xf32>, %[[X:[^:]*]]: tensor<2x2x4xf32>, %[[T:[^:]*]]: tensor<2x2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>)
// CHECK-SAME: attributes {zb.arena_bytes = 384 : i64, zb.microbatches = 2 : i64, zb.params = ["w1"], zb.rank = 1 : i64}
// The arena, the zeroed gradient sum and the zeroed loss sum.
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<384xi8>
// CHECK: %[[SUM:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[SUM]] : memref<4x4xf32>)
// CHECK: %[[LOSS:.*]] = memref.alloc() : memref<f32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[LOSS]] : memref<f32>)
// CHECK: %[[TABLE:.*]] = memref.get_global @zb_rank1_actions : memref<10x6xi64>
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C10:.*]] = arith.constant 10 : index
// CHECK: scf.for %[[I:.*]] = %[[C0]] to %[[C10]] step %[[C1]] {
// CHECK: %[[K64:.*]] = memref.load %[[TABLE]][%[[I]], %[[C0]]] : memref<10x6xi64>
// CHECK: %[[K:.*]] = arith.index_cast %[[K64]] : i64 to index
// CHECK: %[[MB64:.*]] = memref.load %[[TABLE]][%[[I]], %[[C1]]] : memref<10x6xi64>
// CHECK: %[[MB:.*]] = arith.index_cast %[[MB64]] : i64 to index
// CHECK: scf.index_switch %[[K]]
// Receive h into its slot.
// CHECK: case 0 {
// CHECK: %[[O:.*]] = arith.index_cast
// CHECK: %[[V:.*]] = memref.view %[[ARENA]][%[[O]]][] : memref<384xi8> to memref<2x4xf32>
// CHECK: %[[U:.*]] = memref.cast %[[V]] : memref<2x4xf32> to memref<*xf32>
// CHECK: call @zbrt_recv_f32(%[[U]],
// F: h from its slot, t sliced at the row's microbatch, the stash written
// to a slot marked for --zb-results-to-slots, the loss added to the sum.
// CHECK: case 1 {
// CHECK: %[[HV:.*]] = memref.view %[[ARENA]]
// CHECK: %[[H:.*]] = bufferization.to_tensor %[[HV]] restrict : memref<2x4xf32> to tensor<2x4xf32>
// CHECK: call @zbrt_action_begin(%{{.*}}, %{{.*}}, %[[MB64]])
// CHECK: %[[OUT:.*]] = memref.view %[[ARENA]][%{{.*}}][] {zb.out_slot} : memref<384xi8> to memref<2x4xf32>
// CHECK: %[[TS:.*]] = tensor.extract_slice %[[T]][%[[MB]], 0, 0] [1, 2, 4] [1, 1, 1] : tensor<2x2x4xf32> to tensor<2x4xf32>
// CHECK: %[[F:.*]]:2 = func.call @zb_stage1_forward(%[[H]], %[[TS]], %[[W1]])
// CHECK: bufferization.materialize_in_destination %[[F]]#1 in restrict writable %[[OUT]]
// CHECK: %[[LS:.*]] = bufferization.to_tensor %[[LOSS]] restrict writable
// CHECK: %[[ADD:.*]] = linalg.generic {{.*}} ins(%[[LS]], %[[F]]#0 :
// CHECK: bufferization.materialize_in_destination %[[ADD]] in restrict writable %[[LOSS]]
// CHECK: call @zbrt_action_end(
// B: seeded with 1/M; writes dh and its B->W stash to slots.
// CHECK: case 2 {
// CHECK: arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK: call @zb_stage1_backward_input(
// CHECK-COUNT-2: bufferization.materialize_in_destination
// CHECK: case 3 {
// CHECK: call @zbrt_send_f32(
// W: the microbatch's gradient added in place to the sum.
// CHECK: case 4 {
// CHECK: %[[ST:.*]] = bufferization.to_tensor %[[SUM]] restrict writable
// CHECK: %[[NEW:.*]] = func.call @zb_stage1_backward_weight_acc(%{{.*}}, %{{.*}}, %[[ST]])
// CHECK: bufferization.materialize_in_destination %[[NEW]] in restrict writable %[[SUM]]
// CHECK: default {
// The loss mean and the sums are returned; the arena is freed.
// CHECK: %[[LT:.*]] = bufferization.to_tensor %[[LOSS]] restrict
// CHECK: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[LT]] : tensor<f32>)
// CHECK: %[[GRAD:.*]] = bufferization.to_tensor %[[SUM]] restrict
// CHECK: memref.dealloc %[[ARENA]]
// CHECK: return %[[MEAN]], %[[GRAD]] : tensor<f32>, tensor<4x4xf32>

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
