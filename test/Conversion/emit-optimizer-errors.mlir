// RUN: zb-opt %s --split-input-file --verify-diagnostics --zb-emit-optimizer

// expected-error @below {{--zb-emit-optimizer: no step function}}
module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// expected-error @below {{parameter 'ids' is 'tensor<4xi64>'; the compiled optimizer updates static f32 or f64 tensors}}
func.func @zb_rank0_step(%ids: tensor<4xi64>) -> tensor<4xi64>
    attributes {zb.rank = 0 : i64, zb.params = ["ids"]} {
  return %ids : tensor<4xi64>
}

// -----

// expected-error @below {{2 parameters named in zb.params but 1 arguments}}
func.func @zb_rank0_step(%w: tensor<4xf32>) -> tensor<4xf32>
    attributes {zb.rank = 0 : i64, zb.params = ["w", "b"]} {
  return %w : tensor<4xf32>
}

// -----

func.func @zb_rank0_step(%w: tensor<4xf32>) -> tensor<4xf32>
    attributes {zb.rank = 0 : i64, zb.params = ["w"]} {
  return %w : tensor<4xf32>
}
// expected-error @below {{'zb.optimizer' must name the optimizer (a string), got 3}}
func.func @g() attributes {zb.optimizer = 3} {
  return
}
