// RUN: zb-opt %s -split-input-file -verify-diagnostics --zb-schedule="schedule=zb-h1 microbatches=4"

// Nothing to schedule.
// expected-error @+1 {{no 'pipe.stage' ops to schedule; run --zb-partition-stages first}}
module {
}

// -----

// Stages 0..3 on ranks 0, 1, 0, 0: neither loop (0, 1, 0, 1) nor V (0, 1, 1, 0).
func.func @bad_placement(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param}, %w1: tensor<4xf32> {zb.param}, %w2: tensor<4xf32> {zb.param}, %w3: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
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
  %y2 = pipe.stage 2 on rank 0 inputs(%y1 : tensor<4xf32>) params(%w2 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0}
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
  // expected-error @+1 {{'pipe.stage' op cannot derive the placement of 4 stages on 2 ranks: the stages fit neither placement: loop placement puts stage 3 on rank 1 (not 0), v placement puts stage 2 on rank 1 (not 0)}}
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

// -----

// ZB-H1 needs B and W regions; stage 2 only has a fused backward.
func.func @unsplit(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param}, %w1: tensor<4xf32> {zb.param}, %w2: tensor<4xf32> {zb.param}, %w3: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
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
  // expected-error @+1 {{'pipe.stage' op has a fused 'backward' region, but schedule 'zb-h1' splits the backward into B and W; run --zb-split-backward first or use a schedule with a fused backward (gpipe, 1f1b, interleaved-1f1b)}}
  %y2 = pipe.stage 2 on rank 2 inputs(%y1 : tensor<4xf32>) params(%w2 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0}
    forward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %r = arith.mulf %a, %b : tensor<4xf32>
      pipe.yield %r : tensor<4xf32> stash(%a, %b : tensor<4xf32>, tensor<4xf32>)
    } backward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %dy: tensor<4xf32>):
      %da = arith.mulf %dy, %b : tensor<4xf32>
      %db = arith.mulf %dy, %a : tensor<4xf32>
      pipe.yield %da, %db : tensor<4xf32>, tensor<4xf32>
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

// -----

// Every stage number once.
func.func @duplicate(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param}, %w1: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
  // expected-note @+1 {{first stage 0}}
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
  // expected-error @+1 {{'pipe.stage' op duplicates stage 0}}
  %y1 = pipe.stage 0 on rank 1 inputs(%y0 : tensor<4xf32>) params(%w1 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0}
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
  return %y1 : tensor<4xf32>
}

// -----

// Stage numbers are 0..S-1.
func.func @gap(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param}, %w1: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
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
  // expected-error @+1 {{'pipe.stage' op has stage number 2, but there are only 2 stages (expected 0..1)}}
  %y1 = pipe.stage 2 on rank 1 inputs(%y0 : tensor<4xf32>) params(%w1 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0}
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
  return %y1 : tensor<4xf32>
}

// -----

// A forward-only stage cannot be scheduled.
func.func @forward_only(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'pipe.stage' op has no backward region; --zb-schedule needs a differentiated model (run --zb-autodiff)}}
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      pipe.yield %a : tensor<4xf32>
    }
  return %y : tensor<4xf32>
}

// -----

// Without cost attributes every phase costs 1; a remark says so.
// expected-remark @+1 {{stage 0 has no 'cost_b' attribute: using unit costs (F = B = W = 1)}}
func.func @unit_costs(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param}, %w1: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
  %y0 = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) params(%w0 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_f = 1.0, cost_w = 1.0}
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
  return %y1 : tensor<4xf32>
}

// -----

// One function holds the model.
func.func @first(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
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
  return %y0 : tensor<4xf32>
}

func.func @second(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
  // expected-error @+1 {{'pipe.stage' op is in another function than stage 0; --zb-schedule expects one function holding the stages}}
  %y0 = pipe.stage 1 on rank 1 inputs(%x : tensor<4xf32>) params(%w0 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0}
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
  return %y0 : tensor<4xf32>
}

// -----

// Each rank holds the same number of stages.
// expected-error @+1 {{cannot derive the placement of 3 stages on 2 ranks: 3 stages do not divide evenly over 2 ranks}}
func.func @uneven(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param}, %w1: tensor<4xf32> {zb.param}, %w2: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
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
  %y2 = pipe.stage 2 on rank 0 inputs(%y1 : tensor<4xf32>) params(%w2 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0}
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
  return %y2 : tensor<4xf32>
}
