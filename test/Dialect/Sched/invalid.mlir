// RUN: zb-opt %s -split-input-file -verify-diagnostics

// The number of rank regions is num_ranks (generic form can disagree).
// expected-error @+1 {{'sched.program' op has 1 rank regions, but 'num_ranks' is 2}}
"sched.program"() <{num_ranks = 2 : i64, num_stages = 1 : i64, num_microbatches = 1 : i64}> ({
^bb0:
}) : () -> ()

// -----

// The custom form names the ranks in order.
sched.program ranks 2 stages 1 microbatches 1
rank 0 {
}
// expected-error @+1 {{expected 'rank 1', got 'rank 2'}}
rank 2 {
}

// -----

// expected-error @+1 {{expected at least one rank}}
sched.program ranks 0 stages 1 microbatches 1

// -----

// expected-error @+1 {{'sched.program' op attribute 'num_stages' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
sched.program ranks 1 stages 0 microbatches 1
rank 0 {
}

// -----

// expected-error @+1 {{'sched.program' op 'stage_ranks' has 1 entries, but there are 2 stages}}
sched.program ranks 1 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0>}
rank 0 {
}

// -----

// expected-error @+1 {{'sched.program' op 'stage_ranks' places stage 1 on rank 3, out of range [0, 2)}}
sched.program ranks 2 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0, 3>}
rank 0 {
}
rank 1 {
}

// -----

sched.program ranks 1 stages 2 microbatches 1
rank 0 {
  // expected-error @+1 {{'sched.compute' op stage 2 is out of range [0, 2)}}
  sched.compute F stage 2 microbatch 0
}

// -----

sched.program ranks 1 stages 1 microbatches 4
rank 0 {
  // expected-error @+1 {{'sched.compute' op microbatch 4 is out of range [0, 4)}}
  sched.compute F stage 0 microbatch 4
}

// -----

sched.program ranks 2 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0, 1>}
rank 0 {
  // expected-error @+1 {{'sched.compute' op runs stage 1 on rank 0, but 'stage_ranks' places it on rank 1}}
  sched.compute F stage 1 microbatch 0
}
rank 1 {
}

// -----

sched.program ranks 2 stages 1 microbatches 2
rank 0 {
  // expected-note @+1 {{first occurrence here}}
  sched.compute W stage 0 microbatch 1
}
rank 1 {
  // expected-error @+1 {{'sched.compute' op duplicate action 'W stage 0 microbatch 1'}}
  sched.compute W stage 0 microbatch 1
}

// -----

sched.program ranks 1 stages 1 microbatches 1
rank 0 {
  // expected-error @+1 {{'sched.compute' op optimizer phase takes no microbatch}}
  sched.compute optimizer stage 0 microbatch 0
}

// -----

sched.program ranks 1 stages 1 microbatches 1
rank 0 {
  // expected-error @+1 {{'sched.compute' op phase B needs a microbatch}}
  sched.compute B stage 0
}

// -----

sched.program ranks 1 stages 1 microbatches 1
rank 0 {
  // expected-error @+1 {{'arith.constant' op is not allowed in a rank of 'sched.program'; expected sched.compute, sched.send, sched.recv or sched.allreduce}}
  %c = arith.constant 0 : i32
}

// -----

// Compute and transfer ops live only in a program.
func.func @outside() {
  // expected-error @+1 {{'sched.compute' op expects parent op 'sched.program'}}
  sched.compute F stage 0 microbatch 0
  return
}

// -----

sched.program ranks 2 stages 2 microbatches 1
rank 0 {
  // expected-error @+1 {{'sched.send' op peer rank 2 is out of range [0, 2)}}
  sched.send F stage 0 microbatch 0 to 2 channel 0 seq 0
}
rank 1 {
}

// -----

sched.program ranks 2 stages 2 microbatches 1
rank 0 {
  // expected-error @+1 {{'sched.recv' op transfers to its own rank 0}}
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
}
rank 1 {
}

// -----

sched.program ranks 2 stages 2 microbatches 1
rank 0 {
  // expected-error @+1 {{'sched.send' op microbatch 1 is out of range [0, 1)}}
  sched.send F stage 0 microbatch 1 to 1 channel 0 seq 0
}
rank 1 {
}

// -----

// The k-th transfer on a channel has sequence number k.
sched.program ranks 2 stages 2 microbatches 2
rank 0 {
  // expected-error @+1 {{'sched.send' op has sequence number 1 but is transfer number 0 on channel 0 to rank 1 (transfers on a channel must be numbered in program order)}}
  sched.send F stage 0 microbatch 1 to 1 channel 0 seq 1
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
}
rank 1 {
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  sched.recv F stage 0 microbatch 1 from 0 channel 0 seq 1
}

// -----

sched.program ranks 2 stages 2 microbatches 1
rank 0 {
  // expected-error @+1 {{'sched.send' op has no matching 'sched.recv' on rank 1 (channel 0, seq 0)}}
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
}
rank 1 {
}

// -----

sched.program ranks 2 stages 2 microbatches 1
rank 0 {
}
rank 1 {
  // expected-error @+1 {{'sched.recv' op has no matching 'sched.send' on rank 0 (channel 3, seq 0)}}
  sched.recv F stage 0 microbatch 0 from 0 channel 3 seq 0
}

// -----

// Both ends of a transfer name the same payload.
sched.program ranks 2 stages 2 microbatches 2
rank 0 {
  // expected-error @+1 {{'sched.send' op sends 'F stage 0 microbatch 0' but is received on rank 1 as 'F stage 0 microbatch 1'}}
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
}
rank 1 {
  // expected-note @+1 {{matching recv here}}
  sched.recv F stage 0 microbatch 1 from 0 channel 0 seq 0
}

// -----

sched.program ranks 2 stages 2 microbatches 1
rank 0 {
  // expected-error @+1 {{'sched.send' op cannot transfer the output of phase W; only F, B and BW outputs cross ranks}}
  sched.send W stage 0 microbatch 0 to 1 channel 0 seq 0
}
rank 1 {
}

// -----

// A reduction's group is distinct ranks in increasing order.
sched.program ranks 2 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0, 1>, param_stages = {w = array<i64: 0, 1>}}
rank 0 {
  // expected-error @+1 {{'sched.allreduce' op group must list distinct non-negative ranks in increasing order}}
  sched.allreduce ["w"] over [1, 0] seq 0
}
rank 1 {
}

// -----

// A group of one rank reduces only over replicas.
sched.program ranks 2 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0, 1>, param_stages = {w = array<i64: 0, 1>}}
rank 0 {
  // expected-error @+1 {{'sched.allreduce' op needs a group of at least two ranks (or, in a program with replicas, one)}}
  sched.allreduce ["w"] over [0] seq 0
}
rank 1 {
}

// -----

// A reduction runs on a rank of its group.
sched.program ranks 3 stages 3 microbatches 1 attributes {stage_ranks = array<i64: 0, 1, 2>, param_stages = {w = array<i64: 0, 2>}}
rank 0 {
}
rank 1 {
  // expected-error @+1 {{'sched.allreduce' op runs on rank 1, which is not in its group}}
  sched.allreduce ["w"] over [0, 2] seq 0
}
rank 2 {
}

// -----

// Only the parameters of 'param_stages' are reduced.
sched.program ranks 2 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0, 1>, param_stages = {w = array<i64: 0, 1>}}
rank 0 {
  // expected-error @+1 {{'sched.allreduce' op reduces 'v', which the program's 'param_stages' does not list}}
  sched.allreduce ["v"] over [0, 1] seq 0
}
rank 1 {
}

// -----

// Every rank of the group holds the parameter: stage 1 (rank 1) does not
// use 'w'.
sched.program ranks 3 stages 3 microbatches 1 attributes {stage_ranks = array<i64: 0, 1, 2>, param_stages = {w = array<i64: 0, 2>}}
rank 0 {
  // expected-error @+1 {{'sched.allreduce' op reduces 'w' over rank 1, which does not hold it}}
  sched.allreduce ["w"] over [0, 1, 2] seq 0
}
rank 1 {
}
rank 2 {
}

// -----

// A reduction follows the last W of every stage that uses its parameter.
sched.program ranks 2 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0, 1>, param_stages = {w = array<i64: 0, 1>}}
rank 0 {
  // expected-note @+1 {{reduction here}}
  sched.allreduce ["w"] over [0, 1] seq 0
  // expected-error @+1 {{'sched.compute' op adds to the gradient of 'w' after its reduction on rank 0; a reduction must follow the last W of every stage that uses its parameters}}
  sched.compute W stage 0 microbatch 0
}
rank 1 {
  sched.allreduce ["w"] over [0, 1] seq 0
}

// -----

// Each rank of the group takes part.
sched.program ranks 2 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0, 1>, param_stages = {w = array<i64: 0, 1>}}
rank 0 {
  // expected-error @+1 {{'sched.allreduce' op has no matching 'sched.allreduce' on rank 1 (seq 0)}}
  sched.allreduce ["w"] over [0, 1] seq 0
}
rank 1 {
}

// -----

// The matching reductions name the same parameters.
sched.program ranks 2 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0, 1>, param_stages = {w = array<i64: 0, 1>, v = array<i64: 0, 1>}}
rank 0 {
  // expected-note @+1 {{matching reduction here}}
  sched.allreduce ["w"] over [0, 1] seq 0
  sched.allreduce ["v"] over [0, 1] seq 1
}
rank 1 {
  // expected-error @+1 {{'sched.allreduce' op reduces other parameters than its match on rank 0}}
  sched.allreduce ["v"] over [0, 1] seq 0
  sched.allreduce ["w"] over [0, 1] seq 1
}

// -----

// Reductions over a group are numbered in program order.
sched.program ranks 2 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0, 1>, param_stages = {w = array<i64: 0, 1>}}
rank 0 {
  // expected-error @+1 {{'sched.allreduce' op has sequence number 1 but is reduction number 0 over its group on rank 0 (reductions over a group must be numbered in program order)}}
  sched.allreduce ["w"] over [0, 1] seq 1
}
rank 1 {
}

// -----

// A parameter is reduced once per rank.
sched.program ranks 2 stages 2 microbatches 1 attributes {stage_ranks = array<i64: 0, 1>, param_stages = {w = array<i64: 0, 1>}}
rank 0 {
  // expected-note @+1 {{first reduction here}}
  sched.allreduce ["w"] over [0, 1] seq 0
  // expected-error @+1 {{'sched.allreduce' op reduces 'w' a second time on rank 0}}
  sched.allreduce ["w"] over [0, 1] seq 1
}
rank 1 {
}

// -----

// 'param_stages' needs the stage placement.
// expected-error @+1 {{'sched.program' op 'param_stages' needs 'stage_ranks'}}
sched.program ranks 2 stages 2 microbatches 1 attributes {param_stages = {w = array<i64: 0, 1>}}
rank 0 {
}
rank 1 {
}

// -----

// A forward_only program (evaluation) runs F actions only.
sched.program ranks 1 stages 1 microbatches 1 attributes {forward_only}
rank 0 {
  sched.compute F stage 0 microbatch 0
  // expected-error @+1 {{'sched.compute' op runs B in a forward_only program, which runs F actions only}}
  sched.compute B stage 0 microbatch 0
}

// -----

sched.program ranks 2 stages 2 microbatches 1 attributes {forward_only, stage_ranks = array<i64: 0, 1>, param_stages = {tied = array<i64: 0, 1>}}
rank 0 {
  sched.compute F stage 0 microbatch 0
  // expected-error @+1 {{'sched.allreduce' op reduces gradients in a forward_only program, which computes none}}
  sched.allreduce ["tied"] over [0, 1] seq 0
}
rank 1 {
  sched.compute F stage 1 microbatch 0
  sched.allreduce ["tied"] over [0, 1] seq 0
}

// -----

// Counts within the schedule library's limits: the passes size their tables
// by them (--zb-insert-comm allocated per stage before this check).
// expected-error @+1 {{'sched.program' op 'num_stages' of 4294967296 is past the schedules' limit of 262144}}
sched.program ranks 1 stages 4294967296 microbatches 1
rank 0 {
  sched.compute F stage 0 microbatch 0
}

// -----

// expected-error @+1 {{'sched.program' op 'num_microbatches' of 1000001 is past the schedules' limit of 1000000}}
sched.program ranks 1 stages 1 microbatches 1000001
rank 0 {
  sched.compute F stage 0 microbatch 0
}
