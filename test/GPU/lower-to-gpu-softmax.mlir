// REQUIRES: cuda-toolkit
// linalg.softmax: decomposed into a max reduction, exp and a sum reduction
// and the division, each a kernel.
// RUN: zb-opt %s --zb-lower-to-gpu="format=isa" | FileCheck %s

func.func @softmax(%x: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  %s = linalg.softmax dimension(1) ins(%x : tensor<32x64xf32>)
                                   outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  return %s : tensor<32x64xf32>
}

// CHECK-LABEL: llvm.func @softmax(
// CHECK-COUNT-6: gpu.launch_func
// The row maxima (after a fill with -inf), exp(x - max), the row sums (after
// a fill with 0) and the division.
// CHECK: gpu.binary @softmax_kernel_0 [
// CHECK-SAME: max.f32
// CHECK: gpu.binary @softmax_kernel_1 [
// CHECK-SAME: sub.rn.f32
// CHECK-SAME: {{ex2.approx|__nv_expf}}
// CHECK: gpu.binary @softmax_kernel_3 [
// CHECK-SAME: add.rn.f32
// CHECK: gpu.binary @softmax_kernel_4 [
// CHECK-SAME: div.rn.f32
