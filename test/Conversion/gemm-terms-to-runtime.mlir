// RUN: zb-opt %s --zb-lower-gemm-to-runtime --split-input-file | FileCheck %s

// A product marked by --zb-mark-triangular-products calls the terms gemm,
// the term set first, by the roles its two loops play in the call. Here
// d0 = m, d1 = n, d2 = k.
// CHECK: func.func private @zbrt_sgemm_batched_terms(i32, i32, i32, i64, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64)
// CHECK-LABEL: func.func @roles
// CHECK: %[[T1:.*]] = arith.constant 1 : i32
// CHECK: call @zbrt_sgemm_batched_terms(%[[T1]],
// CHECK: %[[T2:.*]] = arith.constant 2 : i32
// CHECK: call @zbrt_sgemm_batched_terms(%[[T2]],
// CHECK: %[[T3:.*]] = arith.constant 3 : i32
// CHECK: call @zbrt_sgemm_batched_terms(%[[T3]],
// CHECK: %[[T4:.*]] = arith.constant 4 : i32
// CHECK: call @zbrt_sgemm_batched_terms(%[[T4]],
// CHECK: %[[T5:.*]] = arith.constant 5 : i32
// CHECK: call @zbrt_sgemm_batched_terms(%[[T5]],
// CHECK: %[[T6:.*]] = arith.constant 6 : i32
// CHECK: call @zbrt_sgemm_batched_terms(%[[T6]],
// CHECK-NOT: linalg.matmul
func.func @roles(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %c: memref<8x8xf32>) {
  // k > m vanishes: ZBRT_TERMS_K_UPTO_M.
  linalg.matmul {zb.skip_terms = array<i64: 0, 2>} ins(%a, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  // m > k: ZBRT_TERMS_K_FROM_M.
  linalg.matmul {zb.skip_terms = array<i64: 2, 0>} ins(%a, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  // n > m: ZBRT_TERMS_N_UPTO_M.
  linalg.matmul {zb.skip_terms = array<i64: 0, 1>} ins(%a, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  // k > n: ZBRT_TERMS_K_UPTO_N.
  linalg.matmul {zb.skip_terms = array<i64: 1, 2>} ins(%a, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  // n > k: ZBRT_TERMS_K_FROM_N.
  linalg.matmul {zb.skip_terms = array<i64: 2, 1>} ins(%a, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  // m > n: ZBRT_TERMS_M_UPTO_N.
  linalg.matmul {zb.skip_terms = array<i64: 1, 0>} ins(%a, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  return
}

// -----

// C stored transposed: the call computes C^T = B^T A^T, so the loop that is
// m in the op is n in the call. dV = P^T dO of attention: P (indexed
// (b, k, m)) is zero where m > k, and C is (b, n, m). The call's term set
// is K_FROM_N (5), not K_FROM_M.
#a = affine_map<(b, k, m, n) -> (b, k, m)>
#b = affine_map<(b, k, m, n) -> (b, k, n)>
#c = affine_map<(b, k, m, n) -> (b, n, m)>
// CHECK-LABEL: func.func @transposed_result
// CHECK-DAG: %[[T5:.*]] = arith.constant 5 : i32
// CHECK-DAG: %[[TRUE:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[FALSE:.*]] = arith.constant 0 : i32
// CHECK: call @zbrt_sgemm_batched_terms(%[[T5]], %[[TRUE]], %[[FALSE]],
func.func @transposed_result(%p: memref<2x16x16xf32>, %do: memref<2x16x8xf32>, %dv: memref<2x8x16xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel", "parallel"]} ins(%p, %do : memref<2x16x16xf32>, memref<2x16x8xf32>) outs(%dv : memref<2x8x16xf32>) attrs = {zb.skip_terms = array<i64: 1, 2>} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %0 = arith.mulf %x, %y : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// Loops that are not two of the product's m, n, k (here the batch), and
// f64 products (no terms gemm for them), take every term.
// CHECK-LABEL: func.func @every_term
// CHECK: call @zbrt_sgemm_batched(
// CHECK: call @zbrt_dgemm_batched(
// CHECK-NOT: zbrt_sgemm_batched_terms
func.func @every_term(%a: memref<2x8x8xf32>, %b: memref<2x8x8xf32>, %c: memref<2x8x8xf32>,
                      %x: memref<8x8xf64>, %y: memref<8x8xf64>, %z: memref<8x8xf64>) {
  linalg.batch_matmul {zb.skip_terms = array<i64: 0, 1>} ins(%a, %b : memref<2x8x8xf32>, memref<2x8x8xf32>) outs(%c : memref<2x8x8xf32>)
  linalg.matmul {zb.skip_terms = array<i64: 0, 2>} ins(%x, %y : memref<8x8xf64>, memref<8x8xf64>) outs(%z : memref<8x8xf64>)
  return
}
