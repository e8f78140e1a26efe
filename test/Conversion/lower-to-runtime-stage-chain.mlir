// RUN: zb-opt %s -split-input-file -verify-diagnostics --zb-autodiff --zb-schedule="schedule=1f1b microbatches=2" --zb-insert-comm --zb-lower-to-runtime

// The chain the lowering assumes of hand-written stages is checked first
// (such stages used to crash the lowering or hang it).

// A stage's data must be the model's data arguments, not a parameter.
func.func @m(%w: tensor<4xf32> {zb.param = "w"}) -> tensor<f32> {
  // expected-error @below {{'pipe.stage' op takes data that is no data argument of 'm'}}
  %l = pipe.stage 0 on rank 0 data(%w : tensor<4xf32>) -> tensor<f32> forward {
  ^bb0(%a: tensor<4xf32>):
    %z = arith.constant dense<0.0> : tensor<f32>
    %r = linalg.reduce ins(%a : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    pipe.yield %r : tensor<f32>
  }
  return %l : tensor<f32>
}

// -----

// A previous stage's result taken as data rather than as the inputs.
func.func @m(%x: tensor<4xf32>, %w: tensor<4xf32> {zb.param = "w"}) -> tensor<f32> {
  %0 = pipe.stage 0 on rank 0 data(%x : tensor<4xf32>) params(%w : tensor<4xf32>) -> tensor<4xf32> forward {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %e = tensor.empty() : tensor<4xf32>
    %m = linalg.mul ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    pipe.yield %m : tensor<4xf32>
  }
  // expected-error @below {{'pipe.stage' op must take as inputs the previous stage's results, in order}}
  %1 = pipe.stage 1 on rank 1 data(%0 : tensor<4xf32>) -> tensor<f32> forward {
  ^bb0(%a: tensor<4xf32>):
    %z = arith.constant dense<0.0> : tensor<f32>
    %r = linalg.reduce ins(%a : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    pipe.yield %r : tensor<f32>
  }
  return %1 : tensor<f32>
}

// -----

// The previous stage's result taken twice.
func.func @m(%x: tensor<4xf32>, %w: tensor<4xf32> {zb.param = "w"}, %v: tensor<4xf32> {zb.param = "v"}) -> tensor<f32> {
  %0 = pipe.stage 0 on rank 0 data(%x : tensor<4xf32>) params(%w : tensor<4xf32>) -> tensor<4xf32> forward {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %e = tensor.empty() : tensor<4xf32>
    %m = linalg.mul ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    pipe.yield %m : tensor<4xf32>
  }
  // expected-error @below {{'pipe.stage' op must take as inputs the previous stage's results, in order}}
  %1 = pipe.stage 1 on rank 1 inputs(%0, %0 : tensor<4xf32>, tensor<4xf32>) params(%v : tensor<4xf32>) -> tensor<f32> forward {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>):
    %e = tensor.empty() : tensor<4xf32>
    %m = linalg.mul ins(%a, %c : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    %z = arith.constant dense<0.0> : tensor<f32>
    %r = linalg.reduce ins(%m : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    pipe.yield %r : tensor<f32>
  }
  return %1 : tensor<f32>
}

// -----

// A model argument that is no ranked tensor (unused, and still an argument
// of every step).
// expected-error @below {{'func.func' op argument #1 has type 'f32'; the model's arguments must be ranked tensors}}
func.func @m(%x: tensor<4xf32>, %n: f32, %w: tensor<4xf32> {zb.param = "w"}) -> tensor<f32> {
  %0 = pipe.stage 0 on rank 0 data(%x : tensor<4xf32>) params(%w : tensor<4xf32>) -> tensor<f32> forward {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %e = tensor.empty() : tensor<4xf32>
    %m = linalg.mul ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    %z = arith.constant dense<0.0> : tensor<f32>
    %r = linalg.reduce ins(%m : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    pipe.yield %r : tensor<f32>
  }
  return %0 : tensor<f32>
}

// -----

// The last stage yields no loss.
func.func @m(%x: tensor<4xf32>, %w: tensor<4xf32> {zb.param = "w"}) {
  // expected-error @below {{'pipe.stage' op is the last stage, whose first result must be the loss, a 0-d float tensor}}
  pipe.stage 0 on rank 0 data(%x : tensor<4xf32>) params(%w : tensor<4xf32>) forward {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %e = tensor.empty() : tensor<4xf32>
    %m = linalg.mul ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    pipe.running_stat %m {buffer = "n", momentum = 0.1 : f64} : tensor<4xf32>
    pipe.yield
  }
  return
}
