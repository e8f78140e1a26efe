// RUN: zb-opt %s --zb-decompose-aggregates -verify-diagnostics

// Softmax's decomposition needs float identities (-inf, 0).
func.func @integer_softmax(%x: tensor<2x4xi32>) -> tensor<2x4xi32> {
  %e = tensor.empty() : tensor<2x4xi32>
  // expected-error @below {{'linalg.softmax' needs a float element type, got 'i32'}}
  %s = linalg.softmax dimension(1) ins(%x : tensor<2x4xi32>) outs(%e : tensor<2x4xi32>) -> tensor<2x4xi32>
  return %s : tensor<2x4xi32>
}
