// RUN: zb-opt %s -split-input-file --zb-lower-running-stats | FileCheck %s
// RUN: zb-opt %s -split-input-file --zb-lower-running-stats="target=gpu" -verify-diagnostics -o /dev/null

// Each running statistic becomes a call that hands its value and the
// buffer's name (bytes of a private constant global, one per name) to the
// runtime; f64 values go to the f64 entry point.
// CHECK-DAG: memref.global "private" constant @__zb_running_stat{{.*}} : memref<7xi8> = dense<[98, 110, 46, 109, 101, 97, 110]>
// CHECK-DAG: memref.global "private" constant @__zb_running_stat{{.*}} : memref<6xi8> = dense<[98, 110, 46, 118, 97, 114]>
// CHECK-DAG: func.func private @zbrt_record_stat_f32(memref<*xf32>, memref<*xi8>) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @zbrt_record_stat_f64(memref<*xf64>, memref<*xi8>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @stats(
// CHECK-SAME: %[[M:.*]]: tensor<16xf32>, %[[V:.*]]: tensor<2x3xf64>)
// CHECK: %[[MB:.*]] = bufferization.to_buffer %[[M]] read_only : tensor<16xf32> to memref<16xf32, strided<[?], offset: ?>>
// CHECK: %[[MU:.*]] = memref.cast %[[MB]] : memref<16xf32, strided<[?], offset: ?>> to memref<*xf32>
// CHECK: %[[N:.*]] = memref.get_global @[[NAME:.*]] : memref<7xi8>
// CHECK: %[[NU:.*]] = memref.cast %[[N]] : memref<7xi8> to memref<*xi8>
// CHECK: call @zbrt_record_stat_f32(%[[MU]], %[[NU]]) : (memref<*xf32>, memref<*xi8>) -> ()
// CHECK: bufferization.to_buffer %[[V]] read_only : tensor<2x3xf64> to memref<2x3xf64, strided<[?, ?], offset: ?>>
// CHECK: call @zbrt_record_stat_f64(
// The same buffer recorded by a model and its gradient function: one name.
// CHECK-LABEL: func.func @stats_grad(
// CHECK: memref.get_global @[[NAME]] : memref<7xi8>
// CHECK-NOT: pipe.running_stat
func.func @stats(%m: tensor<16xf32>, %v: tensor<2x3xf64>) {
  // expected-error @+1 {{running statistic 'bn.mean' is not supported on target=gpu (only the CPU lowering keeps running statistics)}}
  pipe.running_stat %m {buffer = "bn.mean", momentum = 0.1 : f64} : tensor<16xf32>
  pipe.running_stat %v {buffer = "bn.var", init = 1.0 : f64, momentum = 0.1 : f64} : tensor<2x3xf64>
  return
}

func.func @stats_grad(%m: tensor<16xf32>) {
  pipe.running_stat %m {buffer = "bn.mean", momentum = 0.1 : f64} : tensor<16xf32>
  return
}
