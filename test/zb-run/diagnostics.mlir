// Bad models get a diagnostic naming what is wrong, and a non-zero exit.
// RUN: split-file %s %t
// RUN: not zb-run %t/dynamic.mlir --eval 2>&1 | FileCheck %s --check-prefix=DYNAMIC
// RUN: not zb-run %t/unsupported.mlir --eval 2>&1 | FileCheck %s --check-prefix=OUTSIDE
// RUN: not zb-run %t/two.mlir --eval 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not zb-run %t/loss.mlir --eval 2>&1 | FileCheck %s --check-prefix=LOSS
// RUN: not zb-run %t/loss.mlir --eval --grads 2>&1 | FileCheck %s --check-prefix=MODES
// RUN: not zb-run %t/loss.mlir --np 2 --schedule nope 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not zb-run %t/loss.mlir --optimizer lamb 2>&1 | FileCheck %s --check-prefix=OPTIMIZER
// RUN: not zb-run %t/loss.mlir --optimizer sgd-momentum --momentum 1.5 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// RUN: not zb-run %t/loss.mlir --momentum 0.5 2>&1 | FileCheck %s --check-prefix=MOMENTUM-SGD
// RUN: not zb-run %t/stats.mlir --eval 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: not zb-run %t/stat-arg.mlir --eval 2>&1 | FileCheck %s --check-prefix=STATARG
// RUN: not zb-run %t/range.mlir --eval 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not zb-opt %t/range.mlir --zb-pipeline="stages=2 microbatches=2" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not zb-opt %t/huge.mlir --zb-pipeline="stages=2 microbatches=2" 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: zb-run %t/range-fits.mlir --eval | FileCheck %s --check-prefix=FITS
// RUN: sed 's/zb.range = 64 : i64/zb.range = 64 : i64, zb.range_from = -64 : i64/' %t/range-fits.mlir > %t/range-from.mlir
// RUN: not zb-run %t/range-from.mlir --eval 2>&1 | FileCheck %s --check-prefix=RANGEFROM
// RUN: sed 's/zb.range = 64 : i64/zb.range = 64 : i64, zb.range_ignored = -100 : i64/' %t/range-fits.mlir > %t/range-ignored.mlir
// RUN: not zb-run %t/range-ignored.mlir --eval 2>&1 | FileCheck %s --check-prefix=RANGEIGNORED
// RUN: env ZB_SGEMM=fast not zb-run %t/loss.mlir --eval 2>&1 | FileCheck %s --check-prefix=SGEMM
// RUN: env ZB_TIMEOUT_S=nan not zb-run %t/range-fits.mlir --eval 2>&1 | FileCheck %s --check-prefix=TIMEOUT
// RUN: env ZB_TIMEOUT_S=nan not zb-run %t/range-fits.mlir --np 2 2>&1 | FileCheck %s --check-prefix=TIMEOUT
// RUN: env ZB_TIMEOUT_S=inf zb-run %t/range-fits.mlir --eval | FileCheck %s --check-prefix=FITS
// Refused before any rank starts or anything runs: more stages than ops, a
// model on standard input for many ranks, outputs that cannot be written.
// RUN: not zb-run %t/range-fits.mlir --np 1000 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: cat %t/range-fits.mlir | not zb-run - --np 2 2>&1 | FileCheck %s --check-prefix=STDIN
// RUN: not zb-run %t/range-fits.mlir --metrics %t/missing/m.json 2>&1 | FileCheck %s --check-prefix=METRICS
// RUN: not zb-run %t/range-fits.mlir --dump-params %t 2>&1 | FileCheck %s --check-prefix=FOLDER
// RUN: not zb-run %t/range-fits.mlir --checkpoint %t/range-fits.mlir 2>&1 | FileCheck %s --check-prefix=CHECKPOINT
// RUN: not zb-run %t/range-fits.mlir --np 2 --balance --compile-only 2>&1 | FileCheck %s --check-prefix=BALANCE
// RUN: not zb-run %t/range-fits.mlir --np 2 --schedule interleaved-1f1b --microbatches 3 2>&1 | FileCheck %s --check-prefix=INTERLEAVED
// RUN: not zb-run %t/range-fits.mlir --np 2 --schedule dualpipev --microbatches 3 2>&1 | FileCheck %s --check-prefix=DUALPIPEV
// RUN: not zb-run %t/range-fits.mlir --lr nan 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not zb-run %t/named-loss.mlir --grads 2>&1 | FileCheck %s --check-prefix=NAMEDLOSS

// DYNAMIC: error: argument #0 ('arg0') has the dynamic shape 'tensor<?x4xf32>'; models need static shapes
// OUTSIDE: error: op 'memref.alloc' is not supported by the ZeroBubble backends
// TWO: error: the model must have one public function, but found 'a' and 'b'
// LOSS: error: model function 'f' must return one scalar loss of type tensor<f32> (or tensor<f64>), but returns 'tensor<4xf32>'
// MODES: zb-run: error: pass at most one of --eval and --grads
// SCHEDULE: zb-run: error: unknown --schedule 'nope'; known: gpipe, 1f1b
// OPTIMIZER: zb-run: error: unknown --optimizer 'lamb' (expected sgd, sgd-momentum or adamw)
// MOMENTUM: zb-run: error: --momentum must lie in (0, 1), got 1.5 (no momentum: --optimizer sgd)
// MOMENTUM-SGD: zb-run: error: --momentum sets the momentum of --optimizer sgd-momentum, not of sgd
// STATS: stats.mlir:4:3: error: running statistic 'bn.mean' is recorded twice
// STATS: stats.mlir:3:3: note: first recorded here
// STATARG: error: running statistic 'w' has the name of an argument
// RANGE: range.mlir:11:10: error: data argument 'ids' holds values in [0, 100) (zb.range), but indexes dimension 0 of 'tensor<64x4xf32>' here, which has 64 entries: values from 64 on would read past it
// RANGEFROM: range-from.mlir:11:10: error: data argument 'ids' may hold negative values (zb.range_from = -64), but indexes dimension 0 of 'tensor<64x4xf32>' here as it is, where they would read before it
// RANGEIGNORED: range-ignored.mlir:11:10: error: data argument 'ids' may hold -100 (zb.range_ignored), but indexes dimension 0 of 'tensor<64x4xf32>' here, which has no such entry
// FITS: loss
// HUGE: huge.mlir:3:8: error: result of type 'tensor<2305843009213693952xf32>' holds more than 2^50 bytes (1 PiB), past what the compiler counts
// SGEMM: zb-run: error: ZB_SGEMM must be 'zbrt' or 'openblas', got 'fast'
// STAGES: zb-run: error: --np 1000 with 1 chunks per rank needs 1000 stages, but the model has {{[0-9]+}} ops to cut
// STDIN: zb-run: error: --np or --dp above 1 runs a process per rank, each reading the model: give it as a file, not standard input
// METRICS: zb-run: error: --metrics '{{.*}}missing/m.json' cannot be written: folder '{{.*}}missing' does not exist
// FOLDER: zb-run: error: --dump-params '{{.*}}' is a folder; name a file to write
// CHECKPOINT: zb-run: error: --checkpoint '{{.*}}range-fits.mlir' cannot be written: '{{.*}}range-fits.mlir' is not a folder
// TIMEOUT: zb-run: error: ZB_TIMEOUT_S must be a non-negative number of seconds (0 or inf: no timeout), got 'nan'
// TIMEOUT-NOT: error
// BALANCE: zb-run: error: --balance cuts where the stages' measured times say, and --compile-only runs nothing to measure: compile without --balance
// The schedule's layout is checked before the ranks start (no MPI abort).
// INTERLEAVED: zb-run: error: --schedule interleaved-1f1b with --np 2: interleaved-1f1b needs microbatches in groups of the ranks (m % p == 0); got m=3, p=2
// INTERLEAVED-NOT: MPI
// DUALPIPEV: zb-run: error: --schedule dualpipev with --np 2: dualpipev needs at least 2p = 4 microbatches, got 3
// DUALPIPEV-NOT: MPI
// LR: zb-run: error: --lr must be a finite number, 0 or more, got nan
// NAMEDLOSS: named-loss.mlir:1:1: error: parameter 'loss' has the name gradient files give the step's loss; rename it

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

//--- range.mlir
func.func @f(%ids: tensor<2x3xi64> {zb.data = "ids", zb.range = 100 : i64},
             %table: tensor<64x4xf32> {zb.param = "table"}) -> tensor<f32> {
  %flat = tensor.collapse_shape %ids [[0, 1]] : tensor<2x3xi64> into tensor<6xi64>
  %e = tensor.empty() : tensor<6x4xf32>
  %rows = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}
      ins(%flat : tensor<6xi64>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%id: i64, %o: f32):
    %j = linalg.index 1 : index
    %row = arith.index_cast %id : i64 to index
    %v = tensor.extract %table[%row, %j] : tensor<64x4xf32>
    linalg.yield %v : f32
  } -> tensor<6x4xf32>
  %zero = arith.constant 0.0 : f32
  %s0 = tensor.empty() : tensor<f32>
  %s1 = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %sum = linalg.reduce ins(%rows : tensor<6x4xf32>) outs(%s1 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  return %sum : tensor<f32>
}

//--- range-fits.mlir
func.func @f(%ids: tensor<2x3xi64> {zb.data = "ids", zb.range = 64 : i64},
             %table: tensor<64x4xf32> {zb.param = "table"}) -> tensor<f32> {
  %flat = tensor.collapse_shape %ids [[0, 1]] : tensor<2x3xi64> into tensor<6xi64>
  %e = tensor.empty() : tensor<6x4xf32>
  %rows = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}
      ins(%flat : tensor<6xi64>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%id: i64, %o: f32):
    %j = linalg.index 1 : index
    %row = arith.index_cast %id : i64 to index
    %v = tensor.extract %table[%row, %j] : tensor<64x4xf32>
    linalg.yield %v : f32
  } -> tensor<6x4xf32>
  %zero = arith.constant 0.0 : f32
  %s0 = tensor.empty() : tensor<f32>
  %s1 = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %sum = linalg.reduce ins(%rows : tensor<6x4xf32>) outs(%s1 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  return %sum : tensor<f32>
}

//--- huge.mlir
func.func @f(%x: tensor<2xf32>, %w: tensor<2xf32> {zb.param = "w"}) -> tensor<f32> {
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2305843009213693952xf32>
  %z = linalg.fill ins(%c : f32) outs(%e : tensor<2305843009213693952xf32>) -> tensor<2305843009213693952xf32>
  %s0 = tensor.empty() : tensor<f32>
  %s1 = linalg.fill ins(%c : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %sum = linalg.reduce ins(%z : tensor<2305843009213693952xf32>) outs(%s1 : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  return %sum : tensor<f32>
}

//--- named-loss.mlir
func.func @f(%w: tensor<4xf32> {zb.param = "loss"}) -> tensor<f32> {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}
