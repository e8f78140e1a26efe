// RUN: zb-opt %s --zb-narrow-stash -split-input-file -verify-diagnostics | FileCheck %s
// RUN: zb-opt %s --zb-narrow-stash -split-input-file -verify-diagnostics | zb-opt -split-input-file | FileCheck %s

// A split stage: the forward stashes its input %a (narrowed) and its
// parameter %b (kept: held once, not per microbatch). B reads the narrowed
// input only through W's stash, so it hands the bf16 argument on as it
// came, and narrows the output gradient %dy it received; W widens both.
// mem_b and mem_w halve (16 -> 8, 32 -> 16 bytes).
// CHECK-LABEL: func.func @split
// CHECK: pipe.stage 1 on rank 1
// CHECK-SAME: mem_b = 8 : i64, mem_w = 16 : i64
// CHECK: ^bb0(%[[A:[^:]*]]: tensor<4xf32>, %[[P:[^:]*]]: tensor<4xf32>):
// CHECK: %[[R:.*]] = arith.mulf %[[A]], %[[P]]
// CHECK: %[[NA:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<4xf32>) outs(%{{.*}} : tensor<4xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: pipe.yield %[[R]] : tensor<4xf32> stash(%[[NA]], %[[P]] : tensor<4xbf16>, tensor<4xf32>)
// CHECK: } backward_input {
// CHECK-NEXT: ^bb0(%[[BA:[^:]*]]: tensor<4xbf16>, %[[BP:[^:]*]]: tensor<4xf32>, %[[DY:[^:]*]]: tensor<4xf32>):
// CHECK-NOT: arith.extf
// CHECK: %[[DA:.*]] = arith.mulf %[[DY]], %[[BP]]
// CHECK: %[[NDY:.*]] = linalg.generic {{.*}} ins(%[[DY]] : tensor<4xf32>) outs(%{{.*}} : tensor<4xbf16>)
// CHECK: pipe.yield %[[DA]] : tensor<4xf32> stash(%[[NDY]], %[[BA]] : tensor<4xbf16>, tensor<4xbf16>)
// CHECK: } backward_weight {
// CHECK-NEXT: ^bb0(%[[WDY:[^:]*]]: tensor<4xbf16>, %[[WA:[^:]*]]: tensor<4xbf16>):
// CHECK: %[[EDY:.*]] = linalg.generic {{.*}} ins(%[[WDY]] : tensor<4xbf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[EA:.*]] = linalg.generic {{.*}} ins(%[[WA]] : tensor<4xbf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[T:.*]] = arith.mulf %[[EDY]], %[[EA]]
// CHECK: pipe.yield
func.func @split(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = pipe.stage 1 on rank 1 inputs(%x : tensor<4xf32>) params(%w : tensor<4xf32>) -> tensor<4xf32> attributes {mem_b = 16 : i64, mem_w = 32 : i64}
    forward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %r = arith.mulf %a, %b : tensor<4xf32>
      pipe.yield %r : tensor<4xf32> stash(%a, %b : tensor<4xf32>, tensor<4xf32>)
    } backward_input {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %dy: tensor<4xf32>):
      %da = arith.mulf %dy, %b : tensor<4xf32>
      pipe.yield %da : tensor<4xf32> stash(%dy, %a : tensor<4xf32>, tensor<4xf32>)
    } backward_weight {
    ^bb0(%dy: tensor<4xf32>, %a: tensor<4xf32>):
      %t = arith.mulf %dy, %a : tensor<4xf32>
      pipe.yield %t : tensor<4xf32>
    }
  return %y : tensor<4xf32>
}

// -----

// An unsplit backward reads the narrowed forward stash through one
// widening at its start; the microbatch's data (integer token ids) and a
// value the forward computes in f64 stay as they are (mem_b: 8 + 32 + 32).
// CHECK-LABEL: func.func @unsplit
// CHECK: mem_b = 72 : i64
// CHECK: pipe.yield %{{.*}} : tensor<4xf32> stash(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4xbf16>, tensor<4xi64>, tensor<4xf64>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[S:[^:]*]]: tensor<4xbf16>, %[[ID:[^:]*]]: tensor<4xi64>, %[[D:[^:]*]]: tensor<4xf64>, %[[DY:[^:]*]]: tensor<4xf32>):
// CHECK: %[[E:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<4xbf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: arith.mulf %[[DY]], %[[E]]
func.func @unsplit(%x: tensor<4xf32>, %ids: tensor<4xi64>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) data(%ids : tensor<4xi64>) params(%w : tensor<4xf32>) -> tensor<4xf32> attributes {mem_b = 80 : i64}
    forward {
    ^bb0(%a: tensor<4xf32>, %i: tensor<4xi64>, %b: tensor<4xf32>):
      %r = arith.mulf %a, %b : tensor<4xf32>
      %d = arith.extf %r : tensor<4xf32> to tensor<4xf64>
      pipe.yield %r : tensor<4xf32> stash(%r, %i, %d : tensor<4xf32>, tensor<4xi64>, tensor<4xf64>)
    } backward {
    ^bb0(%s: tensor<4xf32>, %i: tensor<4xi64>, %d: tensor<4xf64>, %dy: tensor<4xf32>):
      %da = arith.mulf %dy, %s : tensor<4xf32>
      %db = arith.mulf %dy, %s : tensor<4xf32>
      pipe.yield %da, %db : tensor<4xf32>, tensor<4xf32>
    }
  return %y : tensor<4xf32>
}
