// RUN: zb-opt %s | FileCheck %s
// RUN: zb-opt %s | zb-opt | FileCheck %s
// RUN: zb-opt %s --mlir-print-op-generic | zb-opt | FileCheck %s

// CHECK-LABEL: func.func @cut_markers
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[DX:.*]]: tensor<4x8xf32>)
func.func @cut_markers(%x: tensor<4x8xf32>, %dx: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK: %{{.*}} = pipe.cut %[[X]] : tensor<4x8xf32>
  %h = pipe.cut %x : tensor<4x8xf32>
  // CHECK: %{{.*}} = pipe.cut %[[DX]] adjoint : tensor<4x8xf32>
  %g = pipe.cut %dx adjoint : tensor<4x8xf32>
  return %h, %g : tensor<4x8xf32>, tensor<4x8xf32>
}

// A forward-only stage with inputs, data and params.
// CHECK-LABEL: func.func @forward_only
func.func @forward_only(%x: tensor<4x8xf32>, %t: tensor<4xi64>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  // CHECK: pipe.stage 0 on rank 0 inputs(%{{.*}} : tensor<4x8xf32>) data(%{{.*}} : tensor<4xi64>) params(%{{.*}} : tensor<8x8xf32>) -> tensor<4x8xf32> forward {
  // CHECK: ^bb0(%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<4xi64>, %{{.*}}: tensor<8x8xf32>):
  // CHECK: pipe.yield %{{.*}} : tensor<4x8xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: return
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4x8xf32>) data(%t : tensor<4xi64>) params(%w : tensor<8x8xf32>) -> tensor<4x8xf32>
    forward {
    ^bb0(%a: tensor<4x8xf32>, %b: tensor<4xi64>, %c: tensor<8x8xf32>):
      pipe.yield %a : tensor<4x8xf32>
    }
  return %y : tensor<4x8xf32>
}

// A stage with a fused backward: the forward stashes its input and weight.
// CHECK-LABEL: func.func @fused_backward
func.func @fused_backward(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: pipe.stage 1 on rank 1 inputs(%{{.*}} : tensor<4xf32>) params(%{{.*}} : tensor<4xf32>) -> tensor<4xf32> attributes {note = "x"} forward {
  // CHECK: pipe.yield %{{.*}} : tensor<4xf32> stash(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>)
  // CHECK: } backward {
  // CHECK: ^bb0(%{{.*}}: tensor<4xf32>, %{{.*}}: tensor<4xf32>, %{{.*}}: tensor<4xf32>):
  // CHECK: pipe.yield %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>
  %y = pipe.stage 1 on rank 1 inputs(%x : tensor<4xf32>) params(%w : tensor<4xf32>) -> tensor<4xf32> attributes {note = "x"}
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
  return %y : tensor<4xf32>
}

// The same stage after the B/W split: B forwards the input to W as its stash.
// CHECK-LABEL: func.func @split_backward
func.func @split_backward(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: } backward_input {
  // CHECK: pipe.yield %{{.*}} : tensor<4xf32> stash(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>)
  // CHECK: } backward_weight {
  // CHECK: ^bb0(%{{.*}}: tensor<4xf32>, %{{.*}}: tensor<4xf32>):
  %y = pipe.stage 3 on rank 0 inputs(%x : tensor<4xf32>) params(%w : tensor<4xf32>) -> tensor<4xf32>
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
  return %y : tensor<4xf32>
}

// The last stage: no output activation but the scalar loss; the first stage
// of a model has no inputs, only data and params.
// CHECK-LABEL: func.func @data_only_stage
func.func @data_only_stage(%t: tensor<4xf32>) -> tensor<f32> {
  // CHECK: pipe.stage 0 on rank 0 data(%{{.*}} : tensor<4xf32>) -> tensor<f32> forward {
  %l = pipe.stage 0 on rank 0 data(%t : tensor<4xf32>) -> tensor<f32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      %c = arith.constant dense<1.0> : tensor<f32>
      pipe.yield %c : tensor<f32>
    }
  return %l : tensor<f32>
}

// A running statistic of the forward (a batch norm's running mean).
// CHECK-LABEL: func.func @running_stat
func.func @running_stat(%m: tensor<16xf32>, %v: tensor<2x3xf64>) {
  // CHECK: pipe.running_stat %{{.*}} {buffer = "bn.running_mean", momentum = 1.000000e-01 : f64} : tensor<16xf32>
  pipe.running_stat %m {buffer = "bn.running_mean", momentum = 0.1 : f64} : tensor<16xf32>
  // CHECK: pipe.running_stat %{{.*}} {buffer = "bn.running_var", init = 1.000000e+00 : f64, momentum = 5.000000e-01 : f64} : tensor<2x3xf64>
  pipe.running_stat %v {buffer = "bn.running_var", init = 1.0 : f64, momentum = 0.5 : f64} : tensor<2x3xf64>
  return
}
