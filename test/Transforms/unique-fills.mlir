// RUN: zb-opt %s --zb-unique-fills | FileCheck %s

// Two reductions into one (CSE'd) zero fill: each gets a fill, and an
// empty tensor, of its own; the fill that is also returned stays for that
// use.
// CHECK-LABEL: func.func @shared(
// CHECK: %[[E0:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[Z0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E0]] : tensor<4xf32>)
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[Z1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E1]] : tensor<4xf32>)
// CHECK: %[[A:.*]] = linalg.reduce ins(%{{.*}} : tensor<4x8xf32>) outs(%[[Z1]] : tensor<4xf32>)
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[Z2:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E2]] : tensor<4xf32>)
// CHECK: %[[B:.*]] = linalg.reduce ins(%{{.*}} : tensor<4x8xf32>) outs(%[[Z2]] : tensor<4xf32>)
// CHECK: return %[[A]], %[[B]], %[[Z0]]
func.func @shared(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %a = linalg.reduce ins(%x : tensor<4x8xf32>) outs(%z : tensor<4xf32>)
      dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %b = linalg.reduce ins(%y : tensor<4x8xf32>) outs(%z : tensor<4xf32>)
      dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %a, %b, %z : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// A fill with writers alone: the first keeps it.
// CHECK-LABEL: func.func @writers_only(
// CHECK-COUNT-2: linalg.fill
// CHECK-NOT: linalg.fill
// CHECK: return
func.func @writers_only(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %a = linalg.reduce ins(%x : tensor<4x8xf32>) outs(%z : tensor<4xf32>)
      dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %b = linalg.reduce ins(%x : tensor<4x8xf32>) outs(%z : tensor<4xf32>)
      dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.maximumf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// A fill with one writer further down moves right before it (with its
// empty tensor), where the gemm lowering folds it into the product (beta
// = 0) instead of zeroing the buffer ahead of time.
// CHECK-LABEL: func.func @single_writer(
// CHECK: %[[S:.*]] = linalg.reduce
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<4x4xf32>)
// CHECK-NEXT: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x4xf32>) outs(%[[Z]] : tensor<4x4xf32>)
// CHECK-NOT: linalg.fill
func.func @single_writer(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>)
    -> (tensor<4xf32>, tensor<4x4xf32>) {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.reduce ins(%x : tensor<4x8xf32>) outs(%z1 : tensor<4xf32>)
      dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %p = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x4xf32>)
      outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %s, %p : tensor<4xf32>, tensor<4x4xf32>
}
