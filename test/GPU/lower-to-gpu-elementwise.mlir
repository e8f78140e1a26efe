// An elementwise chain becomes one fused kernel: loads, the arithmetic and
// one store per element, in PTX for sm_90.
// RUN: zb-opt %s --zb-lower-to-gpu="format=isa" | FileCheck %s

#id = affine_map<(i, j) -> (i, j)>
func.func @chain(%x: tensor<64x300xf32>, %y: tensor<64x300xf32>) -> tensor<64x300xf32> {
  %e = tensor.empty() : tensor<64x300xf32>
  %prod = linalg.generic {indexing_maps = [#id, #id, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<64x300xf32>, tensor<64x300xf32>)
      outs(%e : tensor<64x300xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<64x300xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id],
                         iterator_types = ["parallel", "parallel"]}
      ins(%prod, %x : tensor<64x300xf32>, tensor<64x300xf32>)
      outs(%e : tensor<64x300xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<64x300xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%sum : tensor<64x300xf32>) outs(%e : tensor<64x300xf32>) {
  ^bb0(%a: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  } -> tensor<64x300xf32>
  return %relu : tensor<64x300xf32>
}

// Host: one launch of 19200 / 256 = 75 blocks of 256 threads on the stream
// the runtime provides.
// CHECK-LABEL: llvm.func @chain(
// CHECK-DAG: %[[BLOCKS:.*]] = llvm.mlir.constant(75 : index) : i64
// CHECK-DAG: %[[THREADS:.*]] = llvm.mlir.constant(256 : index) : i64
// CHECK: %[[S:.*]] = llvm.call @mgpuStreamCreate() : () -> !llvm.ptr
// CHECK: gpu.launch_func <%[[S]] : !llvm.ptr> @chain_kernel::@chain_kernel blocks in (%[[BLOCKS]], %{{.*}}, %{{.*}}) threads in (%[[THREADS]], %{{.*}}, %{{.*}})
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mgpuStreamSynchronize(%[[S]])
// CHECK: llvm.return

// Device: one kernel.
// CHECK: gpu.binary @chain_kernel [#gpu.object<#nvvm.target<chip = "sm_90">
// CHECK-SAME: .target sm_90
// CHECK-SAME: .entry chain_kernel(
// CHECK-SAME: ld.global
// CHECK-SAME: ld.global
// CHECK-SAME: mul.rn.f32
// CHECK-SAME: add.rn.f32
// CHECK-SAME: max.NaN.f32
// CHECK-SAME: st.global
// CHECK-NOT: .entry
