// REQUIRES: cuda-toolkit
// Column reductions (a bias gradient: the sum over the rows): with few
// output elements, two kernels, one folding chunks of 64 rows into partial
// results (a thread per chunk and element), one folding those into the
// output; with short columns, many elements or inside a loop, a thread per
// element.
// RUN: zb-opt %s --zb-lower-to-gpu="format=isa" | FileCheck %s
// RUN: zb-opt %s --one-shot-bufferize="bufferize-function-boundaries" --zb-map-to-gpu | FileCheck %s --check-prefix=MAP

func.func @colsum(%x: tensor<4000x1024xf32>) -> tensor<1024xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1024xf32>) -> tensor<1024xf32>
  %sum = linalg.reduce ins(%x : tensor<4000x1024xf32>) outs(%init : tensor<1024xf32>)
      dimensions = [0]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return %sum : tensor<1024xf32>
}

func.func @short_columns(%x: tensor<64x1024xf32>) -> tensor<1024xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1024xf32>) -> tensor<1024xf32>
  %sum = linalg.reduce ins(%x : tensor<64x1024xf32>) outs(%init : tensor<1024xf32>)
      dimensions = [0]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return %sum : tensor<1024xf32>
}

func.func @many_columns(%x: tensor<256x16384xf32>) -> tensor<16384xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16384xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<16384xf32>) -> tensor<16384xf32>
  %sum = linalg.reduce ins(%x : tensor<256x16384xf32>) outs(%init : tensor<16384xf32>)
      dimensions = [0]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return %sum : tensor<16384xf32>
}

func.func @in_a_loop(%x: tensor<4000x16xf32>, %n: index) -> tensor<16xf32> {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %init) -> tensor<16xf32> {
    %sum = linalg.reduce ins(%x : tensor<4000x16xf32>) outs(%acc : tensor<16xf32>)
        dimensions = [0]
      (%a: f32, %b: f32) {
        %s = arith.addf %a, %b : f32
        linalg.yield %s : f32
      }
    scf.yield %sum : tensor<16xf32>
  }
  return %r : tensor<16xf32>
}

// The fill (4 blocks of 256 threads), the partial sums (63 chunks of 64
// rows x 1024 elements: 252 blocks) into a device buffer, the final sums
// (4 blocks), the buffer freed.
// CHECK-LABEL: llvm.func @colsum(
// CHECK-DAG: %[[FOUR:.*]] = llvm.mlir.constant(4 : index) : i64
// CHECK-DAG: %[[THREADS:.*]] = llvm.mlir.constant(256 : index) : i64
// CHECK-DAG: %[[PARTBLOCKS:.*]] = llvm.mlir.constant(252 : index) : i64
// CHECK: gpu.launch_func {{.*}} blocks in (%[[FOUR]], %{{.*}}, %{{.*}}) threads in (%[[THREADS]],
// CHECK: %[[PARTIAL:.*]] = llvm.call @mgpuMemAlloc(
// CHECK: gpu.launch_func {{.*}}@colsum_kernel_0::@colsum_kernel blocks in (%[[PARTBLOCKS]], %{{.*}}, %{{.*}}) threads in (%[[THREADS]],
// CHECK-SAME: %[[PARTIAL]] : !llvm.ptr
// CHECK: gpu.launch_func {{.*}}@colsum_kernel_1::@colsum_kernel blocks in (%[[FOUR]], %{{.*}}, %{{.*}}) threads in (%[[THREADS]],
// CHECK-SAME: %[[PARTIAL]] : !llvm.ptr
// CHECK: llvm.call @mgpuMemFree(%[[PARTIAL]],
// CHECK: gpu.binary @colsum_kernel_0 [
// CHECK-SAME: .target sm_90
// CHECK-SAME: ld.global
// CHECK-SAME: add.rn.f32
// CHECK-SAME: st.global
// CHECK: gpu.binary @colsum_kernel_1 [
// CHECK-SAME: .target sm_90
// CHECK-LABEL: llvm.func @short_columns(
// CHECK-NOT: mgpuMemAlloc
// CHECK-LABEL: llvm.func @many_columns(
// CHECK-NOT: mgpuMemAlloc
// CHECK-LABEL: gpu.binary

// MAP-LABEL: func.func @colsum(
// MAP: %[[PARTIAL:.*]] = gpu.alloc () : memref<63x1024xf32>
// Chunk and element over the threads, the chunk's 64 rows in each.
// MAP: scf.parallel
// MAP: %[[START:.*]] = arith.muli %{{.*}}, %c64{{.*}} : index
// MAP: %[[END:.*]] = arith.minui %{{.*}}, %c4000{{.*}} : index
// MAP: %[[PART:.*]] = scf.for %{{.*}} = %[[START]] to %[[END]] step %{{.*}} iter_args(%{{.*}} = %cst{{.*}}) -> (f32)
// MAP: memref.load
// MAP: arith.addf
// MAP: memref.store %[[PART]], %[[PARTIAL]][
// MAP: processor = thread_x
// MAP: processor = block_x
// The output's initial value, then the chunks in order.
// MAP: scf.parallel
// MAP: %[[INIT:.*]] = memref.load %[[OUT:.*]][%{{.*}}] : memref<1024xf32>
// MAP: %[[ALL:.*]] = scf.for %{{.*}} = %c0{{.*}} to %c63{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[INIT]]) -> (f32)
// MAP: memref.load %[[PARTIAL]][
// MAP: arith.addf
// MAP: memref.store %[[ALL]], %[[OUT]][
// MAP: processor = block_x
// MAP: gpu.dealloc %[[PARTIAL]] : memref<63x1024xf32>
// MAP-LABEL: func.func @short_columns(
// MAP-NOT: gpu.alloc () : memref<{{.*}}x1024xf32>
// MAP-LABEL: func.func @many_columns(
// MAP-NOT: gpu.alloc () : memref<{{.*}}x16384xf32>
// MAP-LABEL: func.func @in_a_loop(
// MAP-NOT: gpu.alloc () : memref<{{.*}}x16xf32>
