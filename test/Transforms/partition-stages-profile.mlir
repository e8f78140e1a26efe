// RUN: split-file %s %t
// RUN: zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/slow-last.json" | FileCheck %s
// RUN: zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/even.json" | FileCheck %s --check-prefix=EVEN
// RUN: zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/slow-last.json" --zb-autodiff --zb-split-backward | FileCheck %s --check-prefix=SPLIT
// RUN: not zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/bad.json" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/missing.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not zb-opt %t/model.mlir --zb-partition-stages="stages=2 profile=%t/too-fine.json" 2>&1 | FileCheck %s --check-prefix=FINE

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

// BAD: error: profile '{{.*}}bad.json': entry 0 of "stages" (stage 0) needs numbers "f" and "b"
// MISSING: error: profile '{{.*}}missing.json': cannot read it
// FINE: error: cannot cut 5 ops into 8 stages
// FINE: error: cannot redo the 8-stage partition that profile '{{.*}}too-fine.json' measured

//--- slow-last.json
{"unit": "ms", "stages": [{"stage": 0, "f": 0.4, "b": 0.5, "w": 0.1},
                          {"stage": 1, "f": 0.4, "b": 0.5, "w": 0.1},
                          {"stage": 2, "f": 0.4, "b": 0.5, "w": 0.1},
                          {"stage": 3, "f": 2.0, "b": 2.0, "w": 1.0}]}

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
