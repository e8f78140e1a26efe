// RUN: split-file %s %t
// RUN: zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/slow-last.json" | FileCheck %s
// RUN: zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/even.json" | FileCheck %s --check-prefix=EVEN
// RUN: zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/slow-last.json" --zb-autodiff --zb-split-backward | FileCheck %s --check-prefix=SPLIT
// RUN: not zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/bad.json" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/missing.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/too-fine.json" 2>&1 | FileCheck %s --check-prefix=FINE
// RUN: zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/mixed.json" | FileCheck %s --check-prefix=TOTALS
// RUN: zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/mixed.json schedule=gpipe microbatches=4" | FileCheck %s --check-prefix=GPIPE
// RUN: not zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/mixed.json schedule=nope microbatches=4" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// Four equal layers. By FLOPs two stages take two layers each; the profile
// of the four-stage partition says the last layer takes 5 ms of the 8, so
// the measured cut puts three layers on stage 0 (3 ms) and one on stage 1
// (5 ms), and each stage records its measured times.
// CHECK-LABEL: func.func @four
// CHECK: pipe.stage 0 on rank 0 data(%{{.*}}) params(%{{.*}}, %{{.*}}, %{{.*}} : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> attributes {time_b = 1.500000e+00 : f64, time_f = 1.{{[0-9]+}} : f64, time_w = 0.{{[0-9]+}} : f64} forward {
// CHECK-COUNT-3: linalg.matmul
// CHECK: pipe.stage 1 on rank 1 inputs(%{{.*}}) params(%{{.*}} : tensor<8x8xf32>) -> tensor<f32> attributes {time_b = 2.000000e+00 : f64, time_f = 2.000000e+00 : f64, time_w = 1.000000e+00 : f64} forward {
// CHECK-COUNT-1: linalg.matmul

// Equal measured layers: two each, as by FLOPs.
// EVEN: pipe.stage 0 on rank 0 data(%{{.*}}) params(%{{.*}}, %{{.*}} : tensor<8x8xf32>, tensor<8x8xf32>)

// The times stay on the stages through autodiff and the B/W split, next to
// the FLOPs, for --zb-schedule to plan with.
// SPLIT: pipe.stage 0 on rank 0 {{.*}} attributes {cost_b = {{.*}}, cost_f = {{.*}}, cost_w = {{.*}}, mem_b = {{.*}}, mem_w = {{.*}}, time_b = 1.500000e+00 : f64, time_f = 1.{{[0-9]+}} : f64, time_w = 0.{{[0-9]+}} : f64}
// SPLIT: pipe.stage 1 on rank 1 {{.*}} time_b = 2.000000e+00 : f64, time_f = 2.000000e+00 : f64, time_w = 1.000000e+00 : f64}

// Layers of (F, B) = (2, 3), (2, 3), (1, 0.2), (5, 4.8) ms. The most
// expensive stage is least cut after the second layer: (4, 6) and (6, 5),
// totals 10 and 11 (after the third: (5, 6.2) and (5, 4.8), 11.2 and 9.8).
// TOTALS: pipe.stage 0 on rank 0 data(%{{.*}}) params(%{{.*}}, %{{.*}} : tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> attributes {time_b = 6.000000e+00 : f64, time_f = 4.000000e+00 : f64, time_w = 0.000000e+00 : f64}
// GPipe on two ranks (all forwards, then all backwards) takes
// M max(F0, F1) + min(F0, F1) + M max(B0, B1) + min(B0, B1): with M = 4,
// 4*6 + 4 + 4*6 + 5 = 57 cut after the second layer, 4*5 + 5 + 4*6.2 + 4.8
// = 54.6 after the third (80.2 after the first; after the fourth stage 1
// holds only the loss, and stage 0 about 10 and 11: more than 84). So for
// GPipe the cut moves to after the third layer.
// GPIPE: pipe.stage 0 on rank 0 data(%{{.*}}) params(%{{.*}}, %{{.*}}, %{{.*}} : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> attributes {time_b = 6.2{{0*}}{{[0-9]*}}e+00 : f64, time_f = 5.000000e+00 : f64, time_w = 0.000000e+00 : f64}
// GPIPE: pipe.stage 1 on rank 1 {{.*}} attributes {time_b = 4.8{{[0-9]*}}e+00 : f64, time_f = 5.000000e+00 : f64, time_w = 0.000000e+00 : f64}
// UNKNOWN: error: --zb-partition-stages: unknown schedule 'nope'; known: gpipe,

// BAD: error: profile '{{.*}}bad.json': entry 0 of "stages" (stage 0) needs numbers "f" and "b"
// MISSING: error: profile '{{.*}}missing.json': cannot read it
// FINE: error: cannot cut 5 ops into 8 stages
// FINE: error: cannot redo the 8-stage partition that profile '{{.*}}too-fine.json' measured

//--- slow-last.json
{"unit": "ms", "stages": [{"stage": 0, "f": 0.4, "b": 0.5, "w": 0.1},
                          {"stage": 1, "f": 0.4, "b": 0.5, "w": 0.1},
                          {"stage": 2, "f": 0.4, "b": 0.5, "w": 0.1},
                          {"stage": 3, "f": 2.0, "b": 2.0, "w": 1.0}]}

//--- mixed.json
{"unit": "ms", "stages": [{"stage": 0, "f": 2, "b": 3}, {"stage": 1, "f": 2, "b": 3},
                          {"stage": 2, "f": 1, "b": 0.2}, {"stage": 3, "f": 5, "b": 4.8}]}

//--- even.json
{"unit": "ms", "stages": [{"stage": 0, "f": 1, "b": 1}, {"stage": 1, "f": 1, "b": 1},
                          {"stage": 2, "f": 1, "b": 1}, {"stage": 3, "f": 1, "b": 1}]}

//--- bad.json
{"stages": [{"stage": 0, "f": 1}]}

//--- too-fine.json
{"stages": [{"stage": 0, "f": 1, "b": 1}, {"stage": 1, "f": 1, "b": 1},
            {"stage": 2, "f": 1, "b": 1}, {"stage": 3, "f": 1, "b": 1},
            {"stage": 4, "f": 1, "b": 1}, {"stage": 5, "f": 1, "b": 1},
            {"stage": 6, "f": 1, "b": 1}, {"stage": 7, "f": 1, "b": 1}]}

//--- model.mlir
#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
func.func @four(%x: tensor<4x8xf32>,
                %w0: tensor<8x8xf32> {zb.param = "w0"},
                %w1: tensor<8x8xf32> {zb.param = "w1"},
                %w2: tensor<8x8xf32> {zb.param = "w2"},
                %w3: tensor<8x8xf32> {zb.param = "w3"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m0 = linalg.matmul ins(%x, %w0 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m1 = linalg.matmul ins(%m0, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m2 = linalg.matmul ins(%m1, %w2 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m3 = linalg.matmul ins(%m2, %w3 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%m3 : tensor<4x8xf32>) outs(%z0 : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
