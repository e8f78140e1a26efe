// RUN: zb-opt %s --zb-expand-grouped-products --split-input-file | FileCheck %s

// A grouped product's forward form, rows times their group's weight stored
// [e, n, k], becomes: x broadcast over the 3 groups, one batched product
// per group (a gemm with a batch dimension, op(B) transposed), and each
// row's pick of its own group into the original init.
// CHECK-DAG: #[[BCAST:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[ALL3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[XB:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[WT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-DAG: #[[T:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG: #[[PICKT:.*]] = affine_map<(d0, d1, d2) -> (d2, d0, d1)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1, d2) -> (d0)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @experts
// CHECK-SAME: (%[[X:.*]]: tensor<6x4xf32>, %[[G:.*]]: tensor<6xi64>, %[[W:.*]]: tensor<3x5x4xf32>)
// CHECK: %[[INIT:.*]] = linalg.fill
// CHECK: %[[XBV:.*]] = linalg.generic {indexing_maps = [#[[BCAST]], #[[ALL3]]], {{.*}} ins(%[[X]] : tensor<6x4xf32>) outs(%{{.*}} : tensor<3x6x4xf32>)
// CHECK: %[[TV:.*]] = linalg.generic {indexing_maps = [#[[XB]], #[[WT]], #[[T]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[XBV]], %[[W]] : tensor<3x6x4xf32>, tensor<3x5x4xf32>) outs(%{{.*}} : tensor<3x6x5xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT: arith.addf %[[ACC]], %[[P]] : f32
// CHECK: %[[Y:.*]] = linalg.generic {indexing_maps = [#[[PICKT]], #[[ROW]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[TV]], %[[G]] : tensor<3x6x5xf32>, tensor<6xi64>) outs(%[[INIT]] : tensor<6x5xf32>)
// CHECK: linalg.index 2
// CHECK: arith.cmpi eq
// CHECK: arith.select
// CHECK: return %[[Y]]
#x = affine_map<(r, n, e, k) -> (r, k)>
#w = affine_map<(r, n, e, k) -> (e, n, k)>
#g = affine_map<(r, n, e, k) -> (r)>
#y = affine_map<(r, n, e, k) -> (r, n)>
func.func @experts(%x: tensor<6x4xf32>, %g: tensor<6xi64>, %w: tensor<3x5x4xf32>) -> tensor<6x5xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x5xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6x5xf32>) -> tensor<6x5xf32>
  %p = linalg.generic {indexing_maps = [#x, #w, #g, #y], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%x, %w, %g : tensor<6x4xf32>, tensor<3x5x4xf32>, tensor<6xi64>) outs(%f : tensor<6x5xf32>) {
  ^bb0(%a: f32, %b: f32, %gi: i64, %acc: f32):
    %i = linalg.index 2 : index
    %ii = arith.index_cast %i : index to i64
    %hit = arith.cmpi eq, %gi, %ii : i64
    %m = arith.mulf %a, %b : f32
    %s = arith.select %hit, %m, %zero : f32
    %sum = arith.addf %acc, %s : f32
    linalg.yield %sum : f32
  } -> tensor<6x5xf32>
  return %p : tensor<6x5xf32>
}

// -----

// Stored [e, k, n]: op(B) as stored.
#x = affine_map<(r, n, e, k) -> (r, k)>
#w = affine_map<(r, n, e, k) -> (e, k, n)>
#g = affine_map<(r, n, e, k) -> (r)>
#y = affine_map<(r, n, e, k) -> (r, n)>
// CHECK-DAG: #[[W:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
// CHECK-LABEL: func.func @stored_k_n
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[W]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
func.func @stored_k_n(%x: tensor<6x4xf32>, %g: tensor<6xi64>, %w: tensor<3x4x5xf32>, %init: tensor<6x5xf32>) -> tensor<6x5xf32> {
  %zero = arith.constant 0.0 : f32
  %p = linalg.generic {indexing_maps = [#x, #w, #g, #y], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%x, %w, %g : tensor<6x4xf32>, tensor<3x4x5xf32>, tensor<6xi64>) outs(%init : tensor<6x5xf32>) {
  ^bb0(%a: f32, %b: f32, %gi: i64, %acc: f32):
    %i = linalg.index 2 : index
    %ii = arith.index_cast %i : index to i64
    %hit = arith.cmpi eq, %gi, %ii : i64
    %m = arith.mulf %a, %b : f32
    %s = arith.select %hit, %m, %zero : f32
    %sum = arith.addf %acc, %s : f32
    linalg.yield %sum : f32
  } -> tensor<6x5xf32>
  return %p : tensor<6x5xf32>
}

// -----

// A weight gradient's form (each group's sum over its rows) is not the
// forward's: left alone.
#x = affine_map<(r, n, e, k) -> (r, k)>
#dy = affine_map<(r, n, e, k) -> (r, n)>
#g = affine_map<(r, n, e, k) -> (r)>
#dw = affine_map<(r, n, e, k) -> (e, k, n)>
// CHECK-LABEL: func.func @weight_gradient
// CHECK-COUNT-1: linalg.generic
// CHECK-NOT: linalg.generic
func.func @weight_gradient(%x: tensor<6x4xf32>, %dy: tensor<6x5xf32>, %g: tensor<6xi64>, %init: tensor<3x4x5xf32>) -> tensor<3x4x5xf32> {
  %zero = arith.constant 0.0 : f32
  %p = linalg.generic {indexing_maps = [#x, #dy, #g, #dw], iterator_types = ["reduction", "parallel", "parallel", "parallel"]} ins(%x, %dy, %g : tensor<6x4xf32>, tensor<6x5xf32>, tensor<6xi64>) outs(%init : tensor<3x4x5xf32>) {
  ^bb0(%a: f32, %d: f32, %gi: i64, %acc: f32):
    %i = linalg.index 2 : index
    %ii = arith.index_cast %i : index to i64
    %hit = arith.cmpi eq, %gi, %ii : i64
    %m = arith.mulf %a, %d : f32
    %s = arith.select %hit, %m, %zero : f32
    %sum = arith.addf %acc, %s : f32
    linalg.yield %sum : f32
  } -> tensor<3x4x5xf32>
  return %p : tensor<3x4x5xf32>
}
