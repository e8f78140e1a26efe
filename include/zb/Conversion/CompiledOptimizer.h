//===- CompiledOptimizer.h - The compiled optimizer's contract --*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// What `--zb-emit-optimizer` emits and its caller fills in: for a rank's
// step function `@zb_rank<r>_step` with N parameters, a public function
//
//   @zb_rank<r>_update(params[N], grads[N], state[S][N], hyper)
//
// that updates the parameters and the optimizer state in place (S = 0 for
// sgd, 1 for sgd-momentum, 2 for adamw: the momentum buffers, or AdamW's
// first then second moments). `hyper` is a tensor<kNumHyper x f64> laid out
// as below, read inside the update (on the GPU: by the kernels, so the
// caller uploads it with the step's other inputs). Every element is
// computed in f64 and rounded once to the parameter's type, in the order of
// zbrt::Optimizer (runtime/lib/Optimizer.cpp), so that a compiled update on
// the CPU equals the runtime's bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_CONVERSION_COMPILEDOPTIMIZER_H
#define ZB_CONVERSION_COMPILEDOPTIMIZER_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace zb::optimizer {

/// Which update rule a function implements.
enum class Kind { SGD, SGDMomentum, AdamW };

/// "sgd", "sgd-momentum", "adamw" and back.
std::optional<Kind> parseKind(llvm::StringRef name);
llvm::StringRef kindName(Kind kind);
/// The state arrays per parameter (0, 1 or 2).
int64_t numStates(Kind kind);

/// The functions --zb-emit-optimizer adds for rank `rank`:
/// "zb_rank<r>_update" and "zb_rank<r>_grad_squares".
std::string updateFunction(int64_t rank);
std::string gradSquaresFunction(int64_t rank);

/// The entries of the `hyper` argument. Values the runtime's loop computes
/// once per step (1 - beta1, 1 - lr * weight decay, the bias corrections)
/// are passed precomputed, so that they round exactly as there.
enum Hyper : int64_t {
  kLearningRate = 0,
  /// The gradient clipping factor (1 when not clipping); f32 gradients are
  /// multiplied by it rounded to f32, as zb-run's clipping does.
  kClipScale,
  /// SGD: L2 weight decay (grad + wd * p).
  kWeightDecay,
  /// SGD with momentum: the momentum factor, and 1 on the first step (the
  /// buffer starts as the gradient), else 0.
  kMomentum,
  kFirstStep,
  /// AdamW: beta1, 1 - beta1, beta2, 1 - beta2, 1 - lr * weight decay,
  /// 1 - beta1^t, 1 - beta2^t and epsilon.
  kBeta1,
  kOneMinusBeta1,
  kBeta2,
  kOneMinusBeta2,
  kDecay,
  kCorrection1,
  kCorrection2,
  kEpsilon,
  kNumHyper
};

} // namespace zb::optimizer

#endif // ZB_CONVERSION_COMPILEDOPTIMIZER_H
