// RUN: zb-opt %s --zb-schedule="schedule=1f1b microbatches=4" | FileCheck %s --check-prefix=ONEF
// RUN: zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4" | FileCheck %s --check-prefix=H1
// RUN: zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4" | zb-opt | FileCheck %s --check-prefix=H1

// Four split stages on four ranks (loop placement) with the split pass's
// cost and memory attributes. The model stays; the schedule is appended.

// ONEF-LABEL: func.func @four_stages
// ONEF: pipe.stage 3 on rank 3
// ONEF-LABEL: sched.program ranks 4 stages 4 microbatches 4 attributes {schedule = "1f1b", stage_ranks = array<i64: 0, 1, 2, 3>}
// 1F1B runs fused backwards even on split stages: rank 0 warms up with
// p-1 = 3 forwards, rank 3 alternates from the start.
// ONEF-NEXT: rank 0 {
// ONEF-NEXT:   sched.compute F stage 0 microbatch 0
// ONEF-NEXT:   sched.compute F stage 0 microbatch 1
// ONEF-NEXT:   sched.compute F stage 0 microbatch 2
// ONEF-NEXT:   sched.compute F stage 0 microbatch 3
// ONEF-NEXT:   sched.compute BW stage 0 microbatch 0
// ONEF-NEXT:   sched.compute BW stage 0 microbatch 1
// ONEF-NEXT:   sched.compute BW stage 0 microbatch 2
// ONEF-NEXT:   sched.compute BW stage 0 microbatch 3
// ONEF-NEXT: }
// ONEF-NEXT: rank 1 {
// ONEF:      rank 3 {
// ONEF-NEXT:   sched.compute F stage 3 microbatch 0
// ONEF-NEXT:   sched.compute BW stage 3 microbatch 0
// ONEF-NEXT:   sched.compute F stage 3 microbatch 1
// ONEF-NEXT:   sched.compute BW stage 3 microbatch 1
// ONEF-NEXT:   sched.compute F stage 3 microbatch 2
// ONEF-NEXT:   sched.compute BW stage 3 microbatch 2
// ONEF-NEXT:   sched.compute F stage 3 microbatch 3
// ONEF-NEXT:   sched.compute BW stage 3 microbatch 3
// ONEF-NEXT: }
// ONEF-NOT: sched.send
// ONEF-NOT: sched.recv

// H1-LABEL: sched.program ranks 4 stages 4 microbatches 4 attributes {schedule = "zb-h1", stage_ranks = array<i64: 0, 1, 2, 3>}
// ZB-H1: rank r keeps p-r forwards in flight and defers its Ws by r.
// H1-NEXT: rank 0 {
// H1-NEXT:   sched.compute F stage 0 microbatch 0
// H1-NEXT:   sched.compute F stage 0 microbatch 1
// H1-NEXT:   sched.compute F stage 0 microbatch 2
// H1-NEXT:   sched.compute F stage 0 microbatch 3
// H1-NEXT:   sched.compute B stage 0 microbatch 0
// H1-NEXT:   sched.compute W stage 0 microbatch 0
// H1-NEXT:   sched.compute B stage 0 microbatch 1
// H1-NEXT:   sched.compute W stage 0 microbatch 1
// H1-NEXT:   sched.compute B stage 0 microbatch 2
// H1-NEXT:   sched.compute W stage 0 microbatch 2
// H1-NEXT:   sched.compute B stage 0 microbatch 3
// H1-NEXT:   sched.compute W stage 0 microbatch 3
// H1-NEXT: }
// H1:      rank 3 {
// H1-NEXT:   sched.compute F stage 3 microbatch 0
// H1-NEXT:   sched.compute B stage 3 microbatch 0
// H1-NEXT:   sched.compute F stage 3 microbatch 1
// H1-NEXT:   sched.compute B stage 3 microbatch 1
// H1-NEXT:   sched.compute F stage 3 microbatch 2
// H1-NEXT:   sched.compute B stage 3 microbatch 2
// H1-NEXT:   sched.compute F stage 3 microbatch 3
// H1-NEXT:   sched.compute B stage 3 microbatch 3
// H1-NEXT:   sched.compute W stage 3 microbatch 0
// H1-NEXT:   sched.compute W stage 3 microbatch 1
// H1-NEXT:   sched.compute W stage 3 microbatch 2
// H1-NEXT:   sched.compute W stage 3 microbatch 3
// H1-NEXT: }
func.func @four_stages(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param}, %w1: tensor<4xf32> {zb.param}, %w2: tensor<4xf32> {zb.param}, %w3: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
  %y0 = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) params(%w0 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 2.0, cost_f = 1.0, cost_w = 1.0, mem_b = 64, mem_w = 32}
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
  %y1 = pipe.stage 1 on rank 1 inputs(%y0 : tensor<4xf32>) params(%w1 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 2.0, cost_f = 1.0, cost_w = 1.0, mem_b = 64, mem_w = 32}
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
  %y2 = pipe.stage 2 on rank 2 inputs(%y1 : tensor<4xf32>) params(%w2 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 2.0, cost_f = 1.0, cost_w = 1.0, mem_b = 64, mem_w = 32}
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
  %y3 = pipe.stage 3 on rank 3 inputs(%y2 : tensor<4xf32>) params(%w3 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 2.0, cost_f = 1.0, cost_w = 1.0, mem_b = 64, mem_w = 32}
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
