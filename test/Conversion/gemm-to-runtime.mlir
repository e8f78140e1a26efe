// RUN: zb-opt %s --zb-lower-gemm-to-runtime --cse --split-input-file | FileCheck %s

// A plain matmul: no transposes, batch 1, M=8 N=32 K=16, alpha = beta = 1.
// CHECK: func.func private @zbrt_sgemm_batched(i32, i32, i64, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64)
// CHECK-LABEL: func.func @matmul
// CHECK-DAG: %[[F:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[B1:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[M:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 32 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: call @zbrt_sgemm_batched(%[[F]], %[[F]], %[[B1]], %[[M]], %[[N]], %[[K]], %[[ONE]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]],
// CHECK-NOT: linalg.matmul
func.func @matmul(%a: memref<8x16xf32>, %b: memref<16x32xf32>, %c: memref<8x32xf32>) {
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>) outs(%c : memref<8x32xf32>)
  return
}

// -----

// C zeroed right before the product: the gemm overwrites it (beta = 0) and
// the fill goes. A fill with anything between it and the product, or of
// another value, stays, and the gemm accumulates (beta = 1).
// CHECK-LABEL: func.func @zeroed
// CHECK-SAME: (%{{[^:]*}}: memref<8x16xf32>, %{{[^:]*}}: memref<16x32xf32>, %[[C:[^:]*]]: memref<8x32xf32>, %[[D:[^:]*]]: memref<8x32xf32>, %[[E:[^:]*]]: memref<8x32xf32>)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NOT: linalg.fill ins(%{{.*}}) outs(%[[C]]
// CHECK: call @zbrt_sgemm_batched({{.*}}, %[[ONE]], {{.*}}, %[[ZERO]], {{.*}})
// CHECK: linalg.fill ins(%[[ZERO]] : f32) outs(%[[D]] : memref<8x32xf32>)
// CHECK: memref.copy
// CHECK: call @zbrt_sgemm_batched({{.*}}, %[[ONE]], {{.*}}, %[[ONE]], {{.*}})
// CHECK: linalg.fill ins(%[[TWO]] : f32) outs(%[[E]] : memref<8x32xf32>)
// CHECK: call @zbrt_sgemm_batched({{.*}}, %[[ONE]], {{.*}}, %[[ONE]], {{.*}})
func.func @zeroed(%a: memref<8x16xf32>, %b: memref<16x32xf32>, %c: memref<8x32xf32>, %d: memref<8x32xf32>, %e: memref<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x32xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>) outs(%c : memref<8x32xf32>)
  linalg.fill ins(%zero : f32) outs(%d : memref<8x32xf32>)
  memref.copy %d, %c : memref<8x32xf32> to memref<8x32xf32>
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>) outs(%d : memref<8x32xf32>)
  linalg.fill ins(%two : f32) outs(%e : memref<8x32xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>) outs(%e : memref<8x32xf32>)
  return
}

// -----

// Pointers come from the aligned pointer plus the offset; leading dims from
// the strides.
// CHECK-LABEL: func.func @pointers
// CHECK: %{{.*}}, %[[OFF:.*]], %{{.*}}:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %[[A:.*]] :
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[A]]
// CHECK: %[[BASE64:.*]] = arith.index_cast %[[BASE]] : index to i64
// CHECK: %[[PTR:.*]] = llvm.inttoptr %[[BASE64]] : i64 to !llvm.ptr
// CHECK: %[[OFF64:.*]] = arith.index_cast %[[OFF]] : index to i64
// CHECK: llvm.getelementptr %[[PTR]][%[[OFF64]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: arith.index_cast %[[STRIDES]]#0 : index to i64
func.func @pointers(%a: memref<8x16xf32, strided<[20, 1], offset: 4>>, %b: memref<16x32xf32>, %c: memref<8x32xf32>) {
  linalg.matmul ins(%a, %b : memref<8x16xf32, strided<[20, 1], offset: 4>>, memref<16x32xf32>) outs(%c : memref<8x32xf32>)
  return
}

// -----

// A transposed B (the backward's dX = dY * W^T) as a generic contraction.
#mA = affine_map<(m, n, k) -> (m, k)>
#mBt = affine_map<(m, n, k) -> (n, k)>
#mC = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @transposed_b
// CHECK-DAG: %[[F:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[T:.*]] = arith.constant 1 : i32
// CHECK: call @zbrt_sgemm_batched(%[[F]], %[[T]],
// CHECK-NOT: linalg.generic
func.func @transposed_b(%a: memref<8x16xf32>, %b: memref<32x16xf32>, %c: memref<8x32xf32>) {
  linalg.generic {indexing_maps = [#mA, #mBt, #mC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x16xf32>, memref<32x16xf32>) outs(%c : memref<8x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A transposed A (the backward's dW = X^T * dY): dims (k, n, m) reduce over m.
#mAt = affine_map<(k, n, m) -> (m, k)>
#mB = affine_map<(k, n, m) -> (m, n)>
#mCw = affine_map<(k, n, m) -> (k, n)>
// CHECK-LABEL: func.func @transposed_a
// CHECK-DAG: %[[F:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[T:.*]] = arith.constant 1 : i32
// CHECK: call @zbrt_sgemm_batched(%[[T]], %[[F]],
func.func @transposed_a(%x: memref<8x16xf32>, %dy: memref<8x32xf32>, %dw: memref<16x32xf32>) {
  linalg.generic {indexing_maps = [#mAt, #mB, #mCw], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<8x16xf32>, memref<8x32xf32>) outs(%dw : memref<16x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// C stored transposed: computed as C^T = B^T A^T with the operands swapped.
#nA = affine_map<(m, n, k) -> (m, k)>
#nB = affine_map<(m, n, k) -> (k, n)>
#nCt = affine_map<(m, n, k) -> (n, m)>
// CHECK-LABEL: func.func @transposed_c
// CHECK-DAG: %[[T:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[M:.*]] = arith.constant 32 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 8 : i64
// CHECK: call @zbrt_sgemm_batched(%[[T]], %[[T]], %{{.*}}, %[[M]], %[[N]],
func.func @transposed_c(%a: memref<8x16xf32>, %b: memref<16x32xf32>, %c: memref<32x8xf32>) {
  linalg.generic {indexing_maps = [#nA, #nB, #nCt], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>) outs(%c : memref<32x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// batch_matmul: batch 4 with batch strides read at run time.
// CHECK-LABEL: func.func @batch
// CHECK-DAG: %[[B4:.*]] = arith.constant 4 : i64
// CHECK: call @zbrt_sgemm_batched(%{{.*}}, %{{.*}}, %[[B4]],
func.func @batch(%a: memref<4x8x16xf32>, %b: memref<4x16x32xf32>, %c: memref<4x8x32xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<4x8x16xf32>, memref<4x16x32xf32>) outs(%c : memref<4x8x32xf32>)
  return
}

// -----

// f64 products go to the double-precision gemm, alpha and beta in f64
// (beta = 0 after a zero fill as in f32).
// CHECK: func.func private @zbrt_dgemm_batched(i32, i32, i64, i64, i64, i64, f64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f64, !llvm.ptr, i64, i64)
// CHECK-LABEL: func.func @f64
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NOT: linalg.fill
// CHECK: call @zbrt_dgemm_batched({{.*}}, %[[ONE]], {{.*}}, %[[ZERO]], {{.*}})
// CHECK: call @zbrt_dgemm_batched({{.*}}, %[[ONE]], {{.*}}, %[[ONE]], {{.*}})
// CHECK-NOT: zbrt_sgemm_batched
// CHECK-NOT: linalg.matmul
func.func @f64(%a: memref<8x16xf64>, %b: memref<16x32xf64>, %c: memref<8x32xf64>, %d: memref<8x32xf64>) {
  %zero = arith.constant 0.0 : f64
  linalg.fill ins(%zero : f64) outs(%c : memref<8x32xf64>)
  linalg.matmul ins(%a, %b : memref<8x16xf64>, memref<16x32xf64>) outs(%c : memref<8x32xf64>)
  linalg.matmul ins(%a, %b : memref<8x16xf64>, memref<16x32xf64>) outs(%d : memref<8x32xf64>)
  return
}

// -----

// Not gemms: mixed element types, a non-unit inner stride, and tensors stay
// as they are.
// CHECK-LABEL: func.func @not_gemm
// CHECK-NOT: gemm_batched
// CHECK: linalg.matmul {{.*}}f64
// CHECK: linalg.matmul {{.*}}strided<[1, 8]>
// CHECK: linalg.matmul {{.*}}tensor
func.func @not_gemm(%a: memref<8x16xf32>, %b: memref<16x32xf32>, %c: memref<8x32xf64>,
                    %d: memref<8x16xf32, strided<[1, 8]>>, %e: memref<16x32xf32>, %f: memref<8x32xf32>,
                    %g: tensor<8x16xf32>, %h: tensor<16x32xf32>, %i: tensor<8x32xf32>) -> tensor<8x32xf32> {
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>) outs(%c : memref<8x32xf64>)
  linalg.matmul ins(%d, %e : memref<8x16xf32, strided<[1, 8]>>, memref<16x32xf32>) outs(%f : memref<8x32xf32>)
  %r = linalg.matmul ins(%g, %h : tensor<8x16xf32>, tensor<16x32xf32>) outs(%i : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// Not a gemm either: a contraction whose body negates the product (linalg's
// contraction interface skips such unary ops; a gemm call would drop it).
#mA = affine_map<(m, n, k) -> (m, k)>
#mB = affine_map<(m, n, k) -> (k, n)>
#mC = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @negated_product
// CHECK-NOT: zbrt_sgemm_batched
// CHECK: arith.negf
func.func @negated_product(%a: memref<8x16xf32>, %b: memref<16x32xf32>, %c: memref<8x32xf32>) {
  linalg.generic {indexing_maps = [#mA, #mB, #mC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>) outs(%c : memref<8x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %n = arith.negf %p : f32
    %s = arith.addf %acc, %n : f32
    linalg.yield %s : f32
  }
  return
}
