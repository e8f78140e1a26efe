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
// RUN: not zb-opt %zb_src_root/examples/mlp.mlir --zb-strip-cuts --zb-pipeline="stages=2 microbatches=4 schedule=zb-v target=gpu" 2>&1 | FileCheck %s --check-prefix=LINKS
// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-strip-cuts --zb-pipeline="stages=2 microbatches=4 schedule=zb-v" -o /dev/null
// RUN: not zb-run %zb_src_root/examples/mlp.mlir --np 2 --schedule zb-v --microbatches 4 --backend nccl --compile-only 2>&1 | FileCheck %s --check-prefix=LINKS
// RUN: not zb-opt %zb_src_root/examples/mlp.mlir --zb-pipeline="target=tpu" 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not zb-opt %zb_src_root/examples/mlp.mlir --zb-pipeline="target=gpu dtype=f16" 2>&1 | FileCheck %s --check-prefix=DTYPE

// CHECK-DAG: llvm.func @zbrt_gpu_sgemm_batched(i32, i32, i64, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64)
// CHECK-DAG: llvm.func @_mlir_ciface_zbrt_send_f32(!llvm.ptr, i64, i64)
// CHECK-DAG: llvm.func @_mlir_ciface_zbrt_recv_f32(!llvm.ptr, i64, i64)
// CHECK-LABEL: llvm.func internal @zb_stage0_forward(
// CHECK: gpu.launch_func
// CHECK: llvm.call @zbrt_gpu_sgemm_batched(
// Each kernel is embedded as a cubin for sm_90.
// CHECK: gpu.binary @zb_stage0_forward_kernel [#gpu.object<#nvvm.target<chip = "sm_90">
// CHECK-SAME: bin = "\7FELF
// The step function allocates activations and stash on the device and sends
// device buffers.
// CHECK-LABEL: llvm.func @zb_rank0_step(
// CHECK: llvm.call @mgpuMemAlloc(
// CHECK: llvm.call @zb_stage0_forward(
// CHECK: llvm.call @zbrt_send_f32(
// CHECK: llvm.call @mgpuMemFree(

// GPT-LABEL: llvm.func @zb_rank0_step(
// GPT-LABEL: llvm.func @zb_rank1_step(

// BF16: llvm.call @zbrt_gpu_sgemm_batched_bf16(

// LINKS: cannot insert transfers for a transport that matches them per link in order (NCCL): rank 0 sends 'send F stage 0 microbatch {{[0-9]+}} to 1' {{[0-9]+}}{{st|nd|rd|th}} to rank 1, which receives 'recv B stage 3 microbatch {{[0-9]+}} from 0' {{[0-9]+}}{{st|nd|rd|th}}; use a schedule without a V placement, or MPI

// TARGET: error: zb-pipeline: unknown target 'tpu'; known: cpu, gpu
// DTYPE: error: zb-pipeline: unknown dtype 'f16'; known: f32, bf16
