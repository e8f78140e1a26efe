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
#include "zb/Driver/Update.h"

#include "zbrt/CUDA.h"
#include "zbrt/Executable.h"

#include <algorithm>

namespace zb {

/// The whole model on one process.
class ModelProgram : public StepProgram {
public:
  /// `gradient`: the model's `<name>_grad_acc` entry point (adding a
  /// microbatch's gradients into sums it takes); null: forward only (run()
  /// leaves the gradients empty). `forward`: the model's `<name>`, which
  /// meanLoss() and a run() without `gradient` call (null where neither
  /// is called).
  ModelProgram(ModelData &data, zbrt::EntryFn forward, zbrt::EntryFn gradient);

  /// The mean loss over the step's microbatches and, with a gradient entry
  /// point, the mean gradients of every parameter (signature order).
  double run(int64_t step, std::vector<zbrt::NpyArray> &grads) override;

  /// The forward's mean loss over the microbatches of step `step`.
  double meanLoss(int64_t step);

  /// The losses of the microbatches of the last run().
  llvm::ArrayRef<double> microbatchLosses() const { return losses; }

private:
  /// The loss of microbatch `mb` of step `step`; with `grads` (one sum per
  /// parameter), also adds the microbatch's gradients into them.
  double runMicrobatch(int64_t step, int64_t mb,
                       std::vector<zbrt::NpyArray> *grads);
  /// The model's parameter arguments.
  std::vector<const ModelArg *> params() const;

  ModelData &data;
  zbrt::EntryFn forward, gradient;
  std::vector<double> losses;
};

/// One rank's part of a pipelined step. With `cuda`, the step runs on the
/// device: the parameters are uploaded before the first step and then stay
/// there (a compiled update changes them in place, see rankBuffers()), the
/// gradients stay there too (run() returns none; gradsFromDevice() reads
/// the last step's), and each step uploads its data without waiting and
/// reads back its loss (and the gradients' sums of squares,
/// computeGradSquares()) in one wait. With `recordActions`,
/// the steps' action records are gathered on rank 0 of `world` at the end
/// (endRun(), measuredSteps()).
class PipelineRankProgram : public StepProgram {
public:
  PipelineRankProgram(ModelData &data, llvm::ArrayRef<const ModelArg *> params,
                      zbrt::EntryFn step, zbrt::Comm &world,
                      const zbrt::CUDARuntime *cuda = nullptr,
                      bool recordActions = true);
  ~PipelineRankProgram() override;

  /// Runs the rank's step function: its share of the loss (0 unless the
  /// rank computes it) and its gradients, in the step function's parameter
  /// order (none when they stay on the device). Aborts the job on a device
  /// error or malformed records from a rank.
  double run(int64_t step, std::vector<zbrt::NpyArray> &grads) override;
  void runsUntil(int64_t step) override { endStep = std::min(endStep, step); }
  /// Gathers the steps' action records on rank 0 (measuredSteps()).
  void endRun() override;

  /// With `cuda`: the last step's gradients, read from the device (in the
  /// step function's parameter order).
  std::vector<zbrt::NpyArray> gradsFromDevice();

  /// After each step, also run `gradSquares` (the rank's
  /// `@zb_rank<r>_grad_squares`) on its gradients, into
  /// rankBuffers().gradSquares.
  void computeGradSquares(zbrt::EntryFn gradSquares) {
    squaresEntry = gradSquares;
  }

  /// What a compiled update needs of the program: with `cuda` the device
  /// buffers of the parameters and of the last step's gradients (allocated
  /// on first use; the job aborts when the device has no room), and the
  /// gradients' sums of squares.
  const RankBuffers &rankBuffers();

  /// On world rank 0: per step run, every process's records.
  std::vector<std::vector<run::RankStep>> &measuredSteps() { return steps; }

private:
  /// The step inputs of step `step`, in the signature's order.
  std::vector<zbrt::NpyArray> stepInputs(int64_t step) const;
  /// Step `step` on the device: `callArgs` holds the parameters, `numData`
  /// step inputs and the loss (host arrays, given their shapes); fills
  /// the loss from the device. While the step runs, the next step's inputs
  /// are uploaded on the copy stream.
  void runOnDevice(int64_t step, std::vector<zbrt::NpyArray *> &callArgs,
                   size_t numData);
  /// Calls squaresEntry on the gradients at `grads` (with the parameters'
  /// shapes), writing the sums at `sums`.
  void callGradSquares(const std::vector<void *> &grads, double *sums);

  ModelData &data;
  std::vector<const ModelArg *> params;
  zbrt::EntryFn entry;
  zbrt::Comm &world;
  const zbrt::CUDARuntime *cuda;
  bool recordActions;
  zbrt::EntryFn squaresEntry = nullptr;
  /// Device buffers of the parameters and gradients (and the sums read
  /// back); of the steps' data, two sets (step s uses set s % 2, so that
  /// step s + 1's upload overlaps step s); of the loss then the sums (one
  /// read-back), allocated by the first step, which also uploads the
  /// parameters.
  RankBuffers buffers;
  std::vector<void *> deviceInputs[2];
  void *deviceResults = nullptr;
  /// The step whose inputs were prefetched into their set (-1 for none),
  /// and those inputs on the host (run() passes their shapes).
  int64_t prefetchedStep = -1;
  std::vector<zbrt::NpyArray> prefetchedInputs;
  /// The end of the steps whose data may be prefetched: the data's, or the
  /// training loop's when it ends sooner (runsUntil()).
  int64_t endStep;
  double firstOrigin = 0.0;
  bool started = false;
  std::vector<std::vector<run::RankStep>> steps;
  /// This rank's records per step run, serialized, until endRun().
  std::vector<std::pair<int64_t, std::string>> localSteps;
};

} // namespace zb

#endif // ZB_DRIVER_PROGRAMS_H
