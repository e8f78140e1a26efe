// RUN: zb-opt %s --zb-autodiff -split-input-file -verify-diagnostics

// A body op without a rule: the error names it, and the enclosing generic
// names the parameter whose gradient needed it.
#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>
func.func @atan_in_body(%x: tensor<4x8xf32>, %w: tensor<4x8xf32> {zb.param = "w"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  // expected-error @below {{while differentiating 'linalg.generic' for the gradient of parameter 'w'}}
  %a = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %w : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.mulf %p, %q : f32
    // expected-error @below {{cannot differentiate 'math.atan' in a linalg.generic body}}
    %t = math.atan %s : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%a : tensor<4x8xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%p: f32, %acc: f32):
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A linalg op outside the rule set (a convolution) reached by a parameter's
// gradient inside a stage.
func.func @conv_in_stage(%x: tensor<1x6x6x1xf32>, %k: tensor<3x3x1x1xf32> {zb.param = "k"}) -> tensor<1x4x4x1xf32> {
  %y = pipe.stage 0 on rank 0 data(%x : tensor<1x6x6x1xf32>) params(%k : tensor<3x3x1x1xf32>) -> tensor<1x4x4x1xf32>
    forward {
    ^bb0(%a: tensor<1x6x6x1xf32>, %b: tensor<3x3x1x1xf32>):
      %e = tensor.empty() : tensor<1x4x4x1xf32>
      // expected-error @below {{cannot differentiate 'linalg.conv_2d_nhwc_hwcf': no gradient rule (needed for the gradient of}}
      %c = linalg.conv_2d_nhwc_hwcf ins(%a, %b : tensor<1x6x6x1xf32>, tensor<3x3x1x1xf32>) outs(%e : tensor<1x4x4x1xf32>) -> tensor<1x4x4x1xf32>
      pipe.yield %c : tensor<1x4x4x1xf32>
    }
  return %y : tensor<1x4x4x1xf32>
}

// -----

// A plain function's conv on a named parameter: the error says which one.
func.func @conv_plain(%x: tensor<1x6x6x1xf32>, %k: tensor<3x3x1x1xf32> {zb.param = "conv.k"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4x4x1xf32>
  // expected-error @below {{cannot differentiate 'linalg.conv_2d_nhwc_hwcf': no gradient rule (needed for the gradient of parameter 'conv.k')}}
  %c = linalg.conv_2d_nhwc_hwcf ins(%x, %k : tensor<1x6x6x1xf32>, tensor<3x3x1x1xf32>) outs(%e : tensor<1x4x4x1xf32>) -> tensor<1x4x4x1xf32>
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%c : tensor<1x4x4x1xf32>) outs(%l0 : tensor<f32>) dimensions = [0, 1, 2, 3]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %loss : tensor<f32>
}

// -----

// A stage whose forward already yields a stash was differentiated before
// (or hand-written half way): differentiating it again is refused.
func.func @stashed_without_backward(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'pipe.stage' op already stashes values but has no backward; cannot differentiate it again}}
  %y = pipe.stage 1 on rank 1 inputs(%x : tensor<4xf32>) params(%w : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %r = arith.mulf %a, %b : tensor<4xf32>
      pipe.yield %r : tensor<4xf32> stash(%a : tensor<4xf32>)
    }
  return %y : tensor<4xf32>
}

// -----

// A public model function must return the scalar loss: a vector result ...
// expected-error @below {{cannot differentiate 'vector_result': its result is not a scalar float tensor}}
func.func @vector_result(%x: tensor<4xf32>, %w: tensor<4xf32> {zb.param}) -> tensor<4xf32> {
  %r = arith.mulf %x, %w : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// ... and a second result are both refused.
// expected-error @below {{cannot differentiate 'two_results': it must return one scalar loss}}
func.func @two_results(%x: tensor<f32>, %w: tensor<f32> {zb.param}) -> (tensor<f32>, tensor<f32>) {
  %r = arith.mulf %x, %w : tensor<f32>
  return %r, %r : tensor<f32>, tensor<f32>
}

// -----

// A parameter that is no float tensor has no gradient of its shape.
// expected-error @below {{cannot differentiate 'index_param': parameter #1 has type 'index'; parameters must be ranked tensors of floats}}
func.func @index_param(%w: tensor<f32> {zb.param = "w"}, %n: index {zb.param = "n"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error @below {{cannot differentiate 'vector_param': parameter #1 has type 'vector<4xf32>'; parameters must be ranked tensors of floats}}
func.func @vector_param(%w: tensor<f32> {zb.param = "w"}, %v: vector<4xf32> {zb.param = "v"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error @below {{cannot differentiate 'complex_loss': its result is not a scalar float tensor}}
func.func @complex_loss(%x: tensor<complex<f32>>, %w: tensor<f32> {zb.param = "w"}) -> tensor<complex<f32>> {
  return %x : tensor<complex<f32>>
}

// -----

// An intermediate of dynamic shape: a diagnostic naming the op, not IR the
// verifier rejects (an adjoint's tensor.empty without its sizes).
func.func @dynamic_intermediate(%w: tensor<4x4xf32> {zb.param}, %x: tensor<2x4xf32>) -> tensor<f32> {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<2x4xf32>
  %xd = tensor.cast %x : tensor<2x4xf32> to tensor<?x4xf32>
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty(%d) : tensor<?x4xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y = linalg.matmul ins(%xd, %w : tensor<?x4xf32>, tensor<4x4xf32>) outs(%fill : tensor<?x4xf32>) -> tensor<?x4xf32>
  %s0 = tensor.empty() : tensor<f32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  // expected-error @below {{cannot differentiate 'linalg.reduce': %2 has the dynamic shape 'tensor<?x4xf32>'; gradients need static shapes}}
  %s = linalg.reduce ins(%y : tensor<?x4xf32>) outs(%sf : tensor<f32>) dimensions = [0, 1]
    (%a: f32, %b: f32) {
      %t = arith.addf %a, %b : f32
      linalg.yield %t : f32
    }
  return %s : tensor<f32>
}

// -----

// expected-error @below {{cannot differentiate 'dynamic_param': parameter #0 has type 'tensor<?x4xf32>'; parameters must be ranked tensors of floats with static shapes}}
func.func @dynamic_param(%w: tensor<?x4xf32> {zb.param}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %s0 = tensor.empty() : tensor<f32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %s = linalg.reduce ins(%w : tensor<?x4xf32>) outs(%sf : tensor<f32>) dimensions = [0, 1]
    (%a: f32, %b: f32) {
      %t = arith.addf %a, %b : f32
      linalg.yield %t : f32
    }
  return %s : tensor<f32>
}
