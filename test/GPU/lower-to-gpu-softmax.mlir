// REQUIRES: cuda-toolkit
// linalg.softmax: decomposed into a fill and a max reduction, exp, a fill
// and a sum reduction, and the division: one kernel, a block per row, the
// steps separated by barriers.
// RUN: zb-opt %s --zb-lower-to-gpu="format=isa" | FileCheck %s

func.func @softmax(%x: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  %s = linalg.softmax dimension(1) ins(%x : tensor<32x64xf32>)
                                   outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  return %s : tensor<32x64xf32>
}

// CHECK-LABEL: llvm.func @softmax(
// CHECK-DAG: %[[ROWS:.*]] = llvm.mlir.constant(32 : index) : i64
// CHECK-DAG: %[[THREADS:.*]] = llvm.mlir.constant(64 : index) : i64
// CHECK: gpu.launch_func {{.*}} blocks in (%[[ROWS]], %{{.*}}, %{{.*}}) threads in (%[[THREADS]],
// CHECK-NOT: gpu.launch_func
// The row maximum (a block-wide tree of shuffles), exp(x - max), the row
// sum (another tree) and the division, in that order in one kernel.
// CHECK: gpu.binary @softmax_kernel [
// CHECK-SAME: max.f32
// CHECK-SAME: shfl.sync.bfly.b32
// CHECK-SAME: bar.sync
// CHECK-SAME: sub.rn.f32
// CHECK-SAME: {{ex2.approx|__nv_expf}}
// CHECK-SAME: bar.sync
// CHECK-SAME: add.rn.f32
// CHECK-SAME: shfl.sync.bfly.b32
// CHECK-SAME: bar.sync
// CHECK-SAME: div.rn.f32
