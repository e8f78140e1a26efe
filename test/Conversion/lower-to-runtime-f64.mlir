// RUN: zb-opt %s --zb-pipeline="stages=2 microbatches=2 schedule=1f1b lower-to-cpu=false" | FileCheck %s
// RUN: zb-opt %s --zb-pipeline="stages=2 microbatches=2 schedule=1f1b" -o /dev/null

// An f64 model pipelined: its activations and input gradients go through
// zbrt_send_f64/zbrt_recv_f64 (declared only for programs that move f64
// values), and the step function sums the microbatches' f64 losses in f64
// and returns their mean as the model's tensor<f64>.

// CHECK-DAG: func.func private @zbrt_send_f64(memref<*xf64>, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @zbrt_recv_f64(memref<*xf64>, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @zb_rank0_step(
// CHECK-SAME: -> (tensor<f64>, tensor<4x4xf64>)
// CHECK: func.call @zbrt_send_f64(%{{.*}}, %c1_i64, %c0_i64) : (memref<*xf64>, i64, i64) -> ()
// CHECK: func.call @zbrt_recv_f64(%{{.*}}, %c1_i64, %c1_i64{{.*}}) : (memref<*xf64>, i64, i64) -> ()
// CHECK-LABEL: func.func @zb_rank1_step(
// CHECK-SAME: -> (tensor<f64>, tensor<4x4xf64>)
// CHECK-NOT: arith.truncf
// CHECK: func.call @zbrt_recv_f64(
// CHECK: arith.addf %{{.*}} : f64
// CHECK: func.call @zbrt_send_f64(
// CHECK: arith.constant 5.000000e-01 : f64
// CHECK: arith.mulf %{{.*}} : f64


#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
func.func @tiny(%x: tensor<2x4xf64>, %t: tensor<2x4xf64>, %w0: tensor<4x4xf64> {zb.param = "w0"}, %w1: tensor<4x4xf64> {zb.param = "w1"}) -> tensor<f64> {
  %zero = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<2x4xf64>
  %z = linalg.fill ins(%zero : f64) outs(%e : tensor<2x4xf64>) -> tensor<2x4xf64>
  %a = linalg.matmul ins(%x, %w0 : tensor<2x4xf64>, tensor<4x4xf64>) outs(%z : tensor<2x4xf64>) -> tensor<2x4xf64>
  %h = pipe.cut %a : tensor<2x4xf64>
  %b = linalg.matmul ins(%h, %w1 : tensor<2x4xf64>, tensor<4x4xf64>) outs(%z : tensor<2x4xf64>) -> tensor<2x4xf64>
  %el = tensor.empty() : tensor<f64>
  %l0 = linalg.fill ins(%zero : f64) outs(%el : tensor<f64>) -> tensor<f64>
  %loss = linalg.generic {indexing_maps = [#id, #id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%b, %t : tensor<2x4xf64>, tensor<2x4xf64>) outs(%l0 : tensor<f64>) {
  ^bb0(%p: f64, %q: f64, %acc: f64):
    %d = arith.subf %p, %q : f64
    %m = arith.mulf %d, %d : f64
    %s = arith.addf %acc, %m : f64
    linalg.yield %s : f64
  } -> tensor<f64>
  return %loss : tensor<f64>
}
