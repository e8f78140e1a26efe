// REQUIRES: cuda-toolkit
// (ptxas builds the cubins; libdevice provides log and exp.)
// --zb-pipeline with target=gpu: per-rank step functions whose stages launch
// kernels embedded as sm_90 cubins, call cuBLAS for the matmuls, and pass
// device buffers to the runtime's send/recv.
// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-pipeline="stages=3 microbatches=2 schedule=1f1b target=gpu" | FileCheck %s
// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-pipeline="stages=3 microbatches=2 schedule=1f1b target=gpu dtype=bf16" | FileCheck %s --check-prefix=BF16
// The GPT example: its embedding gradient's scatter-add is a kernel too.
// RUN: zb-opt %zb_src_root/examples/gpt.mlir --zb-strip-cuts --zb-pipeline="stages=2 microbatches=2 schedule=zb-h1 target=gpu" | FileCheck %s --check-prefix=GPT
// NCCL transfers carry no tags: a V placement, whose links receive in
// another order than they send, is refused for the GPU (not for MPI).
// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-strip-cuts --zb-pipeline="stages=2 microbatches=4 schedule=zb-v target=gpu" | FileCheck %s --check-prefix=VGPU
// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-strip-cuts --zb-pipeline="stages=2 microbatches=4 schedule=zb-v" -o /dev/null
// RUN: rm -rf %t.cache && zb-run %zb_src_root/examples/mlp.mlir --np 2 --schedule zb-v --microbatches 4 --backend nccl --compile-only --cache-dir %t.cache | FileCheck %s --check-prefix=VNCCL
// The step function loops over its action table on the host; unroll=true
// keeps every action inline instead, with no table.
// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-pipeline="stages=3 microbatches=2 schedule=1f1b target=gpu unroll=true" | FileCheck %s --check-prefix=UNROLL
// optimizer=adamw: each rank's update (--zb-emit-optimizer) runs on the
// device too, one kernel per parameter, on the buffers the step leaves there.
// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-pipeline="stages=3 microbatches=2 schedule=1f1b target=gpu optimizer=adamw" | FileCheck %s --check-prefix=OPT
// Its gradient norm check too: a weight's squares summed per row by a block
// (each thread a strided share, then a block-wide tree), the row sums by
// one block.
// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-pipeline="stages=3 microbatches=2 schedule=1f1b target=gpu optimizer=adamw" --mlir-print-ir-before=gpu-kernel-outlining -o /dev/null 2>&1 | FileCheck %s --check-prefix=SQ
// RUN: not zb-opt %zb_src_root/examples/mlp.mlir --zb-pipeline="target=tpu" 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not zb-opt %zb_src_root/examples/mlp.mlir --zb-pipeline="target=gpu dtype=f16" 2>&1 | FileCheck %s --check-prefix=DTYPE

// OPT-LABEL: llvm.func @zb_rank0_grad_squares(
// OPT-NOT: llvm.call @mgpuMemcpy
// OPT: gpu.launch_func <%{{.*}} : !llvm.ptr> @zb_rank0_grad_squares_kernel
// OPT: llvm.return
// OPT: gpu.binary @zb_rank0_grad_squares_kernel [#gpu.object<#nvvm.target<chip = "sm_90">
// OPT-LABEL: llvm.func @zb_rank0_update(
// OPT-NOT: llvm.call @mgpuMemAlloc
// OPT: gpu.launch_func <%{{.*}} : !llvm.ptr> @zb_rank0_update_kernel::@zb_rank0_update_kernel
// OPT: gpu.launch_func <%{{.*}} : !llvm.ptr> @zb_rank0_update_kernel_{{[0-9]+}}::@zb_rank0_update_kernel
// OPT-NOT: gpu.launch_func
// OPT: llvm.call @mgpuStreamSynchronize(
// OPT: llvm.return
// OPT: gpu.binary @zb_rank0_update_kernel [#gpu.object<#nvvm.target<chip = "sm_90">
// OPT-SAME: bin = "\7FELF

// SQ-LABEL: func.func @zb_rank0_grad_squares(
// SQ: gpu.launch blocks({{.*}}) in ({{.*}} = %c16, {{.*}}) threads({{.*}}) in ({{.*}} = %c32,
// SQ: memref.load %{{.*}} : memref<16x32xf32>
// SQ: arith.extf %{{.*}} : f32 to f64
// SQ: arith.mulf
// SQ: gpu.all_reduce %{{.*}} uniform
// SQ: arith.addf %{{.*}}, %{{.*}} : f64
// SQ: gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads
// SQ: memref.load %{{.*}} : memref<16xf64>
// SQ: gpu.all_reduce

// CHECK-DAG: llvm.func @zbrt_gpu_sgemm_batched(i32, i32, i64, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64)
// CHECK-DAG: llvm.func @_mlir_ciface_zbrt_send_f32(!llvm.ptr, i64, i64)
// CHECK-DAG: llvm.func @_mlir_ciface_zbrt_recv_f32(!llvm.ptr, i64, i64)
// UNROLL-NOT: @zb_rank0_actions
// UNROLL-LABEL: llvm.func @zb_rank0_step(
// UNROLL-NOT: @zb_rank0_actions
// The first layer's matmul overwrites its zeroed output (beta = 0, no
// fill kernel); bias and ReLU are a kernel after it.
// CHECK-LABEL: llvm.func internal @zb_stage0_forward(
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @zbrt_gpu_sgemm_batched(
// CHECK: gpu.launch_func
// Each kernel is embedded as a cubin for sm_90.
// CHECK: gpu.binary @zb_stage0_forward_kernel [#gpu.object<#nvvm.target<chip = "sm_90">
// CHECK-SAME: bin = "\7FELF
// The action table is a host global, which the step function's loop reads
// on the host (its compile time does not grow with P·M).
// CHECK: llvm.mlir.global private constant @zb_rank0_actions(dense<{{.*}}> : tensor<8x6xi64>)
// The step function allocates activations and stash on the device and sends
// device buffers.
// CHECK-LABEL: llvm.func @zb_rank0_step(
// CHECK: llvm.call @mgpuMemAlloc(
// CHECK: llvm.getelementptr %{{.*}}[0, 0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.array<8 x array<6 x i64>>
// CHECK: llvm.cond_br
// CHECK: llvm.call @zb_stage0_forward(
// CHECK: llvm.call @zbrt_send_f32(
// CHECK: llvm.call @mgpuMemFree(

// GPT-LABEL: llvm.func @zb_rank0_step(
// GPT-LABEL: llvm.func @zb_rank1_step(

// BF16: llvm.call @zbrt_gpu_sgemm_batched_bf16(

// V placements compile for NCCL too: --zb-insert-comm receives each link
// in its send order (test/Dialect/Sched/schedule-v.mlir shows the order).
// VGPU: llvm.func @zb_rank0_step(
// VGPU: llvm.call @zbrt_recv_f32
// VGPU: llvm.func @zb_rank1_step(
// VGPU: llvm.call @zbrt_recv_f32
// VNCCL: .so
// VNCCL-NEXT: .so

// TARGET: error: zb-pipeline: unknown target 'tpu'; known: cpu, gpu
// DTYPE: error: zb-pipeline: unknown dtype 'f16'; known: f32, bf16
