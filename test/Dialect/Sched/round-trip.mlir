// RUN: zb-opt %s | FileCheck %s
// RUN: zb-opt %s | zb-opt | FileCheck %s
// RUN: zb-opt %s --mlir-print-op-generic | zb-opt | FileCheck %s

// Two ranks, two stages, one microbatch, split backward: every op and phase.
// CHECK-LABEL: sched.program ranks 2 stages 2 microbatches 1 attributes {schedule = "zb-h1", stage_ranks = array<i64: 0, 1>}
// CHECK-NEXT: rank 0 {
// CHECK-NEXT:   sched.compute F stage 0 microbatch 0
// CHECK-NEXT:   sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
// CHECK-NEXT:   sched.recv BW stage 1 microbatch 0 from 1 channel 1 seq 0
// CHECK-NEXT:   sched.compute B stage 0 microbatch 0
// CHECK-NEXT:   sched.compute W stage 0 microbatch 0
// CHECK-NEXT:   sched.compute optimizer stage 0
// CHECK-NEXT: }
// CHECK-NEXT: rank 1 {
// CHECK-NEXT:   sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
// CHECK-NEXT:   sched.compute F stage 1 microbatch 0
// CHECK-NEXT:   sched.compute BW stage 1 microbatch 0
// CHECK-NEXT:   sched.send BW stage 1 microbatch 0 to 0 channel 1 seq 0
// CHECK-NEXT:   sched.compute optimizer stage 1
// CHECK-NEXT: }
sched.program ranks 2 stages 2 microbatches 1 attributes {schedule = "zb-h1", stage_ranks = array<i64: 0, 1>}
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
  sched.recv BW stage 1 microbatch 0 from 1 channel 1 seq 0
  sched.compute B stage 0 microbatch 0
  sched.compute W stage 0 microbatch 0
  sched.compute optimizer stage 0
}
rank 1 {
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  sched.compute F stage 1 microbatch 0
  sched.compute BW stage 1 microbatch 0
  sched.send BW stage 1 microbatch 0 to 0 channel 1 seq 0
  sched.compute optimizer stage 1
}

// A rank with nothing to do keeps its (empty) region.
// CHECK-LABEL: sched.program ranks 2 stages 1 microbatches 2
// CHECK-NEXT: rank 0 {
// CHECK-NEXT:   sched.compute F stage 0 microbatch 0
// CHECK-NEXT:   sched.compute F stage 0 microbatch 1
// CHECK-NEXT: }
// CHECK-NEXT: rank 1 {
// CHECK-NEXT: }
sched.program ranks 2 stages 1 microbatches 2
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.compute F stage 0 microbatch 1
}
rank 1 {
}


// A parameter shared by stages 0 and 1 (ranks 0 and 1): 'param_stages'
// names it, and each rank sums its gradient with the other after its W.
// CHECK-LABEL: sched.program ranks 2 stages 2 microbatches 1 attributes {param_stages = {tied = array<i64: 0, 1>}, stage_ranks = array<i64: 0, 1>}
// CHECK:        sched.compute W stage 0 microbatch 0
// CHECK-NEXT:   sched.allreduce ["tied"] over [0, 1] seq 0
// CHECK:        sched.compute W stage 1 microbatch 0
// CHECK-NEXT:   sched.allreduce ["tied"] over [0, 1] seq 0
sched.program ranks 2 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0, 1>, param_stages = {tied = array<i64: 0, 1>}}
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
  sched.recv B stage 1 microbatch 0 from 1 channel 1 seq 0
  sched.compute B stage 0 microbatch 0
  sched.compute W stage 0 microbatch 0
  sched.allreduce ["tied"] over [0, 1] seq 0
}
rank 1 {
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  sched.compute F stage 1 microbatch 0
  sched.compute B stage 1 microbatch 0
  sched.send B stage 1 microbatch 0 to 0 channel 1 seq 0
  sched.compute W stage 1 microbatch 0
  sched.allreduce ["tied"] over [0, 1] seq 0
}

// Two replicas (data parallelism): every parameter is listed, and a
// reduction over one rank averages a stage's gradients over its replicas.
// CHECK-LABEL: sched.program ranks 2 stages 2 microbatches 1 attributes {param_stages = {a = array<i64: 0>, b = array<i64: 1>, tied = array<i64: 0, 1>}, replicas = 2 : i64, stage_ranks = array<i64: 0, 1>}
// CHECK:        sched.allreduce ["a"] over [0] seq 0
// CHECK-NEXT:   sched.allreduce ["tied"] over [0, 1] seq 0
// CHECK:        sched.allreduce ["b"] over [1] seq 0
// CHECK-NEXT:   sched.allreduce ["tied"] over [0, 1] seq 0
sched.program ranks 2 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0, 1>, replicas = 2, param_stages = {a = array<i64: 0>, b = array<i64: 1>, tied = array<i64: 0, 1>}}
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
  sched.recv B stage 1 microbatch 0 from 1 channel 1 seq 0
  sched.compute B stage 0 microbatch 0
  sched.compute W stage 0 microbatch 0
  sched.allreduce ["a"] over [0] seq 0
  sched.allreduce ["tied"] over [0, 1] seq 0
}
rank 1 {
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  sched.compute F stage 1 microbatch 0
  sched.compute B stage 1 microbatch 0
  sched.send B stage 1 microbatch 0 to 0 channel 1 seq 0
  sched.compute W stage 1 microbatch 0
  sched.allreduce ["b"] over [1] seq 0
  sched.allreduce ["tied"] over [0, 1] seq 0
}

// Evaluation: a forward_only program of F actions and their transfers.
// CHECK-LABEL: sched.program ranks 2 stages 2 microbatches 1 attributes {forward_only, stage_ranks = array<i64: 0, 1>}
// CHECK:        sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
sched.program ranks 2 stages 2 microbatches 1 attributes {forward_only, stage_ranks = array<i64: 0, 1>}
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
}
rank 1 {
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  sched.compute F stage 1 microbatch 0
}
