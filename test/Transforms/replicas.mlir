// RUN: zb-opt %s --zb-partition-stages="stages=2 chunks=2 placement=v" --zb-autodiff --zb-split-backward --zb-schedule="schedule=zb-v microbatches=2 replicas=2" --zb-insert-comm | FileCheck %s
// RUN: zb-opt %s --zb-partition-stages="stages=4" --zb-autodiff --zb-split-backward --zb-schedule="schedule=1f1b microbatches=2 replicas=2" --zb-insert-comm | FileCheck %s --check-prefix=LOOP
// RUN: zb-opt %s --zb-partition-stages="stages=2 chunks=2 placement=v" --zb-autodiff --zb-split-backward --zb-schedule="schedule=zb-v microbatches=2 replicas=2" --zb-insert-comm --zb-lower-to-runtime | FileCheck %s --check-prefix=STEP
// RUN: zb-opt %s --zb-partition-stages="stages=2 chunks=2 placement=v" --zb-autodiff --zb-split-backward --zb-schedule="schedule=zb-v microbatches=2" --zb-insert-comm | FileCheck %s --check-prefix=NODP
// RUN: not zb-opt %s --zb-partition-stages="stages=4" --zb-autodiff --zb-schedule="schedule=1f1b microbatches=2 replicas=0" 2>&1 | FileCheck %s --check-prefix=ERR

// Data parallelism: two replicas of the pipeline. The program lists every
// parameter, and each rank averages each of its parameters' gradients over
// the replicas, one bucket per stage right after that stage's last W.
// Under the V placement rank 0 holds stages 0 and 3, which both read the
// tied weight (one bucket after both stages' last W); rank 1 holds stages 1
// and 2, so the bucket of stage 2 starts while stage 1's last W still runs.

// CHECK:      sched.program ranks 2 stages 4 microbatches 2 attributes {param_stages = {tied = array<i64: 0, 3>, u = array<i64: 2>, v = array<i64: 1>}, replicas = 2 : i64, schedule = "zb-v", stage_ranks = array<i64: 0, 1, 1, 0>}
// CHECK:      rank 0 {
// CHECK:        sched.compute W stage 0 microbatch 1
// CHECK-NEXT:   sched.allreduce ["tied"] over [0] seq 0
// CHECK-NEXT: }
// CHECK:      rank 1 {
// CHECK:        sched.compute W stage 2 microbatch 1
// CHECK-NEXT:   sched.allreduce ["u"] over [1] seq 0
// CHECK-NEXT:   sched.compute W stage 1 microbatch 1
// CHECK-NEXT:   sched.allreduce ["v"] over [1] seq 1
// CHECK-NEXT: }

// With one stage per rank the tied weight spans ranks 0 and 3: its
// reduction runs over both ranks in both replicas.
// LOOP:       replicas = 2 : i64
// LOOP:       rank 0 {
// LOOP:         sched.compute BW stage 0 microbatch 1
// LOOP-NEXT:    sched.allreduce ["tied"] over [0, 3] seq 0
// LOOP:       rank 1 {
// LOOP:         sched.allreduce ["v"] over [1] seq 0
// LOOP:       rank 2 {
// LOOP:         sched.allreduce ["u"] over [2] seq 0
// LOOP:       rank 3 {
// LOOP:         sched.compute BW stage 3 microbatch 1
// LOOP-NEXT:    sched.send BW stage 3 microbatch 1 to 2 channel 5 seq 1
// LOOP-NEXT:    sched.allreduce ["tied"] over [0, 3] seq 0

// The lowering calls the runtime's replica mean for each bucket.
// STEP:       func.func private @zbrt_replica_mean_f32(memref<*xf32>, memref<*xi64>) attributes {llvm.emit_c_interface}
// STEP-NOT:   zbrt_group_sum_f32
// STEP:       memref.global "private" constant @zb_rank1_group0 : memref<1xi64> = dense<1>
// STEP:       memref.global "private" constant @zb_rank1_group1 : memref<1xi64> = dense<1>
// STEP-LABEL: func.func @zb_rank1_step
// STEP:         func.call @zbrt_replica_mean_f32
// STEP:         func.call @zbrt_replica_mean_f32
// STEP:         call @zbrt_wait_group_sums()

// One replica: no parameter is shared between ranks, so nothing reduces.
// NODP:       sched.program ranks 2 stages 4 microbatches 2 attributes {schedule = "zb-v", stage_ranks = array<i64: 0, 1, 1, 0>}
// NODP-NOT:   sched.allreduce

// ERR: --zb-schedule needs 'replicas' of at least 1, got 0
func.func @replicated(%x: tensor<4xf32>, %w: tensor<4xf32> {zb.param = "tied"}, %v: tensor<4xf32> {zb.param = "v"}, %u: tensor<4xf32> {zb.param = "u"}) -> tensor<f32> {
  %e = tensor.empty() : tensor<4xf32>
  %a = linalg.mul ins(%x, %w : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %h0 = pipe.cut %a : tensor<4xf32>
  %b = linalg.mul ins(%h0, %v : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %h1 = pipe.cut %b : tensor<4xf32>
  %c = linalg.mul ins(%h1, %u : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %h2 = pipe.cut %c : tensor<4xf32>
  %d = linalg.mul ins(%h2, %w : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.reduce ins(%d : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}
