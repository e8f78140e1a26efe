// The pass's per-rank order equals zb-sched's for the same problem: both
// call the schedule library; with --zb-insert-comm the transfers agree too.
// The normalisation keeps the program's lines without indentation.

// RUN: zb-sched --schedule=zb-h1 --stages=4 --microbatches=8 --cost-f=1 --cost-b=1 --cost-w=1 --format=mlir | zb-opt | grep -E 'sched\.|^ *rank [0-9]+ \{' | sed -e 's/^ *//' > %t.sched
// RUN: zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=8" --zb-insert-comm | grep -E 'sched\.|^ *rank [0-9]+ \{' | sed -e 's/^ *//' > %t.opt
// RUN: diff %t.sched %t.opt
// RUN: FileCheck %s --input-file=%t.opt

// zb-auto depends on the costs: here they come from a profile, the same
// numbers as zb-sched's flags.
// RUN: zb-sched --schedule=zb-auto --stages=4 --microbatches=8 --cost-f=1 --cost-b=1.5 --cost-w=0.5 --cost-comm=0.25 --format=mlir | zb-opt | grep -E 'sched\.|^ *rank [0-9]+ \{' | sed -e 's/^ *//' > %t.auto.sched
// RUN: zb-opt %s --zb-schedule="schedule=zb-auto microbatches=8 costs=%S/Inputs/profile.json comm-cost=0.25" --zb-insert-comm | grep -E 'sched\.|^ *rank [0-9]+ \{' | sed -e 's/^ *//' > %t.auto.opt
// RUN: diff %t.auto.sched %t.auto.opt

// CHECK: sched.program ranks 4 stages 4 microbatches 8 attributes {schedule = "zb-h1", stage_ranks = array<i64: 0, 1, 2, 3>}
// CHECK-NEXT: rank 0 {
// CHECK-NEXT: sched.compute F stage 0 microbatch 0
// CHECK-NEXT: sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0

func.func @four_stages(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param}, %w1: tensor<4xf32> {zb.param}, %w2: tensor<4xf32> {zb.param}, %w3: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
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
  %y2 = pipe.stage 2 on rank 2 inputs(%y1 : tensor<4xf32>) params(%w2 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0}
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
  %y3 = pipe.stage 3 on rank 3 inputs(%y2 : tensor<4xf32>) params(%w3 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0}
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
