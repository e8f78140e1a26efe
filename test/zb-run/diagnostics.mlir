// Bad models get a diagnostic naming what is wrong, and a non-zero exit.
// RUN: split-file %s %t
// RUN: not zb-run %t/dynamic.mlir --eval 2>&1 | FileCheck %s --check-prefix=DYNAMIC
// RUN: not zb-run %t/unsupported.mlir --eval 2>&1 | FileCheck %s --check-prefix=OUTSIDE
// RUN: not zb-run %t/two.mlir --eval 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not zb-run %t/loss.mlir --eval 2>&1 | FileCheck %s --check-prefix=LOSS
// RUN: not zb-run %t/loss.mlir --eval --grads 2>&1 | FileCheck %s --check-prefix=MODES
// RUN: not zb-run %t/loss.mlir --np 2 --schedule nope 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not zb-run %t/loss.mlir --optimizer lamb 2>&1 | FileCheck %s --check-prefix=OPTIMIZER

// DYNAMIC: error: argument #0 ('arg0') has the dynamic shape 'tensor<?x4xf32>'; models need static shapes
// OUTSIDE: error: op 'memref.alloc' is not supported by the ZeroBubble backends
// TWO: error: the model must have one public function, but found 'a' and 'b'
// LOSS: error: model function 'f' must return one scalar loss of type tensor<f32> (or tensor<f64>), but returns 'tensor<4xf32>'
// MODES: zb-run: error: pass at most one of --eval and --grads
// SCHEDULE: zb-run: error: unknown --schedule 'nope'; known: gpipe, 1f1b
// OPTIMIZER: zb-run: error: unknown --optimizer 'lamb' (expected sgd or adamw)

//--- dynamic.mlir
func.func @f(%x: tensor<?x4xf32>) -> tensor<f32> {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

//--- unsupported.mlir
func.func @f(%x: tensor<4xf32>) -> tensor<f32> {
  %m = memref.alloc() : memref<4xf32>
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

//--- two.mlir
func.func @a(%x: tensor<4xf32>) -> tensor<f32> {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}
func.func @b(%x: tensor<4xf32>) -> tensor<f32> {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

//--- loss.mlir
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
