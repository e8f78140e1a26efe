// --zb-emit-optimizer: each step function gets its rank's update, a public
// function that applies the optimizer to the parameters (the step's first
// arguments, named by zb.params) in place, in f64 rounded once.
// RUN: zb-opt %s --zb-emit-optimizer=kind=sgd | FileCheck %s --check-prefix=SGD
// RUN: zb-opt %s --zb-emit-optimizer=kind=sgd-momentum | FileCheck %s --check-prefix=MOM
// RUN: zb-opt %s --zb-emit-optimizer=kind=adamw | FileCheck %s --check-prefix=ADAM
// On the CPU the updates bufferize into the arguments: no results, no copies.
// RUN: zb-opt %s --zb-emit-optimizer=kind=adamw --zb-lower-to-cpu --mlir-print-ir-after=zb-deallocate-buffers -o /dev/null 2>&1 | FileCheck %s --check-prefix=INPLACE
// RUN: zb-opt %s --zb-emit-optimizer=kind=adamw --zb-lower-to-cpu | FileCheck %s --check-prefix=LLVM
// RUN: not zb-opt %s --zb-emit-optimizer=kind=lamb 2>&1 | FileCheck %s --check-prefix=KIND

func.func @zb_rank0_step(%w: tensor<2x3xf32>, %b: tensor<3xf64>, %x: tensor<4xf32>) -> tensor<f32>
    attributes {zb.rank = 0 : i64, zb.params = ["w", "b"]} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

func.func @zb_rank1_step(%s: tensor<f32>) -> tensor<f32>
    attributes {zb.rank = 1 : i64, zb.params = ["s"]} {
  return %s : tensor<f32>
}

// params, grads, then the 13 hyper-parameters (CompiledOptimizer.h).
// SGD-LABEL: func.func @zb_rank0_update(
// SGD-SAME: %[[W:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf64>, %[[GW:.*]]: tensor<2x3xf32>, %[[GB:.*]]: tensor<3xf64>, %[[H:.*]]: tensor<13xf64>) -> (tensor<2x3xf32>, tensor<3xf64>)
// SGD-SAME: zb.optimizer = "sgd", zb.params = ["w", "b"], zb.rank = 0
// The hyper-parameters are read inside the update (lr, clip scale, weight
// decay: entries 0, 1, 2), so that on the GPU the kernels read them.
// SGD: linalg.generic {indexing_maps = [#{{.*}}, #[[LR:.*]], #[[CLIP:.*]], #[[WD:.*]], #{{.*}}]
// SGD-SAME: ins(%[[GW]], %[[H]], %[[H]], %[[H]] : {{.*}}) outs(%[[W]] : tensor<2x3xf32>)
// The f32 gradient times the clip scale rounded to f32, then
// p - lr * (g + wd * p) in f64, rounded once.
// SGD: ^bb0(%[[G:.*]]: f32, %[[LRV:.*]]: f64, %[[CV:.*]]: f64, %[[WDV:.*]]: f64, %[[P:.*]]: f32):
// SGD: %[[C32:.*]] = arith.truncf %[[CV]] : f64 to f32
// SGD: %[[GS:.*]] = arith.mulf %[[G]], %[[C32]] : f32
// SGD: %[[G64:.*]] = arith.extf %[[GS]] : f32 to f64
// SGD: %[[P64:.*]] = arith.extf %[[P]] : f32 to f64
// SGD: %[[WP:.*]] = arith.mulf %[[WDV]], %[[P64]] : f64
// SGD: %[[D:.*]] = arith.addf %[[G64]], %[[WP]] : f64
// SGD: %[[STEP:.*]] = arith.mulf %[[LRV]], %[[D]] : f64
// SGD: %[[NEW:.*]] = arith.subf %[[P64]], %[[STEP]] : f64
// SGD: %[[R:.*]] = arith.truncf %[[NEW]] : f64 to f32
// SGD: linalg.yield %[[R]] : f32
// f64 parameters need no conversions.
// SGD: ins(%[[GB]], %[[H]], %[[H]], %[[H]] : {{.*}}) outs(%[[B]] : tensor<3xf64>)
// SGD-NOT: arith.extf
// SGD: return
// SGD-LABEL: func.func @zb_rank1_update(
// SGD-SAME: tensor<f32>, %{{.*}}: tensor<f32>, %{{.*}}: tensor<13xf64>) -> tensor<f32>
// SGD-SAME: zb.rank = 1

// The momentum buffers follow the gradients; on the first step (entry 4)
// the buffer starts as the gradient.
// MOM-LABEL: func.func @zb_rank0_update(
// MOM-SAME: %{{.*}}: tensor<13xf64>) -> (tensor<2x3xf32>, tensor<3xf64>, tensor<2x3xf32>, tensor<3xf64>)
// MOM: arith.cmpf one
// MOM: %[[LATER:.*]] = arith.addf
// MOM: %[[D:.*]] = arith.select %{{.*}}, %{{.*}}, %[[LATER]] : f64
// MOM: %[[BUF:.*]] = arith.truncf %[[D]] : f64 to f32
// MOM: linalg.yield %{{.*}}, %[[BUF]] : f32, f32

// AdamW: first and second moments; sqrt of the corrected second moment.
// ADAM-LABEL: func.func @zb_rank0_update(
// ADAM-SAME: -> (tensor<2x3xf32>, tensor<3xf64>, tensor<2x3xf32>, tensor<3xf64>, tensor<2x3xf32>, tensor<3xf64>)
// ADAM-SAME: zb.optimizer = "adamw"
// ADAM: math.sqrt %{{.*}} : f64
// ADAM: linalg.yield %{{.*}}, %{{.*}}, %{{.*}} : f32, f32, f32

// INPLACE-LABEL: func.func @zb_rank0_update(
// INPLACE-SAME: %[[W:.*]]: memref<2x3xf32>, %{{.*}}: memref<3xf64>, %{{.*}}: memref<2x3xf32>, %{{.*}}: memref<3xf64>, %[[M:.*]]: memref<2x3xf32>, %{{.*}}: memref<3xf64>, %[[V:.*]]: memref<2x3xf32>, %{{.*}}: memref<3xf64>, %{{.*}}: memref<13xf64>) attributes
// INPLACE: outs(%[[W]], %[[M]], %[[V]] : memref<2x3xf32>, memref<2x3xf32>, memref<2x3xf32>)
// INPLACE-NOT: memref.copy
// INPLACE-NOT: memref.alloc
// INPLACE: return
// INPLACE-NEXT: }

// LLVM: llvm.func @_mlir_ciface_zb_rank0_update(
// LLVM: llvm.func @_mlir_ciface_zb_rank1_update(

// KIND: unknown optimizer 'lamb'; known: sgd, sgd-momentum, adamw
