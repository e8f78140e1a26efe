// RUN: zb-opt %s --zb-lower-transposes-to-runtime --canonicalize --split-input-file | FileCheck %s

// Attention's K^T: (batch, token, head, feature) to (batch, head, feature,
// token). The loops are the output's dimensions: loop 3 (token) is the
// output's innermost, loop 2 (feature) the input's: per (batch, head), 64
// token rows of 64 features, the rows 256 floats apart, transposed into
// rows 64 apart; the batch strides are the input's dimensions 0 and 2 and
// the output's 0 and 1.
// CHECK: func.func private @zbrt_transpose_f32(i64, i64, i64, i64, !llvm.ptr, i64, i64, i64, !llvm.ptr, i64, i64, i64)
// CHECK-LABEL: func.func @key_transposed
// CHECK-SAME: (%[[K:[^:]*]]: memref<4x64x4x64xf32>, %[[KT:[^:]*]]: memref<4x4x64x64xf32>)
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : i64
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : i64
// CHECK-DAG: %[[C4096:.*]] = arith.constant 4096 : i64
// CHECK-DAG: %[[C16384:.*]] = arith.constant 16384 : i64
// CHECK-DAG: %[[PK:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CHECK-DAG: %[[PKT:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CHECK: call @zbrt_transpose_f32(%[[C4]], %[[C4]], %[[C64]], %[[C64]], %[[PK]], %[[C16384]], %[[C64]], %[[C256]], %[[PKT]], %[[C16384]], %[[C4096]], %[[C64]])
// CHECK-NOT: linalg.transpose
func.func @key_transposed(%k: memref<4x64x4x64xf32>, %kt: memref<4x4x64x64xf32>) {
  linalg.transpose ins(%k : memref<4x64x4x64xf32>) outs(%kt : memref<4x4x64x64xf32>) permutation = [0, 2, 3, 1]
  return
}

// -----

// A plain 2-D transpose as a generic: no batch (each batch runs once with
// stride 0), 3 rows of 5 columns into 5 rows of 3.
// CHECK-LABEL: func.func @generic_2d
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : i64
// CHECK-DAG: %[[C5:.*]] = arith.constant 5 : i64
// CHECK: call @zbrt_transpose_f32(%[[C1]], %[[C1]], %[[C3]], %[[C5]], %{{.*}}, %[[C0]], %[[C0]], %[[C5]], %{{.*}}, %[[C0]], %[[C0]], %[[C3]])
// CHECK-NOT: linalg.generic
func.func @generic_2d(%a: memref<3x5xf32>, %b: memref<5x3xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j, i)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<3x5xf32>) outs(%b : memref<5x3xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

// Both maps permuted, every size distinct. Loops (i, j, k, l) of sizes 3,
// 2, 7, 5; the input 2x3x5x7 is (j, i, l, k), strides 105, 35, 7, 1; the
// output 5x2x7x3 is (l, j, k, i), strides 42, 21, 3, 1. Loop i is the
// output's innermost (3 rows, 35 apart in the input), k the input's (7
// columns, rows 3 apart in the output); j and l batch, in loop order
// (2: 105 and 21; 5: 7 and 42).
// CHECK-LABEL: func.func @both_permuted
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : i64
// CHECK-DAG: %[[C5:.*]] = arith.constant 5 : i64
// CHECK-DAG: %[[C7:.*]] = arith.constant 7 : i64
// CHECK-DAG: %[[C21:.*]] = arith.constant 21 : i64
// CHECK-DAG: %[[C35:.*]] = arith.constant 35 : i64
// CHECK-DAG: %[[C42:.*]] = arith.constant 42 : i64
// CHECK-DAG: %[[C105:.*]] = arith.constant 105 : i64
// CHECK: call @zbrt_transpose_f32(%[[C2]], %[[C5]], %[[C3]], %[[C7]], %{{.*}}, %[[C105]], %[[C7]], %[[C35]], %{{.*}}, %[[C21]], %[[C42]], %[[C3]])
func.func @both_permuted(%a: memref<2x3x5x7xf32>, %b: memref<5x2x7x3xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j, k, l) -> (j, i, l, k)>, affine_map<(i, j, k, l) -> (l, j, k, i)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%a : memref<2x3x5x7xf32>) outs(%b : memref<5x2x7x3xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

// A view's offset and strides are read from its descriptor: the pointer
// is the first element's, the row stride the dynamic one.
// CHECK-LABEL: func.func @strided_view
// CHECK: %{{.*}}, %[[OFFSET:.*]], %{{.*}}:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %arg0
// CHECK: %[[BASE:.*]] = llvm.inttoptr
// CHECK: %[[OFF:.*]] = arith.index_cast %[[OFFSET]] : index to i64
// CHECK: %[[FIRST:.*]] = llvm.getelementptr %[[BASE]][%[[OFF]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: %[[LD:.*]] = arith.index_cast %[[STRIDES]]#0 : index to i64
// CHECK: call @zbrt_transpose_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[FIRST]], %{{.*}}, %{{.*}}, %[[LD]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
func.func @strided_view(%a: memref<3x5xf32, strided<[?, 1], offset: ?>>, %b: memref<5x3xf32>) {
  linalg.transpose ins(%a : memref<3x5xf32, strided<[?, 1], offset: ?>>) outs(%b : memref<5x3xf32>) permutation = [1, 0]
  return
}

// -----

// Left to the loops: a copy that keeps the innermost dimension (it copies
// rows), f64, a column stride other than 1, a broadcast, a copy that
// computes, tensors, and rank 5.
// CHECK-NOT: @zbrt_transpose_f32
// CHECK-LABEL: func.func @kept
// CHECK-NEXT: linalg.transpose ins(%arg0 : memref<4x64x4x64xf32>)
// CHECK-NEXT: linalg.transpose ins(%arg2 : memref<3x5xf64>)
// CHECK-NEXT: linalg.transpose ins(%arg4 : memref<3x5xf32, strided<[1, 3]>>)
// CHECK-NEXT: linalg.generic
// CHECK-NEXT: ^bb0
// CHECK-NEXT: linalg.yield
// CHECK-NEXT: }
// CHECK-NEXT: linalg.generic
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.negf
// CHECK-NEXT: linalg.yield
// CHECK-NEXT: }
// CHECK-NEXT: linalg.transpose ins(%arg8 : tensor<3x5xf32>)
// CHECK-NEXT: linalg.transpose ins(%arg10 : memref<2x2x2x2x2xf32>)
// CHECK-NEXT: return
func.func @kept(%a: memref<4x64x4x64xf32>, %b: memref<4x4x64x64xf32>,
                %c: memref<3x5xf64>, %d: memref<5x3xf64>,
                %e: memref<3x5xf32, strided<[1, 3]>>, %f: memref<5x3xf32>,
                %g: memref<5xf32>, %h: memref<3x5xf32>,
                %t: tensor<3x5xf32>, %u: tensor<5x3xf32>,
                %v: memref<2x2x2x2x2xf32>, %w: memref<2x2x2x2x2xf32>) -> tensor<5x3xf32> {
  linalg.transpose ins(%a : memref<4x64x4x64xf32>) outs(%b : memref<4x4x64x64xf32>) permutation = [0, 2, 1, 3]
  linalg.transpose ins(%c : memref<3x5xf64>) outs(%d : memref<5x3xf64>) permutation = [1, 0]
  linalg.transpose ins(%e : memref<3x5xf32, strided<[1, 3]>>) outs(%f : memref<5x3xf32>) permutation = [1, 0]
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%g : memref<5xf32>) outs(%h : memref<3x5xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j, i)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%h : memref<3x5xf32>) outs(%f : memref<5x3xf32>) {
  ^bb0(%x: f32, %y: f32):
    %n = arith.negf %x : f32
    linalg.yield %n : f32
  }
  %r = linalg.transpose ins(%t : tensor<3x5xf32>) outs(%u : tensor<5x3xf32>) permutation = [1, 0]
  linalg.transpose ins(%v : memref<2x2x2x2x2xf32>) outs(%w : memref<2x2x2x2x2xf32>) permutation = [4, 1, 2, 3, 0]
  return %r : tensor<5x3xf32>
}
