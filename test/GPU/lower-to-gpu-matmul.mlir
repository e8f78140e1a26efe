// Matmul-family ops become cuBLAS calls through the runtime: the buffers are
// device buffers, the call's operands device pointers.
// RUN: zb-opt %s --zb-lower-to-gpu="format=isa" | FileCheck %s
// RUN: zb-opt %s --zb-lower-to-gpu="format=isa dtype=bf16" | FileCheck %s --check-prefix=BF16
// Emulated on the host, each gemm calls its host counterpart.
// RUN: zb-opt %s --zb-lower-to-gpu="emulate=true" | FileCheck %s --check-prefix=EMULATED
// RUN: zb-opt %s --zb-lower-to-gpu="emulate=true dtype=bf16" | FileCheck %s --check-prefix=EMULATED-BF16

func.func @mm(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x32xf32>)
                     outs(%c : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// CHECK-LABEL: llvm.func @mm(
// The matmul overwrites its zeroed output (beta = 0): no fill kernel.
// CHECK-DAG: %[[ZERO:.*]] = llvm.mlir.constant(0.000000e+00 : f32) : f32
// CHECK-DAG: %[[ONE:.*]] = llvm.mlir.constant(1.000000e+00 : f32) : f32
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @zbrt_gpu_sgemm_batched({{.*}}, %[[ONE]], {{.*}}, %[[ZERO]], {{.*}}) : (i32, i32, i64, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64) -> ()
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: gpu.binary

// BF16: llvm.call @zbrt_gpu_sgemm_batched_bf16(

// EMULATED: llvm.call @zbrt_sgemm_batched(
// EMULATED-NOT: zbrt_gpu_
// EMULATED-BF16: llvm.call @zbrt_sgemm_batched_bf16(
// EMULATED-BF16-NOT: zbrt_gpu_
