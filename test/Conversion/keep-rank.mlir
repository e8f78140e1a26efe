// RUN: zb-opt %zb_src_root/examples/mlp.mlir --zb-strip-cuts --zb-pipeline="stages=2 microbatches=2 schedule=1f1b lower-to-cpu=false" --zb-keep-rank=rank=1 | FileCheck %s
// RUN: not zb-opt %zb_src_root/examples/mlp.mlir --zb-strip-cuts --zb-pipeline="stages=2 microbatches=2 schedule=1f1b lower-to-cpu=false" --zb-keep-rank=rank=2 2>&1 | FileCheck %s --check-prefix=ERR

// Rank 1's step function, its stage's functions and its action table stay;
// rank 0's and everything only it uses go.
// CHECK-NOT: @zb_rank0_
// CHECK-NOT: @zb_stage0_
// CHECK-DAG: memref.global "private" constant @zb_rank1_actions
// CHECK-DAG: func.func private @zb_stage1_forward(
// CHECK-DAG: func.func private @zb_stage1_backward_input(
// CHECK-DAG: func.func private @zb_stage1_backward_weight_acc(
// CHECK-DAG: func.func private @zbrt_recv_f32(
// CHECK-DAG: func.func @zb_rank1_step(
// CHECK-NOT: @zb_rank0_
// CHECK-NOT: @zb_stage0_

// ERR: error: --zb-keep-rank: no step function for rank 2 (see --zb-lower-to-runtime)
