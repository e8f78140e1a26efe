// RUN: zb-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// The forward region's arguments are the stage's inputs, data and params.
func.func @forward_args(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'pipe.stage' op region 'forward' must take 2 arguments of types ('tensor<4xf32>', 'tensor<4xf32>'), but takes ('tensor<4xf32>')}}
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) params(%w : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      pipe.yield %a : tensor<4xf32>
    }
  return %y : tensor<4xf32>
}

// -----

// The forward yields the stage's results.
func.func @forward_results(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      // expected-error @+1 {{'pipe.yield' op in region 'forward' must yield 1 values of types ('tensor<4xf32>'), but yields ()}}
      pipe.yield stash(%a : tensor<4xf32>)
    }
  return %y : tensor<4xf32>
}

// -----

// A region must end in pipe.yield, not another terminator.
func.func @foreign_terminator(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'pipe.stage' op region 'forward' must end in 'pipe.yield'}}
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      "test.terminator"() : () -> ()
    }
  return %y : tensor<4xf32>
}

// -----

// Backward regions take the forward stash, then the result cotangents.
func.func @backward_args(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'pipe.stage' op region 'backward' must take 2 arguments of types ('tensor<2xf32>', 'tensor<4xf32>'), but takes ('tensor<4xf32>')}}
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      %s = "test.op"() : () -> tensor<2xf32>
      pipe.yield %a : tensor<4xf32> stash(%s : tensor<2xf32>)
    } backward {
    ^bb0(%d: tensor<4xf32>):
      pipe.yield %d : tensor<4xf32>
    }
  return %y : tensor<4xf32>
}

// -----

// The fused backward yields one gradient per input and per param.
func.func @backward_grads(%x: tensor<4xf32>, %w: tensor<3xf32>) -> tensor<4xf32> {
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) params(%w : tensor<3xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<3xf32>):
      pipe.yield %a : tensor<4xf32>
    } backward {
    ^bb0(%d: tensor<4xf32>):
      // expected-error @+1 {{'pipe.yield' op in region 'backward' must yield 2 values of types ('tensor<4xf32>', 'tensor<3xf32>'), but yields ('tensor<4xf32>')}}
      pipe.yield %d : tensor<4xf32>
    }
  return %y : tensor<4xf32>
}

// -----

// Only the forward and B hand values on; the others cannot stash.
func.func @backward_stash(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      pipe.yield %a : tensor<4xf32>
    } backward {
    ^bb0(%d: tensor<4xf32>):
      // expected-error @+1 {{'pipe.yield' op in region 'backward' cannot stash values}}
      pipe.yield %d : tensor<4xf32> stash(%d : tensor<4xf32>)
    }
  return %y : tensor<4xf32>
}

// -----

// B and W come together.
func.func @b_without_w(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'pipe.stage' op regions 'backward_input' and 'backward_weight' must be present together}}
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      pipe.yield %a : tensor<4xf32>
    } backward_input {
    ^bb0(%d: tensor<4xf32>):
      pipe.yield %d : tensor<4xf32>
    }
  return %y : tensor<4xf32>
}

// -----

// A stage is either unsplit or split, not both.
func.func @fused_and_split(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'pipe.stage' op cannot have both a 'backward' region and the split 'backward_input'/'backward_weight' regions}}
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      pipe.yield %a : tensor<4xf32>
    } backward {
    ^bb0(%d: tensor<4xf32>):
      pipe.yield %d : tensor<4xf32>
    } backward_input {
    ^bb0(%d: tensor<4xf32>):
      pipe.yield %d : tensor<4xf32>
    } backward_weight {
      pipe.yield
    }
  return %y : tensor<4xf32>
}

// -----

// B takes the same arguments as the fused backward would.
func.func @b_args(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'pipe.stage' op region 'backward_input' must take 1 arguments of types ('tensor<4xf32>'), but takes ()}}
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      pipe.yield %a : tensor<4xf32>
    } backward_input {
      %d = "test.op"() : () -> tensor<4xf32>
      pipe.yield %d : tensor<4xf32>
    } backward_weight {
      pipe.yield
    }
  return %y : tensor<4xf32>
}

// -----

// B yields one gradient per input, and W takes exactly B's stash.
func.func @w_args(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'pipe.stage' op region 'backward_weight' must take 1 arguments of types ('tensor<4xf32>'), but takes ('tensor<4xf32>', 'tensor<4xf32>')}}
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) params(%w : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      pipe.yield %a : tensor<4xf32>
    } backward_input {
    ^bb0(%d: tensor<4xf32>):
      pipe.yield %d : tensor<4xf32> stash(%d : tensor<4xf32>)
    } backward_weight {
    ^bb0(%d: tensor<4xf32>, %e: tensor<4xf32>):
      pipe.yield %d : tensor<4xf32>
    }
  return %y : tensor<4xf32>
}

// -----

// W yields one gradient per param.
func.func @w_grads(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) params(%w : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      pipe.yield %a : tensor<4xf32>
    } backward_input {
    ^bb0(%d: tensor<4xf32>):
      pipe.yield %d : tensor<4xf32>
    } backward_weight {
      // expected-error @+1 {{'pipe.yield' op in region 'backward_weight' must yield 1 values of types ('tensor<4xf32>'), but yields ()}}
      pipe.yield
    }
  return %y : tensor<4xf32>
}

// -----

// Regions other than the forward are checked for a single block too.
func.func @two_blocks(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'pipe.stage' op region 'backward' must have exactly one block}}
  %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      pipe.yield %a : tensor<4xf32>
    } backward {
    ^bb0(%d: tensor<4xf32>):
      "test.br"() [^bb1] : () -> ()
    ^bb1:
      pipe.yield %d : tensor<4xf32>
    }
  return %y : tensor<4xf32>
}

// -----

// Stage indices are non-negative.
func.func @negative_stage(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'pipe.stage' op attribute 'stage' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %y = pipe.stage -1 on rank 0 inputs(%x : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>):
      pipe.yield %a : tensor<4xf32>
    }
  return %y : tensor<4xf32>
}

// -----

// pipe.yield only ends stage regions.
func.func @yield_outside(%x: tensor<4xf32>) {
  // expected-error @+1 {{'pipe.yield' op expects parent op 'pipe.stage'}}
  pipe.yield %x : tensor<4xf32>
}

// -----

// A cut marker is an identity: same type in and out.
func.func @cut_type(%x: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'pipe.cut' op requires the same type for all operands and results}}
  %y = "pipe.cut"(%x) : (tensor<4xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// A running statistic is a float tensor of static shape.
func.func @running_stat_integer(%x: tensor<4xi64>) {
  // expected-error @+1 {{'pipe.running_stat' op records a statically shaped f32 or f64 tensor, not 'tensor<4xi64>'}}
  pipe.running_stat %x {buffer = "n", momentum = 0.1 : f64} : tensor<4xi64>
  return
}

// -----

func.func @running_stat_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{'pipe.running_stat' op records a statically shaped f32 or f64 tensor, not 'tensor<?xf32>'}}
  pipe.running_stat %x {buffer = "n", momentum = 0.1 : f64} : tensor<?xf32>
  return
}

// -----

func.func @running_stat_momentum(%x: tensor<4xf32>) {
  // expected-error @+1 {{'pipe.running_stat' op 'momentum' must lie in [0, 1], got 1.5}}
  pipe.running_stat %x {buffer = "n", momentum = 1.5 : f64} : tensor<4xf32>
  return
}

// -----

func.func @running_stat_unnamed(%x: tensor<4xf32>) {
  // expected-error @+1 {{'pipe.running_stat' op needs a non-empty 'buffer' name}}
  pipe.running_stat %x {buffer = "", momentum = 0.1 : f64} : tensor<4xf32>
  return
}

// -----

// Stages pass ranked tensors (a cut of a scalar would give a stage a scalar
// input).
func.func @scalar_input(%x: f32, %w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'pipe.stage' op operand #0 must be variadic of ranked tensor of any type values, but got 'f32'}}
  %y = pipe.stage 0 on rank 0 inputs(%x : f32) params(%w : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: f32, %b: tensor<4xf32>):
      pipe.yield %b : tensor<4xf32>
    }
  return %y : tensor<4xf32>
}

// -----

func.func @scalar_cut(%x: f32) -> f32 {
  // expected-error @+1 {{'pipe.cut' op operand #0 must be ranked tensor of any type values, but got 'f32'}}
  %y = "pipe.cut"(%x) : (f32) -> f32
  return %y : f32
}
