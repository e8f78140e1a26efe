// RUN: zb-opt %s --split-input-file --zb-accumulate-in-gemms | FileCheck %s
// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-strip-cuts --zb-pipeline="stages=2 microbatches=2 schedule=zb-h1" -mlir-print-ir-after=zb-lower-gemm-to-runtime -o /dev/null 2>&1 | FileCheck %s --check-prefix=MLP
// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-autodiff=accumulate=true --zb-lower-to-cpu -mlir-print-ir-after=zb-lower-gemm-to-runtime -o /dev/null 2>&1 | FileCheck %s --check-prefix=ONE

// In the pipeline: the last stage's W takes the sums of its four
// gradients (two weights, two biases) after its own arguments. The weights'
// gemms write into their sums in place (no buffer between); the biases'
// gradients are reductions, added to their sums after.
// MLP-LABEL: func.func private @zb_stage1_backward_weight_acc(
// MLP-SAME: %[[DW1:[^:]*]]: memref<32x32xf32>, %[[DB1:[^:]*]]: memref<32xf32>, %[[DW2:[^:]*]]: memref<32x10xf32>, %[[DB2:[^:]*]]: memref<10xf32>)
// MLP: memref.extract_aligned_pointer_as_index %[[DW2]]
// MLP: call @zbrt_sgemm_batched(
// MLP: memref.extract_aligned_pointer_as_index %[[DW1]]
// MLP: call @zbrt_sgemm_batched(
// MLP: linalg.generic {{.*}} outs(%[[DB1]] : memref<32xf32>)
// MLP: linalg.generic {{.*}} outs(%[[DB2]] : memref<10xf32>)
// MLP: return

// On one process (what zb-run runs): @mlp_grad_acc takes the six sums after
// the model's arguments and returns nothing but the loss (an out-parameter,
// last). The gemms of the three weight gradients write into their sums
// (l1's too: the ReLU's derivative before it is not fused into it); the
// biases' gradients are added to their sums after.
// ONE-LABEL: func.func @mlp_grad_acc(
// ONE-SAME: %{{[^:]*}}: memref<10xf32> {zb.param = "l3.bias"}, %[[S1:[^:]*]]: memref<16x32xf32>, %[[SB1:[^:]*]]: memref<32xf32>, %[[S2:[^:]*]]: memref<32x32xf32>, %[[SB2:[^:]*]]: memref<32xf32>, %[[S3:[^:]*]]: memref<32x10xf32>, %[[SB3:[^:]*]]: memref<10xf32>, %{{[^:]*}}: memref<f32>)
// ONE-SAME: attributes {llvm.emit_c_interface, zb.grad_sums = 6 : i64
// ONE: memref.extract_aligned_pointer_as_index %[[S3]]
// ONE: call @zbrt_sgemm_batched(
// ONE: memref.extract_aligned_pointer_as_index %[[S2]]
// ONE: call @zbrt_sgemm_batched(
// ONE: memref.extract_aligned_pointer_as_index %[[S1]]
// ONE: call @zbrt_sgemm_batched(
// ONE-NOT: outs(%[[S1]]
// ONE: linalg.generic {{.*}} outs(%[[SB1]] : memref<32xf32>)
// ONE: linalg.generic {{.*}} outs(%[[SB2]] : memref<32xf32>)
// ONE: linalg.generic {{.*}} outs(%[[SB3]] : memref<10xf32>)
// ONE-NEXT: ^bb0
// ONE-NEXT: arith.addf
// ONE-NEXT: linalg.yield
// ONE-NEXT: }
// ONE-NEXT: memref.dealloc
// ONE-NEXT: return
// ONE-NEXT: }

// A gradient sum updated in place by a matmul's product: the matmul starts
// from the sum, and the zero fill and the addition go.
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME: %[[A:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16x4xf32>, %[[S:.*]]: tensor<8x4xf32>)
// CHECK-NOT: linalg.fill
// CHECK: %[[R:.*]] = linalg.matmul ins(%[[A]], %[[B]] : tensor<8x16xf32>, tensor<16x4xf32>) outs(%[[S]] : tensor<8x4xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
#id = affine_map<(i, j) -> (i, j)>
func.func @matmul(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %sum: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  %g = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z : tensor<8x4xf32>) -> tensor<8x4xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<8x4xf32>) outs(%sum : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// A weight gradient as autodiff writes it (a transposed generic
// contraction), the addition written in+out: folded the same way.
// CHECK-LABEL: func.func @weight_gradient(
// CHECK-SAME: %[[X:.*]]: tensor<2x4xf32>, %[[DY:.*]]: tensor<2x4xf32>, %[[S:.*]]: tensor<4x4xf32>)
// CHECK-NOT: linalg.fill
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[DY]] : tensor<2x4xf32>, tensor<2x4xf32>) outs(%[[S]] : tensor<4x4xf32>)
// CHECK: return %[[R]]
#xk = affine_map<(k, i, j) -> (k, i)>
#yk = affine_map<(k, i, j) -> (k, j)>
#ij = affine_map<(k, i, j) -> (i, j)>
#id = affine_map<(i, j) -> (i, j)>
func.func @weight_gradient(%x: tensor<2x4xf32>, %dy: tensor<2x4xf32>, %sum: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %g = linalg.generic {indexing_maps = [#xk, #yk, #ij], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%x, %dy : tensor<2x4xf32>, tensor<2x4xf32>) outs(%z : tensor<4x4xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<4x4xf32>) outs(%sum : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %out : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  return %s : tensor<4x4xf32>
}

// -----

// Left alone: the product is read again; the GEMM does not start from
// zeros; the sum is not an argument; the body subtracts; the addend is a
// bias gradient (a reduction, not a GEMM, whose sum would change order).
// CHECK-LABEL: func.func @left_alone(
// CHECK-SAME: %[[SUM:[^:]*]]: tensor<8x4xf32>, %[[INIT:[^:]*]]: tensor<8x4xf32>, %[[BSUM:[^:]*]]: tensor<4xf32>,
// CHECK: %[[G1:.*]] = linalg.matmul {{.*}} outs(%{{[0-9]+}} : tensor<8x4xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[G1]] : tensor<8x4xf32>) outs(%[[SUM]] : tensor<8x4xf32>)
// CHECK: %[[G2:.*]] = linalg.matmul {{.*}} outs(%{{[0-9]+}} : tensor<8x4xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[G2]] : tensor<8x4xf32>) outs(%[[SUM]] : tensor<8x4xf32>)
// CHECK: %[[G3:.*]] = linalg.matmul {{.*}} outs(%{{[0-9]+}} : tensor<8x4xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[G3]] : tensor<8x4xf32>) outs(%[[G1]] : tensor<8x4xf32>)
// CHECK: %[[G4:.*]] = linalg.matmul {{.*}} outs(%{{[0-9]+}} : tensor<8x4xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[G4]] : tensor<8x4xf32>) outs(%[[INIT]] : tensor<8x4xf32>)
// CHECK: %[[DB:.*]] = linalg.generic {{.*}} outs(%{{[0-9]+}} : tensor<4xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[DB]] : tensor<4xf32>) outs(%[[BSUM]] : tensor<4xf32>)
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>
#col = affine_map<(i, j) -> (i, j)>
func.func @left_alone(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %sum: tensor<8x4xf32>, %init: tensor<8x4xf32>, %bsum: tensor<4xf32>, %dy: tensor<8x4xf32>)
    -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<8x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  // Read again.
  %g1 = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z : tensor<8x4xf32>) -> tensor<8x4xf32>
  %s1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g1 : tensor<8x4xf32>) outs(%sum : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  // Starts from ones.
  %o = linalg.fill ins(%one : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  %g2 = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%o : tensor<8x4xf32>) -> tensor<8x4xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g2 : tensor<8x4xf32>) outs(%sum : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  // Into a value that is not an argument.
  %g3 = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z : tensor<8x4xf32>) -> tensor<8x4xf32>
  %s3 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g3 : tensor<8x4xf32>) outs(%g1 : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  // A subtraction.
  %g4 = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z : tensor<8x4xf32>) -> tensor<8x4xf32>
  %s4 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g4 : tensor<8x4xf32>) outs(%init : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.subf %out, %in : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  // A bias gradient.
  %e1 = tensor.empty() : tensor<4xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %db = linalg.generic {indexing_maps = [#col, #row], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<8x4xf32>) outs(%z1 : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %s5 = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%db : tensor<4xf32>) outs(%bsum : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %g1, %s1, %s2, %s3, %s4, %s5 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<4xf32>
}

// -----

// A mixture of experts' weight gradient (a grouped product summing each
// expert's rows) starts from the sum as well; the runtime's grouped gemm
// then adds to it (beta 1).
// CHECK-LABEL: func.func @grouped_weight_gradient(
// CHECK-SAME: %[[X:.*]]: tensor<6x4xf32>, %[[DY:.*]]: tensor<6x5xf32>, %[[G:.*]]: tensor<6xi64>, %[[S:.*]]: tensor<3x4x5xf32>)
// CHECK-NOT: linalg.fill
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[DY]], %[[G]] : tensor<6x4xf32>, tensor<6x5xf32>, tensor<6xi64>) outs(%[[S]] : tensor<3x4x5xf32>)
// CHECK-COUNT-1: linalg.yield
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
#x = affine_map<(r, n, e, k) -> (r, k)>
#dy = affine_map<(r, n, e, k) -> (r, n)>
#g = affine_map<(r, n, e, k) -> (r)>
#dw = affine_map<(r, n, e, k) -> (e, k, n)>
#all = affine_map<(e, k, n) -> (e, k, n)>
func.func @grouped_weight_gradient(%xv: tensor<6x4xf32>, %dyv: tensor<6x5xf32>, %g: tensor<6xi64>, %sum: tensor<3x4x5xf32>) -> tensor<3x4x5xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x4x5xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<3x4x5xf32>) -> tensor<3x4x5xf32>
  %dw = linalg.generic {indexing_maps = [#x, #dy, #g, #dw], iterator_types = ["reduction", "parallel", "parallel", "parallel"]} ins(%xv, %dyv, %g : tensor<6x4xf32>, tensor<6x5xf32>, tensor<6xi64>) outs(%z : tensor<3x4x5xf32>) {
  ^bb0(%a: f32, %d: f32, %gi: i64, %acc: f32):
    %i = linalg.index 2 : index
    %ii = arith.index_cast %i : index to i64
    %hit = arith.cmpi eq, %gi, %ii : i64
    %m = arith.mulf %a, %d : f32
    %s = arith.select %hit, %m, %zero : f32
    %r = arith.addf %acc, %s : f32
    linalg.yield %r : f32
  } -> tensor<3x4x5xf32>
  %out = linalg.generic {indexing_maps = [#all, #all], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dw : tensor<3x4x5xf32>) outs(%sum : tensor<3x4x5xf32>) {
  ^bb0(%in: f32, %o: f32):
    %r = arith.addf %o, %in : f32
    linalg.yield %r : f32
  } -> tensor<3x4x5xf32>
  return %out : tensor<3x4x5xf32>
}
