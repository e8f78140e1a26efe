// REQUIRES: cuda-toolkit
// Row reductions: a block per row when rows are long (a strided share per
// thread, then a tree of warp shuffles and a shared-memory exchange between
// warps); one thread per row when they are short.
// RUN: zb-opt %s --zb-lower-to-gpu="format=isa" | FileCheck %s
// RUN: zb-opt %s --one-shot-bufferize="bufferize-function-boundaries" --zb-map-to-gpu | FileCheck %s --check-prefix=MAP

func.func @rowsum(%x: tensor<64x300xf32>) -> tensor<64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %sum = linalg.reduce ins(%x : tensor<64x300xf32>) outs(%init : tensor<64xf32>)
      dimensions = [1]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return %sum : tensor<64xf32>
}

func.func @short_rows(%x: tensor<64x16xf32>) -> tensor<64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %sum = linalg.reduce ins(%x : tensor<64x16xf32>) outs(%init : tensor<64xf32>)
      dimensions = [1]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return %sum : tensor<64xf32>
}

// CHECK-LABEL: llvm.func @rowsum(
// The fill, then the reduction: 64 blocks (one per row) of 256 threads.
// CHECK: %[[THREADS:.*]] = llvm.mlir.constant(256 : index) : i64
// CHECK: %[[ROWS:.*]] = llvm.mlir.constant(64 : index) : i64
// CHECK: gpu.launch_func
// CHECK: gpu.launch_func {{.*}} blocks in (%[[ROWS]], %{{.*}}, %{{.*}}) threads in (%[[THREADS]],
// CHECK: gpu.binary @rowsum_kernel [
// CHECK-SAME: .target sm_90
// CHECK-SAME: st.global
// Each thread's strided share (a loop of loads and adds), then the block's
// tree: shuffles within a warp, shared memory and a barrier between warps.
// CHECK: gpu.binary @rowsum_kernel_0 [
// CHECK-SAME: .target sm_90
// CHECK-SAME: ld.global
// CHECK-SAME: add.rn.f32
// CHECK-SAME: shfl.sync.bfly.b32
// CHECK-SAME: bar.sync
// CHECK-SAME: st.global
// CHECK-LABEL: llvm.func @short_rows(
// CHECK: gpu.binary @short_rows_kernel_1 [
// CHECK-SAME: .target sm_90
// CHECK-NOT: shfl.sync
// CHECK-SAME: bra

// The structure zb-map-to-gpu gives the long rows: rows over blocks,
// threads over the row with an scf.reduce (gpu.all_reduce once launched).
// Thread 0's share starts from the output's initial value, read before the
// tree; after it every thread stores the same result.
// MAP-LABEL: func.func @rowsum(
// MAP: scf.parallel (%[[ROW:.*]]) = (%{{.*}}) to (%c64{{.*}}) step
// MAP: scf.parallel (%[[T:.*]]) = (%{{.*}}) to (%c256{{.*}}) step (%{{.*}}) init (%[[ID:.*]]) -> f32
// MAP: %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %{{.*}} : index
// MAP: %[[INIT:.*]] = memref.load %[[OUT:.*]][%[[ROW]]] : memref<64xf32>
// MAP: %[[START:.*]] = arith.select %[[FIRST]], %[[INIT]], %[[ID]] : f32
// MAP: scf.for %{{.*}} = %[[T]] to %c300{{.*}} step %c256{{.*}} iter_args(%{{.*}} = %[[START]])
// MAP: memref.load %{{.*}}[%[[ROW]], %{{.*}}]
// MAP: arith.addf
// MAP: scf.reduce(%{{.*}} : f32)
// MAP: arith.addf
// MAP: scf.reduce.return
// MAP: processor = thread_x
// MAP-NEXT: memref.store %{{.*}}, %[[OUT]][%[[ROW]]] : memref<64xf32>
// MAP: processor = block_x
