// RUN: zb-opt %s -verify-diagnostics --zb-partition-stages="stages=3 ignore-mismatched-cuts=true" | FileCheck %s
// RUN: sed /expected-warning/d %s | zb-opt --zb-partition-stages="stages=2 ignore-mismatched-cuts=true" 2>&1 | FileCheck %s --check-prefix=FITS
// RUN: sed /expected-warning/d %s | zb-opt --zb-partition-stages="stages=1 ignore-mismatched-cuts=true" 2>&1 | FileCheck %s --check-prefix=ONE

// Markers written for two stages do not make three: with
// ignore-mismatched-cuts (the policy of --zb-pipeline and zb-run) they are
// dropped with a warning and the cost model cuts the model into three; at
// stages=2 they are used, silently; one stage (a replica of a one-rank
// pipeline) takes no cut, and drops them silently too.
// ONE-NOT: warning
// ONE: pipe.stage 0 on rank 0
// ONE-NOT: pipe.stage 1
// expected-warning @below {{1 pipe.cut markers do not make 3 stages; partitioning by the cost model}}
func.func @two_stage_markers(%x: tensor<4xf32>, %w0: tensor<4xf32> {zb.param = "w0"}, %w1: tensor<4xf32> {zb.param = "w1"}, %w2: tensor<4xf32> {zb.param = "w2"}) -> tensor<f32> {
  %a = arith.mulf %x, %w0 : tensor<4xf32>
  %h = pipe.cut %a : tensor<4xf32>
  %b = arith.mulf %h, %w1 : tensor<4xf32>
  %c = arith.mulf %b, %w2 : tensor<4xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.reduce ins(%c : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}

// CHECK-NOT: pipe.cut
// CHECK-COUNT-3: pipe.stage
// CHECK-NOT: pipe.stage

// FITS-NOT: warning
// FITS-COUNT-2: pipe.stage
// FITS-NOT: pipe.stage
