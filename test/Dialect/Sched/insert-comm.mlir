// RUN: zb-opt %s -split-input-file --zb-insert-comm | FileCheck %s
// RUN: zb-opt %s -split-input-file --zb-insert-comm | zb-opt -split-input-file | FileCheck %s

// 1F1B on two ranks: a send right after each producer, a recv right before
// each consumer; channel 0 carries F(0, j) to rank 1, channel 1 carries
// BW(1, j) back. Optimizer actions keep their place; stage_ranks is added.
// CHECK-LABEL: sched.program ranks 2 stages 2 microbatches 2 attributes {schedule = "1f1b", stage_ranks = array<i64: 0, 1>}
// CHECK-NEXT: rank 0 {
// CHECK-NEXT:   sched.compute F stage 0 microbatch 0
// CHECK-NEXT:   sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
// CHECK-NEXT:   sched.compute F stage 0 microbatch 1
// CHECK-NEXT:   sched.send F stage 0 microbatch 1 to 1 channel 0 seq 1
// CHECK-NEXT:   sched.recv BW stage 1 microbatch 0 from 1 channel 1 seq 0
// CHECK-NEXT:   sched.compute BW stage 0 microbatch 0
// CHECK-NEXT:   sched.recv BW stage 1 microbatch 1 from 1 channel 1 seq 1
// CHECK-NEXT:   sched.compute BW stage 0 microbatch 1
// CHECK-NEXT:   sched.compute optimizer stage 0
// CHECK-NEXT: }
// CHECK-NEXT: rank 1 {
// CHECK-NEXT:   sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
// CHECK-NEXT:   sched.compute F stage 1 microbatch 0
// CHECK-NEXT:   sched.compute BW stage 1 microbatch 0
// CHECK-NEXT:   sched.send BW stage 1 microbatch 0 to 0 channel 1 seq 0
// CHECK-NEXT:   sched.recv F stage 0 microbatch 1 from 0 channel 0 seq 1
// CHECK-NEXT:   sched.compute F stage 1 microbatch 1
// CHECK-NEXT:   sched.compute BW stage 1 microbatch 1
// CHECK-NEXT:   sched.send BW stage 1 microbatch 1 to 0 channel 1 seq 1
// CHECK-NEXT:   sched.compute optimizer stage 1
// CHECK-NEXT: }
sched.program ranks 2 stages 2 microbatches 2 attributes {schedule = "1f1b"}
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.compute F stage 0 microbatch 1
  sched.compute BW stage 0 microbatch 0
  sched.compute BW stage 0 microbatch 1
  sched.compute optimizer stage 0
}
rank 1 {
  sched.compute F stage 1 microbatch 0
  sched.compute BW stage 1 microbatch 0
  sched.compute F stage 1 microbatch 1
  sched.compute BW stage 1 microbatch 1
  sched.compute optimizer stage 1
}

// -----

// Rank 1 runs microbatch 1 first, but channel 0 delivers in send order:
// both activations are received before F(1, 1).
// CHECK-LABEL: sched.program ranks 2 stages 2 microbatches 2
// CHECK:      rank 1 {
// CHECK-NEXT:   sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
// CHECK-NEXT:   sched.recv F stage 0 microbatch 1 from 0 channel 0 seq 1
// CHECK-NEXT:   sched.compute F stage 1 microbatch 1
sched.program ranks 2 stages 2 microbatches 2
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.compute F stage 0 microbatch 1
  sched.compute B stage 0 microbatch 1
  sched.compute B stage 0 microbatch 0
  sched.compute W stage 0 microbatch 0
  sched.compute W stage 0 microbatch 1
}
rank 1 {
  sched.compute F stage 1 microbatch 1
  sched.compute B stage 1 microbatch 1
  sched.compute F stage 1 microbatch 0
  sched.compute B stage 1 microbatch 0
  sched.compute W stage 1 microbatch 0
  sched.compute W stage 1 microbatch 1
}

// -----

// A program that already has transfers is left as it is.
// CHECK-LABEL: sched.program ranks 2 stages 2 microbatches 1
// CHECK-NEXT: rank 0 {
// CHECK-NEXT:   sched.compute F stage 0 microbatch 0
// CHECK-NEXT:   sched.send F stage 0 microbatch 0 to 1 channel 7 seq 0
// CHECK-NEXT:   sched.recv BW stage 1 microbatch 0 from 1 channel 9 seq 0
sched.program ranks 2 stages 2 microbatches 1
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.send F stage 0 microbatch 0 to 1 channel 7 seq 0
  sched.recv BW stage 1 microbatch 0 from 1 channel 9 seq 0
  sched.compute BW stage 0 microbatch 0
}
rank 1 {
  sched.recv F stage 0 microbatch 0 from 0 channel 7 seq 0
  sched.compute F stage 1 microbatch 0
  sched.compute BW stage 1 microbatch 0
  sched.send BW stage 1 microbatch 0 to 0 channel 9 seq 0
}
