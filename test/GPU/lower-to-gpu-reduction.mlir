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
// The fill and the reduction, one kernel: 64 blocks (one per row) of 256
// threads.
// CHECK-DAG: %[[ROWS:.*]] = llvm.mlir.constant(64 : index) : i64
// CHECK-DAG: %[[THREADS:.*]] = llvm.mlir.constant(256 : index) : i64
// CHECK: gpu.launch_func {{.*}} blocks in (%[[ROWS]], %{{.*}}, %{{.*}}) threads in (%[[THREADS]],
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.binary @rowsum_kernel [
// Thread 0's fill, then each thread's strided share (a loop of loads and
// adds), then the block's tree: shuffles within a warp, shared memory and
// a barrier between warps.
// CHECK-SAME: .target sm_90
// CHECK-SAME: st.global
// CHECK-SAME: bar.sync
// CHECK-SAME: ld.global
// CHECK-SAME: add.rn.f32
// CHECK-SAME: shfl.sync.bfly.b32
// CHECK-SAME: bar.sync
// CHECK-SAME: st.global
// CHECK-LABEL: llvm.func @short_rows(
// CHECK: gpu.binary @short_rows_kernel_0 [
// CHECK-SAME: .target sm_90
// CHECK-NOT: shfl.sync
// CHECK-SAME: bra

// The structure zb-map-to-gpu gives the long rows: a launch of a block per
// row. Thread 0 fills the row's output; after a barrier, thread 0's share
// starts from it, read before the tree (gpu.all_reduce); after it every
// thread stores the same result.
// MAP-LABEL: func.func @rowsum(
// MAP: gpu.launch blocks(%[[ROW:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c64{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c256{{.*}},
// MAP: %[[FILL:.*]] = arith.cmpi eq, %[[T]], %{{.*}} : index
// MAP: scf.if %[[FILL]] {
// MAP-NEXT: memref.store %{{.*}}, %[[OUT:.*]][%[[ROW]]] : memref<64xf32>
// MAP: gpu.barrier
// MAP: %[[ID:.*]] = arith.constant 0.0
// MAP: %[[INIT:.*]] = memref.load %[[OUT]][%[[ROW]]] : memref<64xf32>
// MAP: %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %{{.*}} : index
// MAP: %[[START:.*]] = arith.select %[[FIRST]], %[[INIT]], %[[ID]] : f32
// MAP: %[[SHARE:.*]] = scf.for %{{.*}} = %[[T]] to %c300{{.*}} step %c256{{.*}} iter_args(%{{.*}} = %[[START]])
// MAP: memref.load %{{.*}}[%[[ROW]], %{{.*}}]
// MAP: arith.addf
// MAP: %[[SUM:.*]] = gpu.all_reduce %[[SHARE]] uniform {
// MAP: arith.addf
// MAP: gpu.yield
// MAP: memref.store %[[SUM]], %[[OUT]][%[[ROW]]] : memref<64xf32>
// MAP-NEXT: gpu.terminator
// MAP-LABEL: func.func @short_rows(
// MAP-NOT: gpu.launch
