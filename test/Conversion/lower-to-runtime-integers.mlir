// RUN: zb-opt %zb_src_root/examples/moe.mlir --zb-strip-cuts --zb-pipeline="stages=2 microbatches=2 schedule=1f1b lower-to-cpu=false" | FileCheck %s

// A stage may hand the next one integers: here the cost model cuts the
// mixture-of-experts example after its router, so rank 0 sends each
// sample's expert (i64) with the activations and rank 1 receives it (the
// runtime's zbrt_send_i64 / zbrt_recv_i64). No gradient flows through an
// integer: the backward neither sends nor receives one (the stage before
// takes a zero for it), only the two float inputs' gradients.
// CHECK-DAG: func.func private @zbrt_send_i64(memref<*xi64>, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @zbrt_recv_i64(memref<*xi64>, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @zb_rank0_step
// CHECK-SAME: zb.params = ["l1.weight", "l1.bias", "router.weight"]
// CHECK: call @zbrt_send_f32(
// CHECK: call @zbrt_send_i64(%{{.*}}, %[[PEER:c1_i64[_0-9]*]], %[[CHANNEL:c0_i64[_0-9]*]])
// CHECK: call @zbrt_send_f32(
// CHECK-NOT: call @zbrt_recv_i64(
// CHECK: call @zbrt_recv_f32(
// CHECK-NOT: call @zbrt_recv_i64(
// CHECK: call @zbrt_recv_f32(
// CHECK-NOT: call @zbrt_recv_i64(
// CHECK-LABEL: func.func @zb_rank1_step
// CHECK-SAME: zb.params = ["experts.up", "experts.down", "head.weight", "head.bias"]
// CHECK: call @zbrt_recv_i64(
// CHECK-NOT: call @zbrt_send_i64(
// CHECK: call @zbrt_send_f32(
// CHECK-NOT: call @zbrt_send_i64(
// CHECK: call @zbrt_send_f32(
// CHECK-NOT: call @zbrt_send_i64(
