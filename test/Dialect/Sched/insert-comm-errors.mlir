// RUN: zb-opt %s -split-input-file -verify-diagnostics --zb-insert-comm

// Every F and either B and W or BW of every stage and microbatch.
// expected-error @+1 {{'sched.program' op cannot insert transfers: missing B(stage 1, mb 0) (expected on rank 1)}}
sched.program ranks 2 stages 2 microbatches 1
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.compute BW stage 0 microbatch 0
}
rank 1 {
  sched.compute F stage 1 microbatch 0
}

// -----

// Dependencies on one rank come first.
sched.program ranks 2 stages 2 microbatches 1
rank 0 {
  sched.compute F stage 0 microbatch 0
  // expected-error @+1 {{'sched.compute' op cannot insert transfers: W(stage 0, mb 0) at position 1 on rank 0 comes before its dependency B(stage 0, mb 0) at position 2}}
  sched.compute W stage 0 microbatch 0
  sched.compute B stage 0 microbatch 0
}
rank 1 {
  sched.compute F stage 1 microbatch 0
  sched.compute BW stage 1 microbatch 0
}

// -----

// An order that cannot run: rank 0 waits for microbatch 0's gradient before
// it sends microbatch 1's activation, which rank 1 needs first.
sched.program ranks 2 stages 2 microbatches 2
rank 0 {
  sched.compute F stage 0 microbatch 0
  // expected-error @+1 {{'sched.compute' op cannot insert transfers: deadlock: BW(stage 0, mb 0) at position 1 on rank 0 waits for BW(stage 1, mb 0) from rank 1 (rank 0 waits in 'recv BW stage 1 microbatch 1 from 1' while rank 1 waits in 'recv F stage 0 microbatch 1 from 0')}}
  sched.compute BW stage 0 microbatch 0
  sched.compute F stage 0 microbatch 1
  sched.compute BW stage 0 microbatch 1
}
rank 1 {
  sched.compute F stage 1 microbatch 1
  sched.compute BW stage 1 microbatch 1
  sched.compute F stage 1 microbatch 0
  sched.compute BW stage 1 microbatch 0
}

// -----

// Stages 0..3 on ranks 0, 1, 0, 0: neither a loop nor a V placement.
// expected-error @+1 {{'sched.program' op cannot insert transfers: the stages fit neither placement: loop placement puts stage 3 on rank 1 (not 0), v placement puts stage 2 on rank 1 (not 0)}}
sched.program ranks 2 stages 4 microbatches 1 attributes {stage_ranks = array<i64: 0, 1, 0, 0>}
rank 0 {
}
rank 1 {
}

// -----

// Without stage_ranks, each stage runs on one rank.
sched.program ranks 2 stages 2 microbatches 1
rank 0 {
  // expected-note @+1 {{first action here}}
  sched.compute F stage 0 microbatch 0
}
rank 1 {
  // expected-error @+1 {{'sched.compute' op runs stage 0 on rank 1, but stage 0 also runs on rank 0}}
  sched.compute BW stage 0 microbatch 0
}

// -----

// Without stage_ranks, every stage needs an action to place it.
// expected-error @+1 {{'sched.program' op cannot insert transfers: stage 1 has no compute actions}}
sched.program ranks 2 stages 2 microbatches 1
rank 0 {
  sched.compute F stage 0 microbatch 0
}
rank 1 {
}
