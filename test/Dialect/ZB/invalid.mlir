// RUN: zb-opt %s -split-input-file -verify-diagnostics --zb-autodiff
// The zb dialect verifies the zb.* attributes wherever it is loaded (every
// ZeroBubble pass loads it): each message has a case here.

// expected-error @below {{argument #0: 'zb.param' must be unit or a non-empty name, got 3 : i64}}
func.func @param_not_a_name(%w: tensor<4xf32> {zb.param = 3}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.param' marks a parameter, which needs float elements, got 'tensor<4xi64>'}}
func.func @integer_param(%w: tensor<4xi64> {zb.param = "w"}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.data' must be a non-empty name, got ""}}
func.func @empty_data_name(%x: tensor<4xf32> {zb.data = ""}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.range' must be a positive integer, got 0 : i64}}
func.func @empty_range(%x: tensor<4xi64> {zb.range = 0}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.range' bounds integer data, but the argument is 'tensor<4xf32>'}}
func.func @float_range(%x: tensor<4xf32> {zb.range = 4}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.range_from' must be a negative integer, got 0 : i64}}
func.func @nonnegative_range_from(%x: tensor<4xi64> {zb.range = 4, zb.range_from = 0}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.range_from' must be -range or more (-4), got -5}}
func.func @range_from_past_the_table(%x: tensor<4xi64> {zb.range = 4, zb.range_from = -5}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.range_from' needs 'zb.range' beside it}}
func.func @range_from_alone(%x: tensor<4xi64> {zb.range_from = -4}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.range_ignored' must lie outside the range [-4, 4), got -2}}
func.func @ignored_inside_the_range(%x: tensor<4xi64> {zb.range = 4, zb.range_from = -4, zb.range_ignored = -2}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.range_ignored' needs 'zb.range' beside it}}
func.func @ignored_alone(%x: tensor<4xi64> {zb.range_ignored = -100}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.range_ignored' must be an integer, got 1.000000e+00 : f32}}
func.func @float_ignored(%x: tensor<4xi64> {zb.range = 4, zb.range_ignored = 1.0 : f32}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.rng' marks a random key, a tensor<1xi64>, got 'tensor<2xi64>'}}
func.func @wide_key(%k: tensor<2xi64> {zb.rng}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.rng' must be unit, got 1 : i64}}
func.func @valued_key(%k: tensor<1xi64> {zb.rng = 1}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// A parameter (float elements) is no key.
// expected-error @below {{argument #0: 'zb.rng' marks a random key, a tensor<1xi64>, got 'tensor<1xf32>'}}
func.func @param_key(%k: tensor<1xf32> {zb.param, zb.rng}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{argument #0: 'zb.weight' is not an argument attribute of the zb dialect}}
func.func @unknown_arg_attr(%x: tensor<4xf32> {zb.weight}) -> tensor<f32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// expected-error @below {{'zb.rank' must be an integer of at least 0, got -1 : i64}}
func.func private @negative_rank() attributes {zb.rank = -1}

// -----

// expected-error @below {{'zb.microbatches' must be an integer of at least 1, got 0 : i64}}
func.func private @no_microbatches() attributes {zb.microbatches = 0}

// -----

// expected-error @below {{'zb.params' must be an array of parameter names, got [1]}}
func.func private @params_not_names() attributes {zb.params = [1]}

// -----

// expected-error @below {{'zb.gradient_of' must name a function (a symbol reference), got "f"}}
func.func private @gradient_of_string() attributes {zb.gradient_of = "f"}

// -----

// expected-error @below {{'zb.grad_sums' must be an integer of at least 1, got 0}}
func.func private @no_sums(tensor<4xf32>) attributes {zb.grad_sums = 0}

// -----

// expected-error @below {{'zb.grad_sums' counts 2 sums but the function takes 1 arguments}}
func.func private @more_sums_than_arguments(tensor<4xf32>) attributes {zb.grad_sums = 2}

// -----

// expected-error @below {{'zb.param' belongs on an argument of the model function}}
func.func private @param_on_function() attributes {zb.param}

// -----

// expected-error @below {{unknown attribute 'zb.stage' of the zb dialect}}
func.func private @unknown_attr() attributes {zb.stage = 1}

// -----

// expected-error @below {{'zb.stages' belongs on a module}}
func.func private @stages_on_function() attributes {zb.stages = {}}

// -----

// expected-error @below {{the compiled program's 'zb.stages' attribute is malformed}}
module attributes {zb.stages = {rank = array<i64: 0>}} {
}

// -----

// expected-error @below {{the compiled program's 'zb.stages' attribute has lists of different lengths}}
module attributes {zb.stages = {rank = array<i64: 0, 1>, cost_f = array<f64: 1.0>, cost_b = array<f64: 1.0>, cost_w = array<f64: 1.0>, mem_b = array<i64: 0>, mem_w = array<i64: 0>, param_bytes = array<i64: 0>}} {
}
