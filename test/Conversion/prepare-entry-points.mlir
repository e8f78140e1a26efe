// RUN: zb-opt %s --zb-prepare-entry-points | FileCheck %s

// Public functions get a C entry and read-only tensor arguments.
// CHECK-LABEL: func.func @model
// CHECK-SAME: (%{{.*}}: tensor<4xf32> {bufferization.writable = false, zb.param = "w"}, %{{.*}}: i64)
// CHECK-SAME: attributes {llvm.emit_c_interface}
func.func @model(%w: tensor<4xf32> {zb.param = "w"}, %n: i64) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// A gradient function's sums (zb.grad_sums: its last arguments) stay
// writable: it adds into the caller's buffers.
// CHECK-LABEL: func.func @model_grad_acc
// CHECK-SAME: (%{{.*}}: tensor<4xf32> {bufferization.writable = false, zb.param = "w"}, %{{.*}}: tensor<4xf32>)
// CHECK-SAME: attributes {llvm.emit_c_interface, zb.grad_sums = 1 : i64}
func.func @model_grad_acc(%w: tensor<4xf32> {zb.param = "w"}, %sum: tensor<4xf32>) -> tensor<4xf32> attributes {zb.grad_sums = 1} {
  return %sum : tensor<4xf32>
}

// Private helpers get internal linkage and no C entry; their arguments
// stay writable.
// CHECK-LABEL: func.func private @helper
// CHECK-SAME: attributes {llvm.linkage = #llvm.linkage<internal>}
// CHECK-NOT: emit_c_interface
// CHECK-NOT: bufferization.writable
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// Declarations (the runtime's functions) are left alone.
// CHECK-LABEL: func.func private @zbrt_function(tensor<4xf32>)
// CHECK-NOT: llvm.linkage
func.func private @zbrt_function(tensor<4xf32>)
