// RUN: zb-opt %s -split-input-file -verify-diagnostics --zb-partition-stages="stages=2" --zb-autodiff --zb-split-backward --zb-lower-to-runtime -o /dev/null
// RUN: zb-opt %s -split-input-file -verify-diagnostics --zb-partition-stages="stages=2" --zb-autodiff --zb-split-backward --zb-lower-to-runtime=unroll=true -o /dev/null

// --zb-lower-to-runtime rejects a hand-written program that uses a value
// before it exists, in either form of the step function (both plan the
// program the same way first). The model is lower-to-runtime.mlir's.
// A backward before its forward.
#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
func.func @tiny(%x: tensor<2x4xf32>, %t: tensor<2x4xf32>, %w0: tensor<4x4xf32> {zb.param = "w0"}, %w1: tensor<4x4xf32> {zb.param = "w1"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %a = linalg.matmul ins(%x, %w0 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = pipe.cut %a : tensor<2x4xf32>
  %b = linalg.matmul ins(%h, %w1 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%b, %t : tensor<2x4xf32>, tensor<2x4xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %d = arith.subf %p, %q : f32
    %m = arith.mulf %d, %d : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

sched.program ranks 2 stages 2 microbatches 1 attributes {schedule = "1f1b", stage_ranks = array<i64: 0, 1>}
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
  sched.recv BW stage 1 microbatch 0 from 1 channel 1 seq 0
  sched.compute BW stage 0 microbatch 0
}
rank 1 {
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  // expected-error @+1 {{rank 1 runs the backward of stage 1 microbatch 0 before its F}}
  sched.compute BW stage 1 microbatch 0
  sched.compute F stage 1 microbatch 0
  sched.send BW stage 1 microbatch 0 to 0 channel 1 seq 0
}

// -----
// A W before its B.
#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
func.func @tiny(%x: tensor<2x4xf32>, %t: tensor<2x4xf32>, %w0: tensor<4x4xf32> {zb.param = "w0"}, %w1: tensor<4x4xf32> {zb.param = "w1"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %a = linalg.matmul ins(%x, %w0 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = pipe.cut %a : tensor<2x4xf32>
  %b = linalg.matmul ins(%h, %w1 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%b, %t : tensor<2x4xf32>, tensor<2x4xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %d = arith.subf %p, %q : f32
    %m = arith.mulf %d, %d : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

sched.program ranks 2 stages 2 microbatches 1 attributes {schedule = "zb-h1", stage_ranks = array<i64: 0, 1>}
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
  sched.recv B stage 1 microbatch 0 from 1 channel 1 seq 0
  sched.compute B stage 0 microbatch 0
  sched.compute W stage 0 microbatch 0
}
rank 1 {
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  sched.compute F stage 1 microbatch 0
  // expected-error @+1 {{rank 1 runs W of stage 1 microbatch 0 before its B}}
  sched.compute W stage 1 microbatch 0
  sched.compute B stage 1 microbatch 0
  sched.send B stage 1 microbatch 0 to 0 channel 1 seq 0
}

// -----
// A forward before its input arrives.
#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
func.func @tiny(%x: tensor<2x4xf32>, %t: tensor<2x4xf32>, %w0: tensor<4x4xf32> {zb.param = "w0"}, %w1: tensor<4x4xf32> {zb.param = "w1"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %a = linalg.matmul ins(%x, %w0 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = pipe.cut %a : tensor<2x4xf32>
  %b = linalg.matmul ins(%h, %w1 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%b, %t : tensor<2x4xf32>, tensor<2x4xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %d = arith.subf %p, %q : f32
    %m = arith.mulf %d, %d : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

sched.program ranks 2 stages 2 microbatches 1 attributes {schedule = "1f1b", stage_ranks = array<i64: 0, 1>}
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
  sched.recv BW stage 1 microbatch 0 from 1 channel 1 seq 0
  sched.compute BW stage 0 microbatch 0
}
rank 1 {
  // expected-error @+1 {{rank 1 runs F of stage 1 microbatch 0 before its input is computed or received}}
  sched.compute F stage 1 microbatch 0
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  sched.compute BW stage 1 microbatch 0
  sched.send BW stage 1 microbatch 0 to 0 channel 1 seq 0
}

// -----
// A backward before the gradient from the next stage arrives.
#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
func.func @tiny(%x: tensor<2x4xf32>, %t: tensor<2x4xf32>, %w0: tensor<4x4xf32> {zb.param = "w0"}, %w1: tensor<4x4xf32> {zb.param = "w1"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %a = linalg.matmul ins(%x, %w0 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = pipe.cut %a : tensor<2x4xf32>
  %b = linalg.matmul ins(%h, %w1 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%b, %t : tensor<2x4xf32>, tensor<2x4xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %d = arith.subf %p, %q : f32
    %m = arith.mulf %d, %d : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

sched.program ranks 2 stages 2 microbatches 1 attributes {schedule = "1f1b", stage_ranks = array<i64: 0, 1>}
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
  // expected-error @+1 {{rank 0 runs the backward of stage 0 microbatch 0 before the gradient from stage 1 is computed or received}}
  sched.compute BW stage 0 microbatch 0
  sched.recv BW stage 1 microbatch 0 from 1 channel 1 seq 0
}
rank 1 {
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  sched.compute F stage 1 microbatch 0
  sched.compute BW stage 1 microbatch 0
  sched.send BW stage 1 microbatch 0 to 0 channel 1 seq 0
}

// -----
// A send of a value not computed yet.
#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
func.func @tiny(%x: tensor<2x4xf32>, %t: tensor<2x4xf32>, %w0: tensor<4x4xf32> {zb.param = "w0"}, %w1: tensor<4x4xf32> {zb.param = "w1"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %a = linalg.matmul ins(%x, %w0 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = pipe.cut %a : tensor<2x4xf32>
  %b = linalg.matmul ins(%h, %w1 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%b, %t : tensor<2x4xf32>, tensor<2x4xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %d = arith.subf %p, %q : f32
    %m = arith.mulf %d, %d : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

sched.program ranks 2 stages 2 microbatches 1 attributes {schedule = "1f1b", stage_ranks = array<i64: 0, 1>}
rank 0 {
  // expected-error @+1 {{sends a value rank 0 has not computed yet}}
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
  sched.compute F stage 0 microbatch 0
  sched.recv BW stage 1 microbatch 0 from 1 channel 1 seq 0
  sched.compute BW stage 0 microbatch 0
}
rank 1 {
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  sched.compute F stage 1 microbatch 0
  sched.compute BW stage 1 microbatch 0
  sched.send BW stage 1 microbatch 0 to 0 channel 1 seq 0
}

// -----
// A forward whose backward never runs.
#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
func.func @tiny(%x: tensor<2x4xf32>, %t: tensor<2x4xf32>, %w0: tensor<4x4xf32> {zb.param = "w0"}, %w1: tensor<4x4xf32> {zb.param = "w1"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %a = linalg.matmul ins(%x, %w0 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = pipe.cut %a : tensor<2x4xf32>
  %b = linalg.matmul ins(%h, %w1 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%b, %t : tensor<2x4xf32>, tensor<2x4xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %d = arith.subf %p, %q : f32
    %m = arith.mulf %d, %d : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

// expected-error @+1 {{rank 0's program leaves a backward unfinished}}
sched.program ranks 2 stages 2 microbatches 1 attributes {schedule = "1f1b", stage_ranks = array<i64: 0, 1>}
rank 0 {
  sched.compute F stage 0 microbatch 0
  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
}
rank 1 {
  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0
  sched.compute F stage 1 microbatch 0
}

// -----
// A rank that runs another rank's stage.
#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
func.func @tiny(%x: tensor<2x4xf32>, %t: tensor<2x4xf32>, %w0: tensor<4x4xf32> {zb.param = "w0"}, %w1: tensor<4x4xf32> {zb.param = "w1"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %a = linalg.matmul ins(%x, %w0 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = pipe.cut %a : tensor<2x4xf32>
  %b = linalg.matmul ins(%h, %w1 : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%b, %t : tensor<2x4xf32>, tensor<2x4xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %d = arith.subf %p, %q : f32
    %m = arith.mulf %d, %d : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

sched.program ranks 2 stages 2 microbatches 1 attributes {schedule = "1f1b"}
rank 0 {
  sched.compute F stage 0 microbatch 0
  // expected-error @+1 {{rank 0 runs stage 1, which is not one of its stages}}
  sched.compute F stage 1 microbatch 0
  sched.compute BW stage 1 microbatch 0
  sched.compute BW stage 0 microbatch 0
}
rank 1 {
}
