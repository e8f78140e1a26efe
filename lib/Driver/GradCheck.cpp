//===- GradCheck.cpp - Gradients against finite differences ---------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/GradCheck.h"

#include <algorithm>
#include <cmath>

using namespace zb;

namespace {
/// The loss along one entry: at x, x +- eps and x +- eps / 2.
struct Along {
  double at, up, down, upHalf, downHalf;
};
} // namespace

GradCheckResult zb::checkGradients(ModelData &data,
                                   llvm::ArrayRef<const ModelArg *> params,
                                   const zbrt::NpzArchive &grads,
                                   llvm::function_ref<double()> meanLoss,
                                   const GradCheckOptions &options) {
  GradCheckResult result;
  result.tolerance = options.tolerance;
  for (const ModelArg *arg : params) {
    zbrt::NpyArray &param = data.values()[arg->position];
    const zbrt::NpyArray &grad = grads.at(arg->name);
    bool isF64 = param.dtype == zbrt::DType::F64;
    if (result.tolerance <= 0)
      result.tolerance = isF64 ? 1e-6 : 2e-2;
    double ulp = isF64 ? 2.2e-16 : 1.2e-7;
    double gradScale = 0;
    for (int64_t i = 0, e = grad.numElements(); i < e; ++i)
      gradScale = std::max(gradScale, std::fabs(loadScalar(grad, i)));
    auto along = [&](int64_t i, double eps) {
      double x = loadScalar(param, i);
      auto at = [&](double v) {
        storeScalar(param, i, v);
        return meanLoss();
      };
      Along a{at(x), at(x + eps), at(x - eps), at(x + eps / 2),
              at(x - eps / 2)};
      storeScalar(param, i, x);
      return a;
    };
    // |a - b| relative to them and to the gradient's scale, with `slack`
    // (what rounding can make them differ by) never above the tolerance.
    auto relative = [&](double a, double b, double slack) {
      double denom = std::max({std::fabs(a), std::fabs(b), 1e-3 * gradScale,
                               slack / result.tolerance, 1e-300});
      return std::fabs(a - b) / denom;
    };
    int64_t n = param.numElements();
    int64_t samples = std::min<int64_t>(n, std::max(1, options.samples));
    constexpr int64_t kTries = 8;
    for (int64_t s = 0; s < samples; ++s) {
      // Spread the sampled entries over the tensor, deterministically.
      int64_t first = (s * n) / samples + (options.seed + s * 7919) %
                                              std::max<int64_t>(1, n / samples);
      for (int64_t t = 0; t < std::min(kTries, n); ++t) {
        int64_t i = (first + t) % n;
        double eps = (isF64 ? 1e-6 : 2e-3) *
                     std::max(1.0, std::fabs(loadScalar(param, i)));
        Along a = along(i, eps);
        // Central quotients with both steps; one-sided ones, which differ
        // by eps times the curvature where the loss is smooth, by the
        // change of slope at a kink within the step.
        double whole = (a.up - a.down) / (2 * eps);
        double half = (a.upHalf - a.downHalf) / eps;
        // The rounding of the central quotient: 16 ulp of the loss (a
        // model's loss is the sum of many rounded terms) over 2 eps; the
        // half step's is twice that, the one-sided ones' difference 4 times
        // (compared within half of that).
        double noise = 16 * ulp * std::max(1.0, std::fabs(a.at)) / (2 * eps);
        bool kinked = relative(whole, half, 3 * noise) > result.tolerance;
        if (isF64) {
          // Rounding is small enough to take the curvature out: where the
          // loss is smooth, the half step's one-sided difference is half
          // the step's; at a kink, the same.
          double bend = (a.up - 2 * a.at + a.down) / eps;
          double halfBend = 4 * (a.upHalf - 2 * a.at + a.downHalf) / eps;
          kinked |= relative(bend, halfBend, 40 * noise) > result.tolerance;
        } else {
          // It is not: a curvature above tolerance / eps relative to the
          // slope counts as a kink too (the entry is passed over).
          kinked |= relative((a.up - a.at) / eps, (a.at - a.down) / eps,
                             2 * noise) > result.tolerance;
        }
        if (kinked) {
          ++result.kinked;
          continue;
        }
        double analytic = loadScalar(grad, i);
        double err = relative(whole, analytic, noise);
        ++result.checked;
        if (err >= result.worst) {
          result.worst = err;
          result.at = arg->name + "[" + std::to_string(i) + "]";
          result.analytic = analytic;
          result.numeric = whole;
        }
        break;
      }
    }
  }
  return result;
}
