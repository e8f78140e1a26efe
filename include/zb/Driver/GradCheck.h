//===- GradCheck.h - Gradients against finite differences -------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_GRADCHECK_H
#define ZB_DRIVER_GRADCHECK_H

#include "zb/Driver/ModelData.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace zb {

struct GradCheckOptions {
  /// Largest accepted relative error; 0: 1e-6 for f64 models, 2e-2 for f32.
  double tolerance = 0.0;
  /// Entries sampled per parameter.
  int samples = 6;
  /// Picks the sampled entries, deterministically.
  uint64_t seed = 0;
};

/// The worst sampled entry.
struct GradCheckResult {
  double worst = 0.0;
  double tolerance = 0.0;
  /// "name[i]".
  std::string at;
  double analytic = 0.0;
  double numeric = 0.0;
  /// Entries compared, and entries passed over because the loss is not
  /// smooth within the step around them (a ReLU's kink, a top-k's switch).
  int64_t checked = 0, kinked = 0;
  bool passed() const { return checked > 0 && worst <= tolerance; }
};

/// Compares a sample of `grads` (the gradients of `params` by name) with
/// central finite differences of `meanLoss`, which runs the model on the
/// parameters in `data`. The error of an entry is relative to the
/// gradient's scale and to the rounding noise of the difference quotient,
/// so that entries near zero do not dominate through noise. An entry
/// whose difference quotients with the step, half the step and one side
/// of it disagree (by more than the tolerance) sits near a point where the
/// loss is not smooth, where neither is its derivative: the next entries
/// are tried instead (up to 8 per sample), and it counts as kinked.
GradCheckResult checkGradients(ModelData &data,
                               llvm::ArrayRef<const ModelArg *> params,
                               const zbrt::NpzArchive &grads,
                               llvm::function_ref<double()> meanLoss,
                               const GradCheckOptions &options);

} // namespace zb

#endif // ZB_DRIVER_GRADCHECK_H
