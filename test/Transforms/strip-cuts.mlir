// RUN: zb-opt %s --zb-strip-cuts | FileCheck %s

// Forward and adjoint markers both go; their operands take their place.
// CHECK-LABEL: func.func @two_cuts
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NOT: pipe.cut
// CHECK: %[[A:.*]] = arith.addf %[[X]], %[[X]]
// CHECK: %[[B:.*]] = arith.mulf %[[A]], %[[A]]
// CHECK: return %[[B]]
func.func @two_cuts(%x: tensor<4xf32>) -> tensor<4xf32> {
  %h = pipe.cut %x : tensor<4xf32>
  %a = arith.addf %h, %h : tensor<4xf32>
  %g = pipe.cut %a adjoint : tensor<4xf32>
  %b = arith.mulf %g, %g : tensor<4xf32>
  return %b : tensor<4xf32>
}

// Markers nested in other regions are found too.
// CHECK-LABEL: func.func @nested
// CHECK-NOT: pipe.cut
func.func @nested(%x: tensor<4xf32>, %c: i1) -> tensor<4xf32> {
  %r = scf.if %c -> tensor<4xf32> {
    %h = pipe.cut %x : tensor<4xf32>
    scf.yield %h : tensor<4xf32>
  } else {
    scf.yield %x : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
