// A bad --zb-pipeline option value is a diagnostic naming the option and
// what is known, not a crash with a stack dump.
// RUN: not zb-opt %s --zb-pipeline="stages=2 microbatches=4 schedule=zz" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not zb-opt %s --zb-pipeline="stages=2 microbatches=4 target=tpu" 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not zb-opt %s --zb-pipeline="stages=2 microbatches=4 dtype=f16" 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not zb-opt %s --zb-pipeline="stages=2 microbatches=4 optimizer=lamb" 2>&1 | FileCheck %s --check-prefix=OPTIMIZER
// RUN: not zb-opt %s --zb-pipeline="stages=2 microbatches=4 schedule=zb-v chunks=3" 2>&1 | FileCheck %s --check-prefix=CHUNKS
// RUN: not zb-opt %s --pass-pipeline="builtin.module(zb-pipeline{stages=2 microbatches=4 schedule=zz})" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not zb-opt %s --zb-pipeline="stages=2 microbatches=3000000000" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not zb-opt %s --zb-pipeline="stages=2 microbatches=1000001" 2>&1 | FileCheck %s --check-prefix=COUNT-LIMIT
// RUN: not zb-opt %s --zb-pipeline="stages=2 microbatches=4 mem-limit=nan" 2>&1 | FileCheck %s --check-prefix=MEMLIMIT
// RUN: not zb-opt %s --zb-pipeline="stages=2 microbatches=4 mem-limit=-1" 2>&1 | FileCheck %s --check-prefix=MEMLIMIT-NEG
// One rank holds both chunks of a V schedule: the stages fit either
// placement and take the schedule's own (they used to be read as loop).
// RUN: zb-opt %s --zb-pipeline="stages=1 schedule=zb-v microbatches=2 lower-to-cpu=false" | FileCheck %s --check-prefix=ONE-RANK-V
// RUN: not zb-opt %s --zb-pipeline="stages=2 microbatches=4 replicas=4294967297" 2>&1 | FileCheck %s --check-prefix=REPLICAS

// SCHEDULE: error: zb-pipeline: unknown schedule 'zz'; known: gpipe, 1f1b,
// SCHEDULE-NOT: Stack dump
// TARGET: error: zb-pipeline: unknown target 'tpu'; known: cpu, gpu
// DTYPE: error: zb-pipeline: unknown dtype 'f16'; known: f32, bf16
// OPTIMIZER: error: zb-pipeline: unknown optimizer 'lamb'; known: sgd, sgd-momentum, adamw
// CHUNKS: error: zb-pipeline: schedule 'zb-v' needs 2 chunks per rank
// ONE-RANK-V: func.func @zb_rank0_step({{.*}}zb.params = ["arg0"], zb.rank = 0
// COUNT: error: zb-pipeline: 'microbatches' of 3000000000 is past the limit of 1000000
// COUNT-LIMIT: error: zb-pipeline: 'microbatches' of 1000001 is past the limit of 1000000
// Before any pass runs: no IR printed.
// MEMLIMIT-NOT: func.func
// MEMLIMIT: error: zb-pipeline: mem-limit must be a finite number, 0 (no limit) or more, got nan
// MEMLIMIT-NEG: error: zb-pipeline: mem-limit must be a finite number, 0 (no limit) or more, got -1
// REPLICAS: error: zb-pipeline: 'replicas' of 4294967297 is past the limit of 2147483647

func.func @model(%w: tensor<4x4xf32> {zb.param}, %x: tensor<2x4xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<2x4xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x4xf32>) outs(%fill : tensor<2x4xf32>) -> tensor<2x4xf32>
  %s0 = tensor.empty() : tensor<f32>
  %s = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %r = linalg.reduce ins(%y : tensor<2x4xf32>) outs(%s : tensor<f32>) dimensions = [0, 1]
    (%a: f32, %b: f32) { %c = arith.addf %a, %b : f32
      linalg.yield %c : f32 }
  return %r : tensor<f32>
}
