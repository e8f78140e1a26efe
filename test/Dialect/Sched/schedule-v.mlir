// RUN: zb-opt %s --zb-schedule="schedule=zb-v microbatches=4" | FileCheck %s
// RUN: zb-opt %s --zb-schedule="schedule=zb-v microbatches=4" --zb-insert-comm | FileCheck %s --check-prefix=COMM
// RUN: zb-opt %s --zb-schedule="schedule=zb-v microbatches=4" --zb-insert-comm | FileCheck %s --check-prefix=LOCAL
// RUN: zb-opt %s --zb-schedule="schedule=zb-v microbatches=4 mem-limit=2" 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: zb-opt %s --zb-schedule="schedule=zb-v microbatches=4" --zb-insert-comm | FileCheck %s --check-prefix=CHANNEL
// RUN: zb-opt %s --zb-schedule="schedule=zb-v microbatches=4" --zb-insert-comm=in-order-links=true | FileCheck %s --check-prefix=LINK

// Without mem_b, memory is counted in microbatches' activations per rank.
// REMARK: remark: stage 0 has no 'mem_b' attribute: mem-limit counts microbatches' activations per rank
// REMARK: sched.program ranks 2 stages 4 microbatches 4

// Four split stages on two ranks in a V: rank 0 holds stages 0 and 3,
// rank 1 stages 1 and 2, so the turn from stage 1 to 2 stays on rank 1.

// CHECK-LABEL: sched.program ranks 2 stages 4 microbatches 4 attributes {schedule = "zb-v", stage_ranks = array<i64: 0, 1, 1, 0>}
// CHECK-NEXT: rank 0 {
// CHECK-NEXT:   sched.compute F stage 0 microbatch 0
// CHECK-NEXT:   sched.compute F stage 0 microbatch 1
// CHECK-NEXT:   sched.compute F stage 0 microbatch 2
// CHECK-NEXT:   sched.compute F stage 3 microbatch 0
// CHECK-NEXT:   sched.compute B stage 3 microbatch 0
// CHECK-NEXT:   sched.compute F stage 3 microbatch 1
// CHECK-NEXT:   sched.compute B stage 3 microbatch 1
// CHECK-NEXT:   sched.compute B stage 0 microbatch 0
// CHECK:      rank 1 {
// CHECK-NEXT:   sched.compute F stage 1 microbatch 0
// CHECK-NEXT:   sched.compute F stage 2 microbatch 0
// CHECK-NEXT:   sched.compute F stage 1 microbatch 1
// CHECK-NEXT:   sched.compute F stage 2 microbatch 1
// CHECK-NEXT:   sched.compute B stage 2 microbatch 0
// CHECK-NEXT:   sched.compute B stage 1 microbatch 0

// Transfers cross only the boundaries 0|1 (channels 0 and 1) and 2|3
// (channels 4 and 5).
// COMM-LABEL: sched.program ranks 2 stages 4 microbatches 4
// COMM-NEXT: rank 0 {
// COMM-NEXT:   sched.compute F stage 0 microbatch 0
// COMM-NEXT:   sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
// COMM-NEXT:   sched.compute F stage 0 microbatch 1
// COMM-NEXT:   sched.send F stage 0 microbatch 1 to 1 channel 0 seq 1
// COMM-NEXT:   sched.compute F stage 0 microbatch 2
// COMM-NEXT:   sched.send F stage 0 microbatch 2 to 1 channel 0 seq 2
// COMM-NEXT:   sched.recv F stage 2 microbatch 0 from 1 channel 4 seq 0
// COMM-NEXT:   sched.compute F stage 3 microbatch 0
// COMM-NEXT:   sched.compute B stage 3 microbatch 0
// COMM-NEXT:   sched.send B stage 3 microbatch 0 to 1 channel 5 seq 0
// COMM:      rank 1 {
// COMM-NEXT:   sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
// COMM-NEXT:   sched.compute F stage 1 microbatch 0
// COMM-NEXT:   sched.compute F stage 2 microbatch 0
// COMM-NEXT:   sched.send F stage 2 microbatch 0 to 0 channel 4 seq 0
// LOCAL-NOT: channel {{[23]}} seq

// Rank 0 sends F(0, 2) on channel 0 before B(3, 0) on channel 5, both to
// rank 1, which needs the gradient first. Per channel (MPI's tags) rank 1
// receives each when it needs it; a tag-free transport (NCCL) matches a
// link in issue order, so with in-order-links it receives the activation
// first, early.
// CHANNEL:      rank 1 {
// CHANNEL:        sched.send F stage 2 microbatch 1 to 0 channel 4 seq 1
// CHANNEL-NEXT:   sched.recv B stage 3 microbatch 0 from 0 channel 5 seq 0
// CHANNEL-NEXT:   sched.compute B stage 2 microbatch 0
// LINK:      rank 1 {
// LINK:        sched.send F stage 2 microbatch 1 to 0 channel 4 seq 1
// LINK-NEXT:   sched.recv F stage 0 microbatch 2 from 0 channel 0 seq 2
// LINK-NEXT:   sched.recv B stage 3 microbatch 0 from 0 channel 5 seq 0
// LINK-NEXT:   sched.compute B stage 2 microbatch 0
func.func @v_shape(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param}, %w1: tensor<4xf32> {zb.param}, %w2: tensor<4xf32> {zb.param}, %w3: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
  %y0 = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) params(%w0 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0}
    forward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %r = arith.mulf %a, %b : tensor<4xf32>
      pipe.yield %r : tensor<4xf32> stash(%a, %b : tensor<4xf32>, tensor<4xf32>)
    } backward_input {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %dy: tensor<4xf32>):
      %da = arith.mulf %dy, %b : tensor<4xf32>
      pipe.yield %da : tensor<4xf32> stash(%a, %dy : tensor<4xf32>, tensor<4xf32>)
    } backward_weight {
    ^bb0(%a: tensor<4xf32>, %dy: tensor<4xf32>):
      %db = arith.mulf %dy, %a : tensor<4xf32>
      pipe.yield %db : tensor<4xf32>
    }
  %y1 = pipe.stage 1 on rank 1 inputs(%y0 : tensor<4xf32>) params(%w1 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0}
    forward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %r = arith.mulf %a, %b : tensor<4xf32>
      pipe.yield %r : tensor<4xf32> stash(%a, %b : tensor<4xf32>, tensor<4xf32>)
    } backward_input {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %dy: tensor<4xf32>):
      %da = arith.mulf %dy, %b : tensor<4xf32>
      pipe.yield %da : tensor<4xf32> stash(%a, %dy : tensor<4xf32>, tensor<4xf32>)
    } backward_weight {
    ^bb0(%a: tensor<4xf32>, %dy: tensor<4xf32>):
      %db = arith.mulf %dy, %a : tensor<4xf32>
      pipe.yield %db : tensor<4xf32>
    }
  %y2 = pipe.stage 2 on rank 1 inputs(%y1 : tensor<4xf32>) params(%w2 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0}
    forward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %r = arith.mulf %a, %b : tensor<4xf32>
      pipe.yield %r : tensor<4xf32> stash(%a, %b : tensor<4xf32>, tensor<4xf32>)
    } backward_input {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %dy: tensor<4xf32>):
      %da = arith.mulf %dy, %b : tensor<4xf32>
      pipe.yield %da : tensor<4xf32> stash(%a, %dy : tensor<4xf32>, tensor<4xf32>)
    } backward_weight {
    ^bb0(%a: tensor<4xf32>, %dy: tensor<4xf32>):
      %db = arith.mulf %dy, %a : tensor<4xf32>
      pipe.yield %db : tensor<4xf32>
    }
  %y3 = pipe.stage 3 on rank 0 inputs(%y2 : tensor<4xf32>) params(%w3 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0}
    forward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %r = arith.mulf %a, %b : tensor<4xf32>
      pipe.yield %r : tensor<4xf32> stash(%a, %b : tensor<4xf32>, tensor<4xf32>)
    } backward_input {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %dy: tensor<4xf32>):
      %da = arith.mulf %dy, %b : tensor<4xf32>
      pipe.yield %da : tensor<4xf32> stash(%a, %dy : tensor<4xf32>, tensor<4xf32>)
    } backward_weight {
    ^bb0(%a: tensor<4xf32>, %dy: tensor<4xf32>):
      %db = arith.mulf %dy, %a : tensor<4xf32>
      pipe.yield %db : tensor<4xf32>
    }
  return %y3 : tensor<4xf32>
}
