// Diagnostics that depend on the pass options.

// RUN: not zb-opt %s --zb-schedule="schedule=zb-h9 microbatches=4" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: unknown schedule 'zb-h9' (known: gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zb-auto, zb-v, v-half, v-min, dualpipev)

// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1" 2>&1 | FileCheck %s --check-prefix=NO-MB
// NO-MB: error: --zb-schedule needs 'microbatches' of at least 1, got 0

// The options' errors name the function's place without printing its IR.
// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 mem-limit=nan" 2>&1 | FileCheck %s --check-prefix=MEMLIMIT
// MEMLIMIT-NOT: see current operation
// MEMLIMIT: error: --zb-schedule: mem-limit must be a finite number, 0 (no limit) or more, got nan
// MEMLIMIT-NOT: see current operation
// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 comm-cost=-2" 2>&1 | FileCheck %s --check-prefix=COMMCOST
// COMMCOST: error: --zb-schedule needs a finite 'comm-cost' of 0 or more, got -2

// A layout the schedule cannot use (the library's message).
// RUN: not zb-opt %s --zb-schedule="schedule=zb-v microbatches=4" 2>&1 | FileCheck %s --check-prefix=LAYOUT
// LAYOUT: error: cannot generate schedule 'zb-v': zb-v needs chunks=2 and placement=v; got chunks=1, placement=v

// GPipe keeps all 8 microbatches in flight: 8 * 64 bytes on rank 0.
// RUN: not zb-opt %s --zb-schedule="schedule=gpipe microbatches=8 mem-limit=256" 2>&1 | FileCheck %s --check-prefix=MEMORY
// MEMORY: error: schedule 'gpipe' does not fit mem-limit: F(stage 0, mb 4) at position 4 on rank 0 raises activation memory to 320, above the limit 256

// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 costs=%S/Inputs/no-such-profile.json" 2>&1 | FileCheck %s --check-prefix=NO-FILE
// NO-FILE: error: costs file '{{.*}}no-such-profile.json': cannot read it: {{.+}}

// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 costs=%S/Inputs/profile-bad-json.json" 2>&1 | FileCheck %s --check-prefix=BAD-JSON
// BAD-JSON: error: costs file '{{.*}}profile-bad-json.json': invalid JSON: {{.+}}

// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 costs=%S/Inputs/profile-no-stages.json" 2>&1 | FileCheck %s --check-prefix=NO-STAGES
// NO-STAGES: error: costs file '{{.*}}profile-no-stages.json': expected an object with a "stages" array

// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 costs=%S/Inputs/profile-missing-stage.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: costs file '{{.*}}profile-missing-stage.json': no entry for stage 1

// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 costs=%S/Inputs/profile-no-b.json" 2>&1 | FileCheck %s --check-prefix=NO-B
// NO-B: error: costs file '{{.*}}profile-no-b.json': entry 0 of "stages" (stage 0) needs numbers "f" and "b"

// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 costs=%S/Inputs/profile-not-object.json" 2>&1 | FileCheck %s --check-prefix=NOT-OBJECT
// NOT-OBJECT: error: costs file '{{.*}}': entry 0 of "stages" is not an object

// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 costs=%S/Inputs/profile-no-stage-number.json" 2>&1 | FileCheck %s --check-prefix=NO-NUMBER
// NO-NUMBER: error: costs file '{{.*}}': entry 0 of "stages" has no integer "stage"

// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 costs=%S/Inputs/profile-out-of-range.json" 2>&1 | FileCheck %s --check-prefix=RANGE
// RANGE: error: costs file '{{.*}}': entry 0 of "stages" names stage 4, but the model has 4 stages

// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 costs=%S/Inputs/profile-duplicate.json" 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: costs file '{{.*}}': stage 1 appears twice

// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 costs=%S/Inputs/profile-negative.json" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: costs file '{{.*}}': entry 0 of "stages" (stage 0) has a cost that is negative, not finite or past 1e12 ms

// Times in another unit would be misread as milliseconds.
// RUN: not zb-opt %s --zb-schedule="schedule=zb-h1 microbatches=4 costs=%S/Inputs/profile-unit.json" 2>&1 | FileCheck %s --check-prefix=UNIT
// UNIT: error: costs file '{{.*}}profile-unit.json': "unit" must be "ms", the unit the times are read in

func.func @four_stages(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param}, %w1: tensor<4xf32> {zb.param}, %w2: tensor<4xf32> {zb.param}, %w3: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
  %y0 = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) params(%w0 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0, mem_b = 64, mem_w = 32}
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
  %y1 = pipe.stage 1 on rank 1 inputs(%y0 : tensor<4xf32>) params(%w1 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0, mem_b = 64, mem_w = 32}
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
  %y2 = pipe.stage 2 on rank 2 inputs(%y1 : tensor<4xf32>) params(%w2 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0, mem_b = 64, mem_w = 32}
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
  %y3 = pipe.stage 3 on rank 3 inputs(%y2 : tensor<4xf32>) params(%w3 : tensor<4xf32>) -> tensor<4xf32> attributes {cost_b = 1.0, cost_f = 1.0, cost_w = 1.0, mem_b = 64, mem_w = 32}
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
