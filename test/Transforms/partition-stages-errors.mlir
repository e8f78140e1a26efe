// RUN: zb-opt %s -split-input-file -verify-diagnostics --zb-partition-stages="stages=3"
// RUN: not zb-opt %s -split-input-file --zb-partition-stages="stages=2 placement=v" 2>&1 | FileCheck %s --check-prefix=VNEEDS2
// RUN: not zb-opt %s -split-input-file --zb-partition-stages="stages=2 chunks=3 placement=v" 2>&1 | FileCheck %s --check-prefix=VNEEDS2
// RUN: not zb-opt %s -split-input-file --zb-partition-stages="stages=2 chunks=2 placement=zigzag" 2>&1 | FileCheck %s --check-prefix=PLACEMENT
// RUN: not zb-opt %s -split-input-file --zb-partition-stages="stages=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not zb-opt %s -split-input-file --zb-partition-stages="stages=3000000000" 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not zb-opt %s -split-input-file --zb-partition-stages="stages=2 chunks=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=OVERFLOW

// Bad options are reported before the model is looked at (on the module).
// VNEEDS2: error: --zb-partition-stages: placement v needs chunks=2
// PLACEMENT: error: --zb-partition-stages: unknown placement 'zigzag' (expected loop or v)
// ZERO: error: --zb-partition-stages: 'stages' and 'chunks' must be at least 1
// More stages than ops: refused before anything is sized by the count.
// HUGE: error: cannot cut 5 ops into 3000000000 x 1 stages
// OVERFLOW: error: cannot cut 5 ops into 2 x 4611686018427387904 stages

// One marker for three stages: the count must be stages * chunks - 1.
// expected-error @below {{found 1 pipe.cut markers, but 3 stages need 2}}
func.func @too_few_markers(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param = "w0"}, %w1: tensor<4xf32> {zb.param = "w1"}) -> tensor<f32> {
  %a = arith.mulf %x, %w0 : tensor<4xf32>
  %h = pipe.cut %a : tensor<4xf32>
  %b = arith.mulf %h, %w1 : tensor<4xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.reduce ins(%b : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}

// -----

// Three markers for three stages: one too many.
// expected-error @below {{found 3 pipe.cut markers, but 3 stages need 2}}
func.func @too_many_markers(%x: tensor<4xf32>, %w: tensor<4xf32> {zb.param = "w"}) -> tensor<f32> {
  %a = arith.mulf %x, %w : tensor<4xf32>
  %h0 = pipe.cut %a : tensor<4xf32>
  %b = arith.mulf %h0, %h0 : tensor<4xf32>
  %h1 = pipe.cut %b : tensor<4xf32>
  %c = arith.mulf %h1, %h1 : tensor<4xf32>
  %h2 = pipe.cut %c : tensor<4xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.reduce ins(%h2 : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}

// -----

// The right count, but the two markers sit side by side (neither depends
// on the other), so they make two stages, not three.
// expected-error @below {{the 2 pipe.cut markers do not form a chain of 3 stages (some markers are side by side)}}
func.func @side_by_side(%x: tensor<4xf32>, %w: tensor<4xf32> {zb.param = "w"}) -> tensor<f32> {
  %h = pipe.cut %x : tensor<4xf32>
  %g = pipe.cut %w : tensor<4xf32>
  %b = arith.mulf %h, %g : tensor<4xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.reduce ins(%b : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}
