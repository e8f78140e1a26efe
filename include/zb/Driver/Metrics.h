//===- Metrics.h - The --metrics file of a run ------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// One JSON object per run (docs/Runtime.md lists the fields): the loss per
// step, the throughput, per-microbatch losses of --eval/--grads, the
// gradient checks, the measured figures of a pipelined run, and what ran.
// A value that is not finite (the loss or norm of a skipped step) is null:
// JSON has no NaN.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_METRICS_H
#define ZB_DRIVER_METRICS_H

#include "zb/Driver/Measure.h"
#include "zb/Driver/Training.h"

#include <optional>

namespace zb {

struct RunMetrics {
  /// The loss of each step run.
  std::vector<double> losses;
  /// Whether the losses are an f64 model's: written with the 17
  /// significant digits that give back the double (an f32 loss's 9 give
  /// back the float).
  bool f64Losses = false;
  /// Microbatches per second of each step, every replica's counted; empty:
  /// not written (no throughput without training).
  std::vector<double> microbatchesPerSecond;
  /// Samples in one microbatch (for "samples_per_s").
  int64_t samplesPerMicrobatch = 1;
  /// --eval and --grads on one process: each microbatch's loss.
  std::optional<std::vector<double>> microbatchLosses;
  /// The steps' gradient checks, the first being step `firstStep` (0-based);
  /// written with clipping or when a step was skipped.
  std::vector<StepCheck> checks;
  int64_t firstStep = 0;
  bool clipping = false;
  /// A pipelined run's figures; with `replicas` > 1 also its reductions'.
  const run::RunMeasurement *measured = nullptr;
  int64_t ranks = 1;
  int64_t replicas = 1;
  /// The schedule that ran; "none" on one process.
  std::string schedule = "none";
};

/// The metrics as one line of JSON.
std::string metricsJson(const RunMetrics &metrics);

} // namespace zb

#endif // ZB_DRIVER_METRICS_H
