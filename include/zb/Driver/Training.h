//===- Training.h - The training loop over a rank's program -----*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// One loop runs every kind of step zb-run knows: a process runs its step
// program (the whole model on one process, or one rank's part of a
// pipeline), the loss is averaged over the replicas, and the optimizer
// update is post-validated as in the zero-bubble paper (§4): clipping and
// skipped non-finite steps are decided alike on every rank without a
// synchronisation before the update. Without clipping a pipeline's ranks
// do not wait for each other between steps at all: a step's check is read
// after the next step has run (which runs again when the check voids the
// update, i.e. after a skipped step). Checkpoints and --resume live here
// too: one checkpoint per run, written by replica 0's ranks.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_TRAINING_H
#define ZB_DRIVER_TRAINING_H

#include "zb/Driver/ModelData.h"
#include "zb/Driver/Update.h"

#include "zbrt/Checkpoint.h"
#include "zbrt/Comm.h"
#include "zbrt/Optimizer.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <functional>
#include <optional>

namespace zb {

/// What one process computes in a step.
class StepProgram {
public:
  virtual ~StepProgram();
  /// Runs step `step` on the current parameters and returns the process's
  /// share of its replica's mean loss over the microbatches (all of it on
  /// the process that computes the loss, 0 on the others); unless it is
  /// forward-only, sets `grads[i]` to the gradient of the process's i-th
  /// parameter, a mean over the microbatches (and the replicas, when the
  /// program averages over them).
  virtual double run(int64_t step, std::vector<zbrt::NpyArray> &grads) = 0;
  /// Called by train() before its first step: the steps it runs end before
  /// `endStep` (a program may prepare later steps' data ahead).
  virtual void runsUntil(int64_t endStep) {}
  /// Called by train() after its last step. A program runs a step again
  /// (run() with the same step) when the previous step's update turned out
  /// void after it had started.
  virtual void endRun() {}
};

/// What the global check of a step's gradients found.
struct StepCheck {
  /// The global gradient norm; NaN when a gradient is not finite.
  double norm = 0.0;
  bool clipped = false;
  bool skipped = false;
};

/// How a step's update is checked.
struct UpdateOptions {
  /// Clip the global gradient norm to this; 0: no clipping.
  double clipGradNorm = 0.0;
  /// Wait for the global check before updating (the reference the
  /// post-validated update must equal).
  bool synchronous = false;
};

/// The post-validated optimizer step of this process's parameters (the
/// zero-bubble paper's §4), in two halves so that other work may run
/// between them. start() adds the rank's partial squared norm and count of
/// non-finite gradient values and starts gathering them over the ranks of
/// `comm` (with the rank's share of the step's loss and its time), and,
/// when `optimistic`, updates at once (saving what it changes), unless the
/// rank already knows the update is void. finish() reads the gather (the
/// sums added in rank order: the same bits everywhere): when a gradient
/// somewhere is not finite (or the squares overflow) the update is
/// restored and the step skipped; when the norm exceeds the clip, it is
/// restored and redone with the gradients scaled by clip / (norm + 1e-6).
/// Both return false with `error` set when the update fails.
class StepValidation {
public:
  bool start(zbrt::Comm &comm, ParamUpdate &update,
             const zbrt::NpzArchive &grads, bool optimistic, double loss,
             double seconds, std::string &error);
  bool finish(ParamUpdate &update, const zbrt::NpzArchive &grads,
              const UpdateOptions &options, StepCheck &check,
              std::string &error);
  /// After finish(): whether what ran between start() and finish() saw the
  /// final parameters: false when the update was optimistic and the check
  /// voided it (alike on every rank, those that did not update included).
  bool optimisticStood() const { return stood; }
  /// After finish(): the ranks' losses summed, their longest time.
  double lossSum() const { return loss; }
  double maxSeconds() const { return seconds; }
  /// This rank's loss as given to start().
  double myLoss() const { return mine[2]; }

private:
  /// Per rank: squares, non-finite count, loss, seconds.
  static constexpr size_t kValues = 4;
  zbrt::Comm *comm = nullptr;
  /// The gather's buffers, which stay in place while it runs.
  std::vector<double> mine, all;
  bool optimistic = false;
  bool updated = false;
  bool stood = true;
  double loss = 0.0, seconds = 0.0;
};

/// Both halves of a StepValidation at once: the update of a step with the
/// gradients `grads` (host arrays by name, empty where they stayed on the
/// device), optimistic unless `options.synchronous`.
bool checkedUpdate(zbrt::Comm &comm, ParamUpdate &update,
                   const zbrt::NpzArchive &grads, const UpdateOptions &options,
                   StepCheck &check, std::string &error);

/// What a checkpoint belongs to: the model's text and the optimizer.
std::string checkpointConfig(llvm::StringRef modelText,
                             llvm::StringRef optimizerName);

/// --resume: reads the checkpoint in `dir`, checks it against `config`,
/// `steps` (the run's total) and the model's parameters, then gives
/// `params` (this process's) its values and `optimizer` its state for them.
/// Returns the first step to run; on failure sets `error`.
int64_t resumeTraining(llvm::StringRef dir, llvm::StringRef config,
                       int64_t steps, ModelData &data,
                       llvm::ArrayRef<const ModelArg *> params,
                       zbrt::Optimizer &optimizer, std::string &error);

/// Rank 0 of `comm` gets the union of every rank's `mine` in `merged`
/// (passed through the files `<scratch>.part<r>` when there are several
/// ranks); a name several ranks hold (a shared parameter) must have
/// bitwise-equal copies, else the job aborts naming it.
void collectArchive(zbrt::Comm &comm, const std::string &scratch,
                    const zbrt::NpzArchive &mine, zbrt::NpzArchive &merged);

/// Where a process stands in the run.
struct TrainingContext {
  /// This replica's ranks (the pipeline) and every process.
  zbrt::Comm &pipeline;
  zbrt::Comm &world;
  int64_t replicas = 1;
  int64_t replica = 0;
  ModelData &data;
  /// This process's parameters, in the order its program's gradients come.
  llvm::ArrayRef<const ModelArg *> params;
  /// Whether each of `params` counts in the global norm on this rank.
  llvm::ArrayRef<bool> counted;
  zbrt::Optimizer &optimizer;
  /// Where the optimizer step runs; null: `optimizer` on the host.
  ParamUpdate *update = nullptr;
};

struct TrainingOptions {
  int64_t firstStep = 0;
  int64_t steps = 1;
  /// false: run the steps without updates (--grads, --eval).
  bool update = true;
  UpdateOptions check;
  /// Write a checkpoint here after the last step (and every
  /// `checkpointEvery` steps); empty: none.
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  std::string checkpointConfig;
  /// Called on world rank 0 for each step once its check is read (after
  /// the next step has run, when checks are deferred) with the step, its
  /// loss (the mean over replicas), its seconds and check (null without an
  /// update). A step's seconds run from the previous step's check to its
  /// own (the first's from the start of the steps), the slowest process's.
  std::function<void(int64_t, double, double, const StepCheck *)> onStep;
};

/// What the steps produced, on every process.
struct TrainingResult {
  std::vector<double> losses;
  std::vector<double> seconds;
  std::vector<StepCheck> checks;
  /// The last step's gradients as the program computed them (unclipped).
  zbrt::NpzArchive lastGrads;
};

/// Runs steps firstStep .. steps-1 of `program`. Returns false with `error`
/// set when an update or a checkpoint fails (alike on every process).
bool train(StepProgram &program, TrainingContext &context,
           const TrainingOptions &options, TrainingResult &result,
           std::string &error);

} // namespace zb

#endif // ZB_DRIVER_TRAINING_H
