// RUN: zb-opt %s --zb-partition-stages=stages=3 -verify-diagnostics

// Tensors so large that their ops' FLOPs overflow a double: every split
// costs the same infinity, and the partition says so.
!t = tensor<4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904x4611686018427387904xf32>
// expected-error @below {{the ops' costs sum past a double's range; the partition cannot balance them}}
func.func @m(%x: !t, %w: !t {zb.param = "w"}) -> tensor<f32> {
  %a = linalg.add ins(%x, %w : !t, !t) outs(%x : !t) -> !t
  %b = linalg.add ins(%a, %w : !t, !t) outs(%x : !t) -> !t
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.reduce { arith.addf } ins(%b : !t) outs(%z : tensor<f32>) dimensions = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
  return %l : tensor<f32>
}
