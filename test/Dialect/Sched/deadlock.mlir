// RUN: zb-opt %s -split-input-file -verify-diagnostics

// Both ranks start with a recv of what the other sends only later: the
// verifier runs the ranks (non-blocking sends, blocking recvs) and names the
// wait-for cycle.
// expected-error @+1 {{'sched.program' op deadlock: rank 0 waits in 'recv BW stage 1 microbatch 0 from 1' while rank 1 waits in 'recv F stage 0 microbatch 0 from 0'}}
sched.program ranks 2 stages 2 microbatches 1
rank 0 {
  // expected-note @+1 {{rank 0 waits here}}
  sched.recv BW stage 1 microbatch 0 from 1 channel 1 seq 0
  sched.compute F stage 0 microbatch 0
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
  sched.compute BW stage 0 microbatch 0
}
rank 1 {
  // expected-note @+1 {{rank 1 waits here}}
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  sched.compute F stage 1 microbatch 0
  sched.compute BW stage 1 microbatch 0
  sched.send BW stage 1 microbatch 0 to 0 channel 1 seq 0
}

// -----

// Rank 1 runs microbatch 1 first, but rank 0 waits for microbatch 0's
// gradient before it sends microbatch 1's activation.
// expected-error @+1 {{'sched.program' op deadlock: rank 0 waits in 'recv B stage 1 microbatch 0 from 1' while rank 1 waits in 'recv F stage 0 microbatch 1 from 0'}}
sched.program ranks 2 stages 2 microbatches 2
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
  // expected-note @+1 {{rank 0 waits here}}
  sched.recv B stage 1 microbatch 0 from 1 channel 1 seq 0
  sched.compute B stage 0 microbatch 0
  sched.compute F stage 0 microbatch 1
  sched.send F stage 0 microbatch 1 to 1 channel 0 seq 1
  sched.recv B stage 1 microbatch 1 from 1 channel 1 seq 1
  sched.compute B stage 0 microbatch 1
}
rank 1 {
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  // expected-note @+1 {{rank 1 waits here}}
  sched.recv F stage 0 microbatch 1 from 0 channel 0 seq 1
  sched.compute F stage 1 microbatch 1
  sched.compute B stage 1 microbatch 1
  sched.compute F stage 1 microbatch 0
  sched.compute B stage 1 microbatch 0
  sched.send B stage 1 microbatch 0 to 0 channel 1 seq 0
  sched.send B stage 1 microbatch 1 to 0 channel 1 seq 1
}

// -----

// A cycle through three ranks; rank 3 is blocked behind it but not on it.
// expected-error @+1 {{'sched.program' op deadlock: rank 0 waits in 'recv F stage 2 microbatch 0 from 2' while rank 2 waits in 'recv F stage 1 microbatch 0 from 1' while rank 1 waits in 'recv F stage 0 microbatch 0 from 0'}}
sched.program ranks 4 stages 4 microbatches 1
rank 0 {
  // expected-note @+1 {{rank 0 waits here}}
  sched.recv F stage 2 microbatch 0 from 2 channel 5 seq 0
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
}
rank 1 {
  // expected-note @+1 {{rank 1 waits here}}
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  sched.send F stage 1 microbatch 0 to 2 channel 2 seq 0
}
rank 2 {
  // expected-note @+1 {{rank 2 waits here}}
  sched.recv F stage 1 microbatch 0 from 1 channel 2 seq 0
  sched.send F stage 2 microbatch 0 to 0 channel 5 seq 0
  sched.send F stage 2 microbatch 0 to 3 channel 4 seq 0
}
rank 3 {
  sched.recv F stage 2 microbatch 0 from 2 channel 4 seq 0
}

// -----

// The same transfers in a working order pass: a send never blocks, so
// rank 1 may send before it receives.
sched.program ranks 2 stages 2 microbatches 1
rank 0 {
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
  sched.recv BW stage 1 microbatch 0 from 1 channel 1 seq 0
}
rank 1 {
  sched.send BW stage 1 microbatch 0 to 0 channel 1 seq 0
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
}
