// RUN: zb-opt %s --zb-lower-gemm-to-runtime --split-input-file | FileCheck %s

// A mixture of experts' forward product: row r of x times the weight of
// its group (expert) g[r]; the loops are (r, n, e, k). C was zeroed just
// before, so the call overwrites it (beta 0) and the fill goes.
#x = affine_map<(r, n, e, k) -> (r, k)>
#w = affine_map<(r, n, e, k) -> (e, k, n)>
#g = affine_map<(r, n, e, k) -> (r)>
#y = affine_map<(r, n, e, k) -> (r, n)>
// CHECK: func.func private @zbrt_sgemm_grouped_rows(i32, i64, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64)
// CHECK-LABEL: func.func @rows
// CHECK-NOT: linalg.fill
// CHECK: llvm.getelementptr {{.*}}, i64
// CHECK-DAG: %[[BETA:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[NOTRANS:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 5 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[GROUPS:.*]] = arith.constant 3 : i64
// CHECK: call @zbrt_sgemm_grouped_rows(%[[NOTRANS]], %[[ROWS]], %[[N]], %[[K]], %[[GROUPS]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[BETA]],
// CHECK-NOT: linalg.generic
func.func @rows(%x: memref<6x4xf32>, %w: memref<3x4x5xf32>, %g: memref<6xi64>, %y: memref<6x5xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<6x5xf32>)
  linalg.generic {indexing_maps = [#x, #w, #g, #y], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%x, %w, %g : memref<6x4xf32>, memref<3x4x5xf32>, memref<6xi64>) outs(%y : memref<6x5xf32>) {
  ^bb0(%a: f32, %b: f32, %gi: i64, %acc: f32):
    %e = linalg.index 2 : index
    %ei = arith.index_cast %e : index to i64
    %hit = arith.cmpi eq, %gi, %ei : i64
    %p = arith.mulf %a, %b : f32
    %s = arith.select %hit, %p, %zero : f32
    %o = arith.addf %acc, %s : f32
    linalg.yield %o : f32
  }
  return
}

// -----

// Its input gradient as the autodiff writes it: dx[r, k] adds
// dy[r, n] * w[e, k, n] under the same condition (the select around one
// factor, a factor of 1.0 left over, the group index cast the other way),
// into a dx that already holds something (beta 1). The weight is read
// (e, k, n) with k the call's n: op(B) is its transpose.
#dy = affine_map<(r, n, e, k) -> (r, n)>
#w = affine_map<(r, n, e, k) -> (e, k, n)>
#g = affine_map<(r, n, e, k) -> (r)>
#dx = affine_map<(r, n, e, k) -> (r, k)>
// CHECK-LABEL: func.func @input_gradient
// CHECK: llvm.getelementptr {{.*}}, i64
// CHECK-DAG: %[[BETA:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[TRANS:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 5 : i64
// CHECK-DAG: %[[GROUPS:.*]] = arith.constant 3 : i64
// CHECK: call @zbrt_sgemm_grouped_rows(%[[TRANS]], %[[ROWS]], %[[N]], %[[K]], %[[GROUPS]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[BETA]],
// CHECK-NOT: linalg.generic
func.func @input_gradient(%dyv: memref<6x5xf32>, %w: memref<3x4x5xf32>, %g: memref<6xi64>, %dxv: memref<6x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#dy, #w, #g, #dx], iterator_types = ["parallel", "reduction", "reduction", "parallel"]} ins(%dyv, %w, %g : memref<6x5xf32>, memref<3x4x5xf32>, memref<6xi64>) outs(%dxv : memref<6x4xf32>) {
  ^bb0(%d: f32, %b: f32, %gi: i64, %acc: f32):
    %e = linalg.index 2 : index
    %gx = arith.index_cast %gi : i64 to index
    %hit = arith.cmpi eq, %e, %gx : index
    %t = arith.mulf %one, %b : f32
    %s = arith.select %hit, %t, %zero : f32
    %c = arith.mulf %s, %d : f32
    %o = arith.addf %c, %acc : f32
    linalg.yield %o : f32
  }
  return
}

// -----

// The weight gradient: group e's matrix sums x[r]^T dy[r] over its rows,
// C (e, i, j); then the same with C stored (e, j, i), which the call
// computes as dy^T x (A and B swapped).
#x = affine_map<(r, n, e, k) -> (r, k)>
#dy = affine_map<(r, n, e, k) -> (r, n)>
#g = affine_map<(r, n, e, k) -> (r)>
#dw = affine_map<(r, n, e, k) -> (e, k, n)>
#dwt = affine_map<(r, n, e, k) -> (e, n, k)>
// CHECK: func.func private @zbrt_sgemm_grouped_reduce(i64, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64)
// CHECK-LABEL: func.func @weight_gradient
// CHECK: %[[X:.*]] = llvm.getelementptr {{.*}}, f32
// CHECK: %[[DY:.*]] = llvm.getelementptr {{.*}}, f32
// CHECK: llvm.getelementptr {{.*}}, i64
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 5 : i64
// CHECK-DAG: %[[GROUPS:.*]] = arith.constant 3 : i64
// CHECK: call @zbrt_sgemm_grouped_reduce(%[[ROWS]], %[[K]], %[[N]], %[[GROUPS]], %[[X]], %{{.*}}, %[[DY]],
// CHECK: %[[DY2:.*]] = llvm.getelementptr {{.*}}, f32
// CHECK: %[[X2:.*]] = llvm.getelementptr {{.*}}, f32
// CHECK: llvm.getelementptr {{.*}}, i64
// CHECK-DAG: %[[ROWS2:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[K2:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[N2:.*]] = arith.constant 5 : i64
// CHECK-DAG: %[[GROUPS2:.*]] = arith.constant 3 : i64
// CHECK: call @zbrt_sgemm_grouped_reduce(%[[ROWS2]], %[[N2]], %[[K2]], %[[GROUPS2]], %[[DY2]], %{{.*}}, %[[X2]],
// CHECK-NOT: linalg.generic
func.func @weight_gradient(%xv: memref<6x4xf32>, %dyv: memref<6x5xf32>, %g: memref<6xi64>, %dwv: memref<3x4x5xf32>, %dwtv: memref<3x5x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#x, #dy, #g, #dw], iterator_types = ["reduction", "parallel", "parallel", "parallel"]} ins(%xv, %dyv, %g : memref<6x4xf32>, memref<6x5xf32>, memref<6xi64>) outs(%dwv : memref<3x4x5xf32>) {
  ^bb0(%a: f32, %d: f32, %gi: i64, %acc: f32):
    %e = linalg.index 2 : index
    %ei = arith.index_cast %e : index to i64
    %hit = arith.cmpi eq, %gi, %ei : i64
    %p = arith.mulf %a, %d : f32
    %s = arith.select %hit, %p, %zero : f32
    %o = arith.addf %acc, %s : f32
    linalg.yield %o : f32
  }
  linalg.generic {indexing_maps = [#x, #dy, #g, #dwt], iterator_types = ["reduction", "parallel", "parallel", "parallel"]} ins(%xv, %dyv, %g : memref<6x4xf32>, memref<6x5xf32>, memref<6xi64>) outs(%dwtv : memref<3x5x4xf32>) {
  ^bb0(%a: f32, %d: f32, %gi: i64, %acc: f32):
    %e = linalg.index 2 : index
    %ei = arith.index_cast %e : index to i64
    %hit = arith.cmpi eq, %gi, %ei : i64
    %p = arith.mulf %a, %d : f32
    %s = arith.select %hit, %p, %zero : f32
    %o = arith.addf %acc, %s : f32
    linalg.yield %o : f32
  }
  return
}

// -----

// f64 calls the double-precision kernel.
#x = affine_map<(r, n, e, k) -> (r, k)>
#w = affine_map<(r, n, e, k) -> (e, n, k)>
#g = affine_map<(r, n, e, k) -> (r)>
#y = affine_map<(r, n, e, k) -> (r, n)>
// CHECK-LABEL: func.func @f64
// CHECK: call @zbrt_dgemm_grouped_rows(
func.func @f64(%x: memref<6x4xf64>, %w: memref<3x5x4xf64>, %g: memref<6xi64>, %y: memref<6x5xf64>) {
  %zero = arith.constant 0.0 : f64
  linalg.generic {indexing_maps = [#x, #w, #g, #y], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%x, %w, %g : memref<6x4xf64>, memref<3x5x4xf64>, memref<6xi64>) outs(%y : memref<6x5xf64>) {
  ^bb0(%a: f64, %b: f64, %gi: i64, %acc: f64):
    %e = linalg.index 2 : index
    %ei = arith.index_cast %e : index to i64
    %hit = arith.cmpi eq, %gi, %ei : i64
    %p = arith.mulf %a, %b : f64
    %s = arith.select %hit, %p, %zero : f64
    %o = arith.addf %acc, %s : f64
    linalg.yield %o : f64
  }
  return
}

// -----

// Not grouped products the runtime computes, left as loops: the terms of
// the other groups (cmpi ne); a term that is not a plain product (exp);
// an i32 group index (the runtime reads i64).
#x = affine_map<(r, n, e, k) -> (r, k)>
#w = affine_map<(r, n, e, k) -> (e, k, n)>
#g = affine_map<(r, n, e, k) -> (r)>
#y = affine_map<(r, n, e, k) -> (r, n)>
// CHECK-LABEL: func.func @not_grouped
// CHECK-NOT: call
// CHECK-COUNT-3: linalg.generic
// CHECK-NOT: call
func.func @not_grouped(%x: memref<6x4xf32>, %w: memref<3x4x5xf32>, %g: memref<6xi64>, %g32: memref<6xi32>, %y: memref<6x5xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#x, #w, #g, #y], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%x, %w, %g : memref<6x4xf32>, memref<3x4x5xf32>, memref<6xi64>) outs(%y : memref<6x5xf32>) {
  ^bb0(%a: f32, %b: f32, %gi: i64, %acc: f32):
    %e = linalg.index 2 : index
    %ei = arith.index_cast %e : index to i64
    %hit = arith.cmpi ne, %gi, %ei : i64
    %p = arith.mulf %a, %b : f32
    %s = arith.select %hit, %p, %zero : f32
    %o = arith.addf %acc, %s : f32
    linalg.yield %o : f32
  }
  linalg.generic {indexing_maps = [#x, #w, #g, #y], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%x, %w, %g : memref<6x4xf32>, memref<3x4x5xf32>, memref<6xi64>) outs(%y : memref<6x5xf32>) {
  ^bb0(%a: f32, %b: f32, %gi: i64, %acc: f32):
    %e = linalg.index 2 : index
    %ei = arith.index_cast %e : index to i64
    %hit = arith.cmpi eq, %gi, %ei : i64
    %p = arith.mulf %a, %b : f32
    %x2 = math.exp %p : f32
    %s = arith.select %hit, %x2, %zero : f32
    %o = arith.addf %acc, %s : f32
    linalg.yield %o : f32
  }
  linalg.generic {indexing_maps = [#x, #w, #g, #y], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%x, %w, %g32 : memref<6x4xf32>, memref<3x4x5xf32>, memref<6xi32>) outs(%y : memref<6x5xf32>) {
  ^bb0(%a: f32, %b: f32, %gi: i32, %acc: f32):
    %e = linalg.index 2 : index
    %ei = arith.index_cast %e : index to i32
    %hit = arith.cmpi eq, %gi, %ei : i32
    %p = arith.mulf %a, %b : f32
    %s = arith.select %hit, %p, %zero : f32
    %o = arith.addf %acc, %s : f32
    linalg.yield %o : f32
  }
  return
}
