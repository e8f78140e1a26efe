//===- Optimizer.h - SGD and AdamW on host arrays ---------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The optimizers zb-run applies to a rank's parameters after each step.
// Plain element-wise loops in a fixed order, so that a run is bitwise
// reproducible and a resumed run continues exactly where it stopped. Every
// element is updated in double precision and rounded once to the
// parameter's type; the state (momentum, AdamW moments) has the parameter's
// type, as in PyTorch.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_OPTIMIZER_H
#define ZBRT_OPTIMIZER_H

#include "zbrt/Npz.h"

#include <cstdint>
#include <string>

namespace zbrt {

/// Which update rule, and its hyper-parameters.
struct OptimizerConfig {
  enum class Kind { SGD, AdamW };
  Kind kind = Kind::SGD;
  double lr = 0.01;
  /// SGD: the momentum factor (0: plain SGD). As in PyTorch: the first step
  /// sets the buffer to the gradient, later ones to momentum * buf + grad.
  double momentum = 0.0;
  /// AdamW's moment decay rates and denominator epsilon.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  /// Decoupled weight decay for AdamW (p -= lr * wd * p before the update);
  /// L2 (grad += wd * p) for SGD.
  double weightDecay = 0.0;
};

/// An optimizer with its per-parameter state.
///
/// AdamW step t (from 1), for each element:
///   p = p - lr * wd * p
///   m = beta1 * m + (1 - beta1) * g
///   v = beta2 * v + (1 - beta2) * g^2
///   p = p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
class Optimizer {
public:
  explicit Optimizer(const OptimizerConfig &config) : config(config) {}
  static Optimizer sgd(double lr, double momentum = 0.0,
                       double weightDecay = 0.0);
  static Optimizer adamw(double lr, double beta1 = 0.9, double beta2 = 0.999,
                         double eps = 1e-8, double weightDecay = 0.01);

  const OptimizerConfig &getConfig() const { return config; }
  /// The number of steps taken (or imported).
  int64_t getStep() const { return step; }

  /// Updates every array in `params` in place from the array of the same
  /// name in `grads` (same dtype, f32 or f64, and shape), then counts one
  /// step. Gradients without a parameter are ignored. On a missing or
  /// mismatched gradient returns false, sets `error` (naming the
  /// parameter) and changes nothing.
  bool apply(NpzArchive &params, const NpzArchive &grads, std::string &error);

  /// The state as arrays: AdamW "adam.t" (i64 scalar), "adam.m.<param>",
  /// "adam.v.<param>"; SGD "sgd.t" and, with momentum,
  /// "sgd.momentum.<param>". Names never collide across ranks that hold
  /// different parameters, so per-rank exports merge into one archive.
  NpzArchive exportState() const;
  /// Replaces the state by the entries of `state` that belong to this kind
  /// of optimizer. With `params`, only the state of those parameters is
  /// taken (others, e.g. another rank's, are skipped) and it must be there
  /// with their dtype and shape once a step has been taken. On error
  /// returns false, sets `error` and keeps the old state.
  bool importState(const NpzArchive &state, std::string &error,
                   const NpzArchive *params = nullptr);

  /// The per-parameter state by parameter name: `which` 0 is SGD's
  /// momentum buffers or AdamW's first moments, 1 AdamW's second moments.
  /// Empty before the first step. For an update that keeps the state
  /// elsewhere (zb::CompiledUpdate) to read it and hand it back.
  const NpzArchive &stateArrays(int which) const {
    return which == 0 ? first : second;
  }
  /// Replaces the state with `firstState` and `secondState` (as
  /// stateArrays() gives them, unchecked) after `steps` steps.
  void setState(int64_t steps, NpzArchive firstState, NpzArchive secondState) {
    step = steps;
    first = std::move(firstState);
    second = std::move(secondState);
  }

private:
  OptimizerConfig config;
  int64_t step = 0;
  /// Per parameter: SGD momentum buffer, or AdamW first moment.
  NpzArchive first;
  /// Per parameter: AdamW second moment.
  NpzArchive second;
};

} // namespace zbrt

#endif // ZBRT_OPTIMIZER_H
