//===- Metrics.cpp - The --metrics file of a run --------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/Metrics.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <cmath>

using namespace zb;

/// A number with `digits` significant digits, "%.9g" by default (null when
/// not finite).
static void number(llvm::json::OStream &os, double value, int digits = 9) {
  if (!std::isfinite(value)) {
    os.value(nullptr);
    return;
  }
  os.rawValue([&](llvm::raw_ostream &out) {
    out << llvm::format("%.*g", digits, value);
  });
}

static void numbers(llvm::json::OStream &os, llvm::StringRef key,
                    llvm::ArrayRef<double> values, int digits = 9) {
  os.attributeArray(key, [&] {
    for (double v : values)
      number(os, v, digits);
  });
}

template <typename T>
static void integers(llvm::json::OStream &os, llvm::StringRef key,
                     const std::vector<T> &values) {
  os.attributeArray(key, [&] {
    for (T v : values)
      os.value(static_cast<int64_t>(v));
  });
}

/// The measured figures of a pipelined run.
static void measurement(llvm::json::OStream &os, const run::RunMeasurement &m,
                        bool replicas) {
  auto fixed = [&](llvm::StringRef key, double value) {
    os.attributeBegin(key);
    os.rawValue(
        [&](llvm::raw_ostream &out) { out << llvm::format("%.6f", value); });
    os.attributeEnd();
  };
  fixed("bubble_rate", m.bubble);
  fixed("simulated_bubble_rate", m.simulatedBubble);
  numbers(os, "step_bubble_rate", m.stepBubble);
  integers(os, "peak_stash_bytes", m.peakStash);
  integers(os, "predicted_stash_bytes", m.predictedStash);
  integers(os, "peak_memory_bytes", m.peakMemory);
  integers(os, "microbatch_stash_bytes", m.microbatchStash);
  integers(os, "microbatch_w_stash_bytes", m.microbatchWStash);
  integers(os, "borrowed_core_products", m.borrowedProducts);
  numbers(os, "borrowed_core_share", m.borrowedShare);
  if (replicas) {
    fixed("reduction_wait_ms", m.reductionWait);
    fixed("simulated_reduction_ms", m.simulatedReduction);
  }
}

/// With clipping or after a skipped step: the global norm per step
/// ("grad_norm"), the clipped and the skipped steps (1-based).
static void checks(llvm::json::OStream &os, const RunMetrics &metrics) {
  bool any = metrics.clipping ||
             llvm::any_of(metrics.checks,
                          [](const StepCheck &c) { return c.skipped; });
  if (!any)
    return;
  os.attributeArray("grad_norm", [&] {
    for (const StepCheck &c : metrics.checks)
      number(os, c.norm);
  });
  auto steps = [&](llvm::StringRef key, auto pick) {
    os.attributeArray(key, [&] {
      for (size_t i = 0; i < metrics.checks.size(); ++i)
        if (pick(metrics.checks[i]))
          os.value(metrics.firstStep + int64_t(i) + 1);
    });
  };
  steps("clipped_steps", [](const StepCheck &c) { return c.clipped; });
  steps("skipped_steps", [](const StepCheck &c) { return c.skipped; });
}

std::string zb::metricsJson(const RunMetrics &metrics) {
  std::string json;
  llvm::raw_string_ostream out(json);
  llvm::json::OStream os(out);
  os.object([&] {
    int lossDigits = metrics.f64Losses ? 17 : 9;
    numbers(os, "loss", metrics.losses, lossDigits);
    if (!metrics.microbatchesPerSecond.empty()) {
      numbers(os, "microbatches_per_s", metrics.microbatchesPerSecond);
      std::vector<double> samples;
      for (double r : metrics.microbatchesPerSecond)
        samples.push_back(r * metrics.samplesPerMicrobatch);
      numbers(os, "samples_per_s", samples);
    }
    if (metrics.microbatchLosses)
      numbers(os, "microbatch_loss", *metrics.microbatchLosses, lossDigits);
    if (metrics.measured)
      measurement(os, *metrics.measured, metrics.replicas > 1);
    checks(os, metrics);
    os.attribute("ranks", metrics.ranks);
    os.attribute("replicas", metrics.replicas);
    os.attribute("schedule", metrics.schedule);
  });
  out << "\n";
  return json;
}
