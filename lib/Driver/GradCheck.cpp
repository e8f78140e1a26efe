//===- GradCheck.cpp - Gradients against finite differences ---------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/GradCheck.h"

#include <algorithm>
#include <cmath>

using namespace zb;

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
    double gradScale = 0;
    for (int64_t i = 0, e = grad.numElements(); i < e; ++i)
      gradScale = std::max(gradScale, std::fabs(loadScalar(grad, i)));
    int64_t n = param.numElements();
    int64_t samples = std::min<int64_t>(n, std::max(1, options.samples));
    for (int64_t s = 0; s < samples; ++s) {
      // Spread the sampled entries over the tensor, deterministically.
      int64_t i = (s * n) / samples +
                  (options.seed + s * 7919) % std::max<int64_t>(1, n / samples);
      double x = loadScalar(param, i);
      double eps = (isF64 ? 1e-6 : 2e-3) * std::max(1.0, std::fabs(x));
      storeScalar(param, i, x + eps);
      double up = meanLoss();
      storeScalar(param, i, x - eps);
      double down = meanLoss();
      storeScalar(param, i, x);
      double numeric = (up - down) / (2 * eps);
      double analytic = loadScalar(grad, i);
      // About 100 ulp of the loss over 2·eps.
      double ulp = isF64 ? 2.2e-16 : 1.2e-7;
      double noise = 100 * ulp * std::max(1.0, std::fabs(up)) / (2 * eps);
      double denom = std::max({std::fabs(numeric), std::fabs(analytic),
                               1e-3 * gradScale, noise, 1e-12});
      double err = std::fabs(numeric - analytic) / denom;
      if (err >= result.worst) {
        result.worst = err;
        result.at = arg->name + "[" + std::to_string(i) + "]";
        result.analytic = analytic;
        result.numeric = numeric;
      }
    }
  }
  return result;
}
