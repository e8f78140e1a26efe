// RUN: zb-opt %s --zb-partition-stages="stages=3" --zb-autodiff --zb-split-backward --zb-schedule="schedule=zb-h1 microbatches=2" --zb-insert-comm --zb-lower-to-runtime | FileCheck %s
// RUN: zb-opt %s --zb-partition-stages="stages=3" --zb-autodiff --zb-split-backward --zb-schedule="schedule=zb-h1 microbatches=2 replicas=2" --zb-insert-comm --zb-lower-to-runtime | FileCheck %s --check-prefix=DP

// The gradients of f64 parameters are summed in f64: a tied f64 weight
// read by stages 0 and 2 is summed between ranks 0 and 2 by the runtime's
// f64 group sum, and with replicas every f64 parameter is averaged by its
// f64 replica mean. Only the element types the reduced parameters have are
// declared.

// CHECK:        func.func private @zbrt_group_sum_f64(memref<*xf64>, memref<*xi64>) attributes {llvm.emit_c_interface}
// CHECK-NOT:    zbrt_group_sum_f32
// CHECK-LABEL:  func.func @zb_rank0_step
// CHECK:          memref.get_global @zb_rank0_group0
// CHECK-NEXT:     %[[GROUP:.*]] = memref.cast
// CHECK-NEXT:     %[[BUF:.*]] = memref.cast %{{.*}} : memref<4xf64> to memref<*xf64>
// CHECK-NEXT:     func.call @zbrt_group_sum_f64(%[[BUF]], %[[GROUP]])
// CHECK:          call @zbrt_wait_group_sums()
// CHECK-LABEL:  func.func @zb_rank1_step
// CHECK-NOT:      zbrt_group_sum
// CHECK-LABEL:  func.func @zb_rank2_step
// CHECK:          func.call @zbrt_group_sum_f64

// DP:           func.func private @zbrt_replica_mean_f64(memref<*xf64>, memref<*xi64>) attributes {llvm.emit_c_interface}
// DP-NOT:       zbrt_replica_mean_f32
// DP-LABEL:     func.func @zb_rank1_step
// DP:             func.call @zbrt_replica_mean_f64
// DP:             call @zbrt_wait_group_sums()
func.func @shared(%x: tensor<4xf64>, %w: tensor<4xf64> {zb.param = "tied"}, %v: tensor<4xf64> {zb.param = "v"}) -> tensor<f64> {
  %e = tensor.empty() : tensor<4xf64>
  %a = linalg.mul ins(%x, %w : tensor<4xf64>, tensor<4xf64>) outs(%e : tensor<4xf64>) -> tensor<4xf64>
  %h0 = pipe.cut %a : tensor<4xf64>
  %b = linalg.mul ins(%h0, %v : tensor<4xf64>, tensor<4xf64>) outs(%e : tensor<4xf64>) -> tensor<4xf64>
  %h1 = pipe.cut %b : tensor<4xf64>
  %c = linalg.mul ins(%h1, %w : tensor<4xf64>, tensor<4xf64>) outs(%e : tensor<4xf64>) -> tensor<4xf64>
  %z = arith.constant dense<0.0> : tensor<f64>
  %l = linalg.reduce ins(%c : tensor<4xf64>) outs(%z : tensor<f64>) dimensions = [0]
    (%in: f64, %acc: f64) {
      %s = arith.addf %in, %acc : f64
      linalg.yield %s : f64
    }
  return %l : tensor<f64>
}
