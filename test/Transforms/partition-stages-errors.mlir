// RUN: zb-opt %s -split-input-file -verify-diagnostics --zb-partition-stages="stages=3"
// RUN: not zb-opt %s -split-input-file --zb-partition-stages="stages=2 placement=v" 2>&1 | FileCheck %s --check-prefix=VNEEDS2
// RUN: not zb-opt %s -split-input-file --zb-partition-stages="stages=2 chunks=3 placement=v" 2>&1 | FileCheck %s --check-prefix=VNEEDS2
// RUN: not zb-opt %s -split-input-file --zb-partition-stages="stages=2 chunks=2 placement=zigzag" 2>&1 | FileCheck %s --check-prefix=PLACEMENT
// RUN: not zb-opt %s -split-input-file --zb-partition-stages="stages=0" 2>&1 | FileCheck %s --check-prefix=ZERO

// Bad options are reported before the model is looked at (on the module).
// VNEEDS2: error: --zb-partition-stages: placement v needs chunks=2
// PLACEMENT: error: --zb-partition-stages: unknown placement 'zigzag' (expected loop or v)
// ZERO: error: --zb-partition-stages: 'stages' and 'chunks' must be at least 1

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

// -----

// A tied weight read on both sides of a marker: not supported yet, and the
// error names the parameter and both stages.
// expected-error @below {{parameter 'tied' is used by stages 0 and 2; parameters shared between stages are not supported}}
func.func @shared_parameter(%x: tensor<4xf32>, %w: tensor<4xf32> {zb.param = "tied"}, %v: tensor<4xf32> {zb.param = "v"}) -> tensor<f32> {
  %a = arith.mulf %x, %w : tensor<4xf32>
  %h0 = pipe.cut %a : tensor<4xf32>
  %b = arith.mulf %h0, %v : tensor<4xf32>
  %h1 = pipe.cut %b : tensor<4xf32>
  %c = arith.mulf %h1, %w : tensor<4xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.reduce ins(%c : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}

// -----

// The result must be computed in the model: a constant loss has no stage
// to live in.
// expected-error @below {{the loss must be computed by the model, not be an argument or constant}}
func.func @constant_loss(%x: tensor<4xf32>, %w: tensor<4xf32> {zb.param = "w"}) -> tensor<f32> {
  %a = arith.mulf %x, %w : tensor<4xf32>
  %h0 = pipe.cut %a : tensor<4xf32>
  %b = arith.mulf %h0, %h0 : tensor<4xf32>
  %h1 = pipe.cut %b : tensor<4xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// Without markers the cost model needs at least one op per stage.
// expected-error @below {{cannot cut 1 ops into 3 stages}}
func.func @too_small(%x: tensor<4xf32>) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.reduce ins(%x : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}

// -----

// Without markers, cuts go only where at most two values are live: after
// the three-result generic three values cross, leaving one valid point.
#id = affine_map<(i) -> (i)>
#all = affine_map<(i) -> ()>
// expected-error @below {{only 1 points in 'fan' have at most 2 values live across them and split no parameter's users; 3 stages need 2 (place pipe.cut markers to choose the cuts)}}
func.func @fan(%x: tensor<4xf32>) -> tensor<f32> {
  %a = arith.mulf %x, %x : tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %b:3 = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e, %e, %e : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%p: f32, %o0: f32, %o1: f32, %o2: f32):
    %q = arith.mulf %p, %p : f32
    %r = arith.addf %p, %p : f32
    linalg.yield %p, %q, %r : f32, f32, f32
  } -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.generic {indexing_maps = [#id, #id, #id, #all], iterator_types = ["reduction"]}
      ins(%b#0, %b#1, %b#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%p: f32, %q: f32, %r: f32, %acc: f32):
    %s = arith.addf %p, %q : f32
    %t = arith.addf %s, %r : f32
    %u = arith.addf %acc, %t : f32
    linalg.yield %u : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A model that is already partitioned is not cut again.
// expected-error @below {{'already_partitioned' is already partitioned}}
func.func @already_partitioned(%x: tensor<4xf32>) -> tensor<f32> {
  %l = pipe.stage 0 on rank 0 data(%x : tensor<4xf32>) -> tensor<f32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      %c = arith.constant dense<1.0> : tensor<f32>
      pipe.yield %c : tensor<f32>
    }
  return %l : tensor<f32>
}
