//===- Programs.h - What one process runs in a step -------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The two step programs of the training loop (Training.h): the whole model
// on one process, through the forward and gradient entry points the CPU
// compiler emits for it, run per microbatch; and one rank's part of a
// pipeline, through the rank's compiled step function, which runs every
// microbatch under the schedule and talks to the other ranks itself.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_PROGRAMS_H
#define ZB_DRIVER_PROGRAMS_H

#include "zb/Driver/Measure.h"
#include "zb/Driver/Training.h"

#include "zbrt/CUDA.h"
#include "zbrt/Executable.h"

namespace zb {

/// The whole model on one process.
class ModelProgram : public StepProgram {
public:
  /// `gradient` null: forward only (run() leaves the gradients empty).
  ModelProgram(ModelData &data, zbrt::EntryFn forward, zbrt::EntryFn gradient,
               zbrt::DType lossType);

  /// The mean loss over the step's microbatches and, with a gradient entry
  /// point, the mean gradients of every parameter (signature order).
  double run(int64_t step, std::vector<zbrt::NpyArray> &grads) override;

  /// The forward's mean loss over the microbatches of step `step`.
  double meanLoss(int64_t step);

  /// The losses of the microbatches of the last run().
  llvm::ArrayRef<double> microbatchLosses() const { return losses; }

private:
  /// The loss of microbatch `mb` of step `step`; with `grads`, also adds
  /// the microbatch's gradients into it.
  double runMicrobatch(int64_t step, int64_t mb,
                       std::vector<zbrt::NpyArray> *grads);

  ModelData &data;
  zbrt::EntryFn forward, gradient;
  zbrt::DType lossType;
  std::vector<double> losses;
};

/// One rank's part of a pipelined step. With `cuda`, every argument goes
/// through device memory (the optimizer stays on the host). With
/// `recordActions`, each step's action records are gathered on rank 0 of
/// `world` (measuredSteps()).
class PipelineRankProgram : public StepProgram {
public:
  PipelineRankProgram(ModelData &data, llvm::ArrayRef<const ModelArg *> params,
                      zbrt::EntryFn step, zbrt::Comm &world,
                      const zbrt::CUDARuntime *cuda = nullptr,
                      bool recordActions = true);
  ~PipelineRankProgram() override;

  /// Runs the rank's step function: its share of the loss (0 unless the
  /// rank computes it) and its gradients, in the step function's parameter
  /// order. Aborts the job on a device error or malformed records from a
  /// rank.
  double run(int64_t step, std::vector<zbrt::NpyArray> &grads) override;

  /// On world rank 0: per step run, every process's records.
  std::vector<std::vector<run::RankStep>> &measuredSteps() { return steps; }

private:
  ModelData &data;
  std::vector<const ModelArg *> params;
  zbrt::EntryFn entry;
  zbrt::Comm &world;
  const zbrt::CUDARuntime *cuda;
  bool recordActions;
  std::vector<void *> devicePointers;
  double firstOrigin = 0.0;
  bool started = false;
  std::vector<std::vector<run::RankStep>> steps;
};

} // namespace zb

#endif // ZB_DRIVER_PROGRAMS_H
