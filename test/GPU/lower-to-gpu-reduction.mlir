// A row reduction: one thread per row runs the reduction loop.
// RUN: zb-opt %s --zb-lower-to-gpu="format=isa" | FileCheck %s

func.func @rowsum(%x: tensor<64x300xf32>) -> tensor<64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %sum = linalg.reduce ins(%x : tensor<64x300xf32>) outs(%init : tensor<64xf32>)
      dimensions = [1]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return %sum : tensor<64xf32>
}

// CHECK-LABEL: llvm.func @rowsum(
// CHECK-COUNT-2: gpu.launch_func
// The fill.
// CHECK: gpu.binary @rowsum_kernel [
// CHECK-SAME: .target sm_90
// CHECK-SAME: st.global
// The reduction: per thread a loop of loads and adds into its row's sum.
// CHECK: gpu.binary @rowsum_kernel_0 [
// CHECK-SAME: .target sm_90
// CHECK-SAME: $L__BB0_2:
// CHECK-SAME: ld.global
// CHECK-SAME: add.rn.f32
// CHECK-SAME: st.global
// CHECK-SAME: bra{{.*}}L__BB0_2;
