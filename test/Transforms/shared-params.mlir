// RUN: zb-opt %s --zb-partition-stages="stages=3" --zb-autodiff --zb-split-backward --zb-schedule="schedule=zb-h1 microbatches=2" --zb-insert-comm | FileCheck %s
// RUN: zb-opt %s --zb-partition-stages="stages=3" --zb-autodiff --zb-split-backward --zb-schedule="schedule=zb-h1 microbatches=2" --zb-insert-comm --zb-lower-to-runtime | FileCheck %s --check-prefix=STEP
// RUN: zb-opt %s --zb-partition-stages="stages=3" --zb-autodiff --zb-split-backward --zb-schedule="schedule=zb-h1 microbatches=2" --zb-insert-comm --zb-lower-to-runtime=unroll=true | FileCheck %s --check-prefix=UNROLLED
// RUN: zb-opt %s --zb-strip-cuts --zb-partition-stages="stages=2" | FileCheck %s --check-prefix=COST

// A tied weight: %w is read by the first and the last of three stages
// (GPT-2's wte/lm_head). Each of those stages holds it as a parameter of its
// own; the program records that stages 0 and 2 share it, and ranks 0 and 2
// sum its gradient after their last W, ranks 1 not at all.

// CHECK-LABEL: func.func @shared
// CHECK:         pipe.stage 0 on rank 0 data(%{{.*}}) params(%[[W:.*]] : tensor<4xf32>)
// CHECK:         pipe.stage 1 on rank 1 inputs(%{{.*}}) params(%[[V:.*]] : tensor<4xf32>)
// CHECK:         pipe.stage 2 on rank 2 inputs(%{{.*}}) params(%[[W]] : tensor<4xf32>)

// CHECK:       sched.program ranks 3 stages 3 microbatches 2 attributes {param_stages = {tied = array<i64: 0, 2>}, schedule = "zb-h1", stage_ranks = array<i64: 0, 1, 2>}
// CHECK:       rank 0 {
// CHECK:         sched.compute W stage 0 microbatch 1
// CHECK-NEXT:    sched.allreduce ["tied"] over [0, 2] seq 0
// CHECK-NEXT:  }
// CHECK:       rank 1 {
// CHECK-NOT:     sched.allreduce
// CHECK:       rank 2 {
// CHECK:         sched.compute W stage 2 microbatch 1
// CHECK-NEXT:    sched.allreduce ["tied"] over [0, 2] seq 0
// CHECK-NEXT:  }

// The loop form: the rank's table has a row for the reduction, whose case
// sums the gradient buffer of %w over the group [0, 2]; the step waits for
// the sums before it returns the gradients.
// STEP:        func.func private @zbrt_group_sum_f32(memref<*xf32>, memref<*xi64>) attributes {llvm.emit_c_interface}
// STEP:        func.func private @zbrt_wait_group_sums()
// STEP:        memref.global "private" constant @zb_rank0_group0 : memref<2xi64> = dense<[0, 2]>
// STEP-LABEL:  func.func @zb_rank0_step
// STEP-SAME:     zb.params = ["tied"]
// STEP:          %[[SUM:.*]] = memref.alloc() : memref<4xf32>
// STEP:          scf.for
// STEP:            memref.get_global @zb_rank0_group0
// STEP:            %[[BUF:.*]] = memref.cast %[[SUM]] : memref<4xf32> to memref<*xf32>
// STEP:            func.call @zbrt_group_sum_f32(%[[BUF]], %{{.*}})
// STEP:          call @zbrt_wait_group_sums()
// STEP-LABEL:  func.func @zb_rank1_step
// STEP-NOT:      zbrt_group_sum_f32
// STEP:        memref.global "private" constant @zb_rank2_group0
// STEP-LABEL:  func.func @zb_rank2_step
// STEP:          func.call @zbrt_group_sum_f32
// STEP:          call @zbrt_wait_group_sums()

// Without markers the cost model may cut between a parameter's uses too:
// the stages balance, and both hold the tied weight.
// COST-LABEL: func.func @shared
// COST:         pipe.stage 0 on rank 0 data(%{{.*}}) params(%[[W:[^,]*]], %{{.*}} : tensor<4xf32>, tensor<4xf32>)
// COST:         pipe.stage 1 on rank 1 inputs(%{{.*}}) params(%[[W]] : tensor<4xf32>)

// The unrolled form sums a copy of the running sum in place.
// UNROLLED-LABEL: func.func @zb_rank0_step
// UNROLLED:         memref.get_global @zb_rank0_group0
// UNROLLED:         %[[BUF:.*]] = memref.alloc() : memref<4xf32>
// UNROLLED-NEXT:    bufferization.materialize_in_destination %{{.*}} in restrict writable %[[BUF]]
// UNROLLED-NEXT:    %[[CAST:.*]] = memref.cast %[[BUF]]
// UNROLLED-NEXT:    call @zbrt_group_sum_f32(%[[CAST]], %{{.*}})
// UNROLLED-NEXT:    %[[SUM:.*]] = bufferization.to_tensor %[[BUF]] restrict writable
// UNROLLED-NEXT:    call @zbrt_wait_group_sums()
// UNROLLED:         return %{{.*}}, %[[SUM]]
func.func @shared(%x: tensor<4xf32>, %w: tensor<4xf32> {zb.param = "tied"}, %v: tensor<4xf32> {zb.param = "v"}) -> tensor<f32> {
  %e = tensor.empty() : tensor<4xf32>
  %a = linalg.mul ins(%x, %w : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %h0 = pipe.cut %a : tensor<4xf32>
  %b = linalg.mul ins(%h0, %v : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %h1 = pipe.cut %b : tensor<4xf32>
  %c = linalg.mul ins(%h1, %w : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.reduce ins(%c : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}
