// --zb-emit-optimizer also gives each rank @zb_rank<r>_grad_squares: per
// gradient the sum of its squares in f64 (for the global norm check without
// reading the gradients back), as two row reductions: along the innermost
// dimension, then over the other dimensions' partial sums collapsed into
// one row.
// RUN: zb-opt %s --zb-emit-optimizer=kind=adamw | FileCheck %s
// On the CPU it bufferizes to one f64 out-parameter per gradient.
// RUN: zb-opt %s --zb-emit-optimizer=kind=adamw --zb-lower-to-cpu | FileCheck %s --check-prefix=LLVM

func.func @zb_rank0_step(%c: tensor<2x3x4x5xf32>, %b: tensor<7xf64>, %s: tensor<f32>, %x: tensor<4xf32>) -> tensor<f32>
    attributes {zb.rank = 0 : i64, zb.params = ["c", "b", "s"]} {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// Not a step function (no zb.params), kept with its rank (zb.rank).
// CHECK-LABEL: func.func @zb_rank0_grad_squares(
// CHECK-SAME: %[[C:.*]]: tensor<2x3x4x5xf32>, %[[B:.*]]: tensor<7xf64>, %[[S:.*]]: tensor<f32>) -> (tensor<f64>, tensor<f64>, tensor<f64>)
// CHECK-SAME: attributes {zb.rank = 0 : i64}
// The 4-d gradient: squares summed along the innermost dimension in f64...
// CHECK: %[[ROWS:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[C]] : tensor<2x3x4x5xf32>) outs(%{{.*}} : tensor<2x3x4xf64>)
// CHECK: ^bb0(%[[E:.*]]: f32, %[[ACC:.*]]: f64):
// CHECK: %[[W:.*]] = arith.extf %[[E]] : f32 to f64
// CHECK: %[[SQ:.*]] = arith.mulf %[[W]], %[[W]] : f64
// CHECK: %[[SUM:.*]] = arith.addf %[[ACC]], %[[SQ]] : f64
// CHECK: linalg.yield %[[SUM]] : f64
// ...then the 24 partial sums as one row.
// CHECK: %[[ROW:.*]] = tensor.collapse_shape %[[ROWS]] {{\[}}[0, 1, 2]] : tensor<2x3x4xf64> into tensor<24xf64>
// CHECK: %[[SC:.*]] = linalg.generic {{.*}}iterator_types = ["reduction"]} ins(%[[ROW]] : tensor<24xf64>) outs(%{{.*}} : tensor<f64>)
// CHECK: arith.addf
// An f64 gradient needs no conversion; a 1-d one is one row.
// CHECK: %[[SB:.*]] = linalg.generic {{.*}}iterator_types = ["reduction"]} ins(%[[B]] : tensor<7xf64>) outs(%{{.*}} : tensor<f64>)
// CHECK-NOT: arith.extf
// CHECK: arith.mulf
// A 0-d gradient: its square.
// CHECK: %[[SS:.*]] = linalg.generic {{.*}}iterator_types = []} ins(%[[S]] : tensor<f32>) outs(%{{.*}} : tensor<f64>)
// CHECK: return %[[SC]], %[[SB]], %[[SS]] : tensor<f64>, tensor<f64>, tensor<f64>

// LLVM: llvm.func @_mlir_ciface_zb_rank0_grad_squares(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
