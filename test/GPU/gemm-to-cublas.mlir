// RUN: zb-opt %s --zb-lower-gemm-to-cublas | FileCheck %s
// RUN: zb-opt %s --zb-lower-gemm-to-cublas="dtype=bf16" | FileCheck %s --check-prefix=BF16
// RUN: not zb-opt %s --zb-lower-gemm-to-cublas="dtype=f16" 2>&1 | FileCheck %s --check-prefix=DTYPE

// The matcher of --zb-lower-gemm-to-runtime, another callee.
// CHECK: func.func private @zbrt_gpu_sgemm_batched(i32, i32, i64, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64)
// CHECK-LABEL: func.func @mm(
// CHECK: call @zbrt_gpu_sgemm_batched(
// CHECK-NOT: linalg.matmul
// BF16: call @zbrt_gpu_sgemm_batched_bf16(
// DTYPE: error: zb-lower-gemm-to-cublas: unknown dtype 'f16'; known: f32, bf16
func.func @mm(%a: memref<8x16xf32>, %b: memref<16x32xf32>, %c: memref<8x32xf32>) {
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>)
                outs(%c : memref<8x32xf32>)
  return
}

// An f64 product stays a loop on the GPU (no double-precision callee).
// CHECK-LABEL: func.func @mm_f64(
// CHECK-NOT: gemm_batched
// CHECK: linalg.matmul
func.func @mm_f64(%a: memref<8x16xf64>, %b: memref<16x32xf64>, %c: memref<8x32xf64>) {
  linalg.matmul ins(%a, %b : memref<8x16xf64>, memref<16x32xf64>)
                outs(%c : memref<8x32xf64>)
  return
}
