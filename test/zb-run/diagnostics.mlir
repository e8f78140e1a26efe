// Bad models get a diagnostic naming what is wrong, and a non-zero exit.
// RUN: split-file %s %t
// RUN: not zb-run %t/dynamic.mlir --eval 2>&1 | FileCheck %s --check-prefix=DYNAMIC
// RUN: not zb-run %t/unsupported.mlir --eval 2>&1 | FileCheck %s --check-prefix=OUTSIDE
// RUN: not zb-run %t/two.mlir --eval 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not zb-run %t/loss.mlir --eval 2>&1 | FileCheck %s --check-prefix=LOSS
// RUN: not zb-run %t/loss.mlir --eval --grads 2>&1 | FileCheck %s --check-prefix=MODES
// RUN: not zb-run %t/loss.mlir --np 2 --schedule nope 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not zb-run %t/loss.mlir --optimizer lamb 2>&1 | FileCheck %s --check-prefix=OPTIMIZER
// RUN: not zb-run %t/stats.mlir --eval 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: not zb-run %t/stat-arg.mlir --eval 2>&1 | FileCheck %s --check-prefix=STATARG
// RUN: env ZB_SGEMM=fast not zb-run %t/loss.mlir --eval 2>&1 | FileCheck %s --check-prefix=SGEMM

// DYNAMIC: error: argument #0 ('arg0') has the dynamic shape 'tensor<?x4xf32>'; models need static shapes
// OUTSIDE: error: op 'memref.alloc' is not supported by the ZeroBubble backends
// TWO: error: the model must have one public function, but found 'a' and 'b'
// LOSS: error: model function 'f' must return one scalar loss of type tensor<f32> (or tensor<f64>), but returns 'tensor<4xf32>'
// MODES: zb-run: error: pass at most one of --eval and --grads
// SCHEDULE: zb-run: error: unknown --schedule 'nope'; known: gpipe, 1f1b
// OPTIMIZER: zb-run: error: unknown --optimizer 'lamb' (expected sgd or adamw)
// STATS: stats.mlir:4:3: error: running statistic 'bn.mean' is recorded twice
// STATS: stats.mlir:3:3: note: first recorded here
// STATARG: error: running statistic 'w' has the name of an argument
// SGEMM: zb-run: error: ZB_SGEMM must be 'zbrt' or 'openblas', got 'fast'

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

//--- stats.mlir
func.func @f(%x: tensor<4xf32>) -> tensor<f32> {
  %c = arith.constant dense<0.0> : tensor<f32>
  pipe.running_stat %x {buffer = "bn.mean", momentum = 0.1 : f64} : tensor<4xf32>
  pipe.running_stat %x {buffer = "bn.mean", momentum = 0.1 : f64} : tensor<4xf32>
  return %c : tensor<f32>
}

//--- stat-arg.mlir
func.func @f(%x: tensor<4xf32>, %w: tensor<4xf32> {zb.param = "w"}) -> tensor<f32> {
  %c = arith.constant dense<0.0> : tensor<f32>
  pipe.running_stat %x {buffer = "w", momentum = 0.1 : f64} : tensor<4xf32>
  return %c : tensor<f32>
}
