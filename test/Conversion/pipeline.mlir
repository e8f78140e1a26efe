// The registered end-to-end pipeline on the GPT example (markers stripped,
// so the cost model cuts it): P=8 ranks, M=32 microbatches, every schedule.
// Each run must finish with eight rank step functions, every stage of the
// schedule's chunk count (1: 8 stages, 2: 16 stages) lowered to
// F/B/W functions, and the stages placed on the schedule's ranks (loop for
// interleaved-1f1b, V for zb-v, v-half, v-min, dualpipev). Each step function loops
// over its rank's action table; the loss stage's backward, one template for
// all 32 microbatches, is seeded with 1/M = 1/32 (one seed on its rank).
//
// RUN: zb-opt %zb_src_root/examples/gpt.mlir --zb-strip-cuts --zb-pipeline="stages=8 microbatches=32 schedule=gpipe lower-to-cpu=false" | FileCheck %s --check-prefixes=CHECK,ONE
// RUN: zb-opt %zb_src_root/examples/gpt.mlir --zb-strip-cuts --zb-pipeline="stages=8 microbatches=32 schedule=1f1b lower-to-cpu=false" | FileCheck %s --check-prefixes=CHECK,ONE
// RUN: zb-opt %zb_src_root/examples/gpt.mlir --zb-strip-cuts --zb-pipeline="stages=8 microbatches=32 schedule=interleaved-1f1b lower-to-cpu=false" | FileCheck %s --check-prefixes=CHECK,TWO,LOOP
// RUN: zb-opt %zb_src_root/examples/gpt.mlir --zb-strip-cuts --zb-pipeline="stages=8 microbatches=32 schedule=zb-h1 lower-to-cpu=false" | FileCheck %s --check-prefixes=CHECK,ONE
// RUN: zb-opt %zb_src_root/examples/gpt.mlir --zb-strip-cuts --zb-pipeline="stages=8 microbatches=32 schedule=zb-h2 lower-to-cpu=false" | FileCheck %s --check-prefixes=CHECK,ONE
// RUN: zb-opt %zb_src_root/examples/gpt.mlir --zb-strip-cuts --zb-pipeline="stages=8 microbatches=32 schedule=zb-auto lower-to-cpu=false" | FileCheck %s --check-prefixes=CHECK,ONE
// RUN: zb-opt %zb_src_root/examples/gpt.mlir --zb-strip-cuts --zb-pipeline="stages=8 microbatches=32 schedule=zb-v lower-to-cpu=false" | FileCheck %s --check-prefixes=CHECK,TWO,V
// RUN: zb-opt %zb_src_root/examples/gpt.mlir --zb-strip-cuts --zb-pipeline="stages=8 microbatches=32 schedule=v-half lower-to-cpu=false" | FileCheck %s --check-prefixes=CHECK,TWO,V
// RUN: zb-opt %zb_src_root/examples/gpt.mlir --zb-strip-cuts --zb-pipeline="stages=8 microbatches=32 schedule=v-min lower-to-cpu=false" | FileCheck %s --check-prefixes=CHECK,TWO,V
//
// unroll=true keeps every action inline (the GPU's form): no action table,
// one call per microbatch.
// RUN: zb-opt %zb_src_root/examples/gpt.mlir --zb-strip-cuts --zb-pipeline="stages=2 microbatches=4 schedule=zb-h1 unroll=true lower-to-cpu=false" | FileCheck %s --check-prefix=UNROLL
// UNROLL-NOT: memref.global
// UNROLL-LABEL: func.func @zb_rank0_step(
// UNROLL-NOT: zb.arena_bytes
// UNROLL-COUNT-4: call @zb_stage0_forward(
// UNROLL-NOT: call @zb_stage0_forward(
// UNROLL-LABEL: func.func @zb_rank1_step(
//
// dtype=bf16 keeps the stages' stashes in bf16 (--zb-narrow-stash, right
// after the split): the stage table plans with the smaller stashes (stage
// 0's input data stays f32) and the arenas shrink.
// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-pipeline="stages=2 microbatches=2 schedule=zb-h1 lower-to-cpu=false" | FileCheck %s --check-prefix=F32
// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-pipeline="stages=2 microbatches=2 schedule=zb-h1 dtype=bf16 lower-to-cpu=false" | FileCheck %s --check-prefix=BF16
// F32: mem_b = array<i64: 1536, 3520>, mem_w = array<i64: 2560, 3392>
// F32: func.func private @zb_stage0_forward({{.*}}) -> (tensor<8x32xf32>, tensor<8x32xf32>)
// F32: func.func @zb_rank1_step({{.*}}zb.arena_bytes = 9280
// BF16: mem_b = array<i64: 1024, 1792>, mem_w = array<i64: 1536, 1696>
// BF16: func.func private @zb_stage0_forward({{.*}}) -> (tensor<8x32xf32>, tensor<8x32xbf16>)
// BF16: arith.truncf %{{.*}} : f32 to bf16
// BF16: func.func @zb_rank1_step({{.*}}zb.arena_bytes = 5312
//
// With the default lower-to-cpu the same pipeline ends in the LLVM dialect,
// with the C interface the runtime calls for every rank.
// RUN: zb-opt %zb_src_root/examples/gpt.mlir --zb-strip-cuts --zb-pipeline="stages=2 microbatches=4 schedule=zb-h1" | FileCheck %s --check-prefix=CPU

// CHECK-NOT: func.func @gpt(
// CHECK-NOT: sched.program
// CHECK: func.func private @zb_stage0_forward(
// CHECK: func.func private @zb_stage0_backward_input(
// CHECK: func.func private @zb_stage0_backward_weight_acc(
// ONE: func.func private @zb_stage7_backward_weight_acc(
// ONE-NOT: @zb_stage8_
// TWO: func.func private @zb_stage15_backward_weight_acc(
// TWO-NOT: @zb_stage16_
// CHECK-LABEL: func.func @zb_rank0_step(
// CHECK-SAME: attributes {zb.arena_bytes = {{[0-9]+}} : i64, zb.microbatches = 32 : i64, zb.params = [{{.*}}], zb.rank = 0 : i64}
// ONE-NOT: call @zb_stage{{[1-9][0-9]*}}_
// ONE: call @zb_stage0_forward(
// ONE: call @zb_stage0_backward_weight_acc(
// ONE-NOT: call @zb_stage{{[1-9][0-9]*}}_
// LOOP: call @zb_stage0_forward(
// LOOP: call @zb_stage8_forward(
// V: call @zb_stage0_forward(
// V: call @zb_stage15_forward(
// V: arith.constant dense<3.125000e-02> : tensor<f32>
// V-NOT: arith.constant dense<3.125000e-02>
// CHECK-LABEL: func.func @zb_rank1_step(
// CHECK-SAME: attributes {zb.arena_bytes = {{[0-9]+}} : i64, zb.microbatches = 32 : i64, zb.params = [{{.*}}], zb.rank = 1 : i64}
// ONE: call @zb_stage1_forward(
// LOOP: call @zb_stage1_forward(
// LOOP: call @zb_stage9_forward(
// V: call @zb_stage1_forward(
// V: call @zb_stage14_forward(
// CHECK-LABEL: func.func @zb_rank2_step(
// CHECK-SAME: attributes {zb.arena_bytes = {{[0-9]+}} : i64, zb.microbatches = 32 : i64, zb.params = [{{.*}}], zb.rank = 2 : i64}
// ONE: call @zb_stage2_forward(
// LOOP: call @zb_stage2_forward(
// LOOP: call @zb_stage10_forward(
// V: call @zb_stage2_forward(
// V: call @zb_stage13_forward(
// CHECK-LABEL: func.func @zb_rank3_step(
// CHECK-SAME: attributes {zb.arena_bytes = {{[0-9]+}} : i64, zb.microbatches = 32 : i64, zb.params = [{{.*}}], zb.rank = 3 : i64}
// ONE: call @zb_stage3_forward(
// LOOP: call @zb_stage3_forward(
// LOOP: call @zb_stage11_forward(
// V: call @zb_stage3_forward(
// V: call @zb_stage12_forward(
// CHECK-LABEL: func.func @zb_rank4_step(
// CHECK-SAME: attributes {zb.arena_bytes = {{[0-9]+}} : i64, zb.microbatches = 32 : i64, zb.params = [{{.*}}], zb.rank = 4 : i64}
// ONE: call @zb_stage4_forward(
// LOOP: call @zb_stage4_forward(
// LOOP: call @zb_stage12_forward(
// V: call @zb_stage4_forward(
// V: call @zb_stage11_forward(
// CHECK-LABEL: func.func @zb_rank5_step(
// CHECK-SAME: attributes {zb.arena_bytes = {{[0-9]+}} : i64, zb.microbatches = 32 : i64, zb.params = [{{.*}}], zb.rank = 5 : i64}
// ONE: call @zb_stage5_forward(
// LOOP: call @zb_stage5_forward(
// LOOP: call @zb_stage13_forward(
// V: call @zb_stage5_forward(
// V: call @zb_stage10_forward(
// CHECK-LABEL: func.func @zb_rank6_step(
// CHECK-SAME: attributes {zb.arena_bytes = {{[0-9]+}} : i64, zb.microbatches = 32 : i64, zb.params = [{{.*}}], zb.rank = 6 : i64}
// ONE: call @zb_stage6_forward(
// LOOP: call @zb_stage6_forward(
// LOOP: call @zb_stage14_forward(
// V: call @zb_stage6_forward(
// V: call @zb_stage9_forward(
// CHECK-LABEL: func.func @zb_rank7_step(
// CHECK-SAME: attributes {zb.arena_bytes = {{[0-9]+}} : i64, zb.microbatches = 32 : i64, zb.params = [{{.*}}], zb.rank = 7 : i64}
// ONE-NOT: call @zb_stage{{[0-68-9]}}_
// ONE: arith.constant dense<3.125000e-02> : tensor<f32>
// ONE-NOT: arith.constant dense<3.125000e-02>
// ONE-NOT: call @zb_stage{{[0-68-9]}}_
// LOOP: call @zb_stage7_forward(
// LOOP: call @zb_stage15_forward(
// LOOP: arith.constant dense<3.125000e-02> : tensor<f32>
// LOOP-NOT: arith.constant dense<3.125000e-02>
// V: call @zb_stage7_forward(
// V: call @zb_stage8_forward(
// CHECK-NOT: func.func @zb_rank8_step(
// CHECK-NOT: sched.program

// CPU-NOT: func.func
// CPU-DAG: llvm.func @_mlir_ciface_zb_rank0_step(
// CPU-DAG: llvm.func @_mlir_ciface_zb_rank1_step(
// CPU-DAG: llvm.func @_mlir_ciface_zbrt_send_f32(
// CPU-DAG: llvm.func @_mlir_ciface_zbrt_recv_f32(
// CPU-DAG: llvm.call @zbrt_sgemm_batched(
// CPU-NOT: func.func
