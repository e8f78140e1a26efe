//===- Training.cpp - The training loop over a rank's program -------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/Training.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

using namespace zb;

StepProgram::~StepProgram() = default;

bool StepValidation::start(zbrt::Comm &comm, ParamUpdate &update,
                           const zbrt::NpzArchive &grads, bool optimistic,
                           double loss, double seconds, std::string &error) {
  mine.assign({0.0, 0.0, loss, seconds});
  if (!update.addSquares(grads, mine[0], mine[1], error))
    return false;
  this->comm = &comm;
  all.assign(kValues * comm.size(), 0.0);
  // With one rank the check is known at once: nothing to overlap.
  this->optimistic = comm.size() > 1 && optimistic;
  comm.startAllgather(mine.data(), kValues, all.data());
  if (!this->optimistic)
    comm.waitAllgather();
  // The optimistic update, unless this rank already knows it is void.
  updated = false;
  if (this->optimistic && mine[1] == 0) {
    if (!update.save(error) || !update.update(grads, 1.0, error))
      return false;
    updated = true;
  }
  return true;
}

bool StepValidation::finish(ParamUpdate &update, const zbrt::NpzArchive &grads,
                            const UpdateOptions &options, StepCheck &check,
                            std::string &error) {
  if (optimistic)
    comm->waitAllgather();
  double squares = 0.0, nonFinite = 0.0;
  loss = 0.0;
  seconds = 0.0;
  for (int r = 0, e = comm->size(); r < e; ++r) {
    const double *values = all.data() + kValues * r;
    squares += values[0];
    nonFinite += values[1];
    loss += values[2];
    seconds = std::max(seconds, values[3]);
  }
  // A sum of squares that overflows (f64 gradients beyond ~1e154) is no
  // more usable than a non-finite gradient.
  check.skipped = nonFinite > 0 || !std::isfinite(squares);
  check.norm = check.skipped ? std::numeric_limits<double>::quiet_NaN()
                             : std::sqrt(squares);
  double coef = options.clipGradNorm > 0 && !check.skipped
                    ? options.clipGradNorm / (check.norm + 1e-6)
                    : 1.0;
  check.clipped = coef < 1.0;
  // Alike on every rank (a rank that knew its update was void did not
  // update, but ran the next step with the others).
  stood = !optimistic || (!check.skipped && !check.clipped);
  if (updated && stood)
    return true;
  if (updated && !update.restore(error))
    return false;
  if (check.skipped)
    return true;
  return update.update(grads, check.clipped ? coef : 1.0, error);
}

bool zb::checkedUpdate(zbrt::Comm &comm, ParamUpdate &update,
                       const zbrt::NpzArchive &grads,
                       const UpdateOptions &options, StepCheck &check,
                       std::string &error) {
  StepValidation validation;
  return validation.start(comm, update, grads, !options.synchronous, 0.0, 0.0,
                          error) &&
         validation.finish(update, grads, options, check, error);
}

std::string zb::checkpointConfig(llvm::StringRef modelText,
                                 llvm::StringRef optimizerName) {
  std::string hash = llvm::toHex(llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(modelText.data()), modelText.size())));
  return "model-sha256=" + hash.substr(0, 32) +
         ";optimizer=" + optimizerName.str();
}

/// Reads and checks the checkpoint in `dir` against the run. Returns an
/// error message, empty on success.
static std::string readResumeState(llvm::StringRef dir, llvm::StringRef config,
                                   int64_t steps,
                                   const ModelSignature &signature,
                                   zbrt::Checkpoint &checkpoint) {
  std::string error;
  if (!zbrt::readCheckpoint(dir.str(), checkpoint, error))
    return "cannot resume: " + error;
  std::string prefix = "cannot resume from '" + dir.str() + "': ";
  if (checkpoint.config != config)
    return prefix + "it was written for another model or optimizer (" +
           checkpoint.config + "; this run: " + config.str() + ")";
  if (checkpoint.step >= steps)
    return prefix + "it is at step " + std::to_string(checkpoint.step) +
           ", and --steps " + std::to_string(steps) +
           " (the total) leaves nothing to run";
  for (const ModelArg &arg : signature.args) {
    if (!arg.isParam())
      continue;
    auto it = checkpoint.params.find(arg.name);
    if (it == checkpoint.params.end())
      return prefix + "parameter '" + arg.name + "' is missing";
    if (it->second.shape != arg.shape())
      return prefix + "parameter '" + arg.name + "' has shape " +
             it->second.shapeString() + ", but the model expects " +
             shapeString(arg.shape());
    if (!convertArray(it->second, dtypeOf(arg.type.getElementType())))
      return prefix + "parameter '" + arg.name + "' has dtype " +
             zbrt::dtypeDescr(it->second.dtype);
  }
  return "";
}

int64_t zb::resumeTraining(llvm::StringRef dir, llvm::StringRef config,
                           int64_t steps, ModelData &data,
                           llvm::ArrayRef<const ModelArg *> params,
                           zbrt::Optimizer &optimizer, std::string &error) {
  zbrt::Checkpoint checkpoint;
  error = readResumeState(dir, config, steps, data.signature(), checkpoint);
  if (!error.empty())
    return 0;
  zbrt::NpzArchive values = data.paramArchive(params);
  for (auto &[name, value] : values)
    value = checkpoint.params.at(name);
  if (!optimizer.importState(checkpoint.optimizer, error, &values)) {
    error = "cannot resume from '" + dir.str() + "': " + error;
    return 0;
  }
  data.setParams(params, values);
  error = data.setRunningStats(checkpoint.params);
  if (!error.empty()) {
    error = "cannot resume from '" + dir.str() + "': " + error;
    return 0;
  }
  return checkpoint.step;
}

void zb::collectArchive(zbrt::Comm &comm, const std::string &scratch,
                        const zbrt::NpzArchive &mine,
                        zbrt::NpzArchive &merged) {
  if (comm.size() == 1) {
    for (const auto &[name, array] : mine)
      merged[name] = array;
    return;
  }
  std::string part = scratch + ".part" + std::to_string(comm.rank());
  std::string error;
  if (!zbrt::writeNpz(part, mine, error))
    comm.abort(error);
  comm.barrier();
  if (comm.rank() != 0)
    return;
  for (int r = 0; r < comm.size(); ++r) {
    std::string p = scratch + ".part" + std::to_string(r);
    zbrt::NpzArchive partArchive;
    if (!zbrt::readNpz(p, partArchive, error))
      comm.abort(error);
    std::remove(p.c_str());
    // A parameter shared between ranks (a tied weight) arrives once per
    // rank that holds a copy: the copies must be bitwise equal.
    for (auto &[name, array] : partArchive) {
      auto [it, inserted] = merged.try_emplace(name, array);
      if (!inserted &&
          (it->second.dtype != array.dtype || it->second.shape != array.shape ||
           it->second.data != array.data))
        comm.abort("the copies of '" + name + "' on rank " + std::to_string(r) +
                   " and an earlier rank differ; the ranks that hold a "
                   "shared parameter must keep it equal");
    }
  }
}

/// Whether a checkpoint is due after step `step` (0-based).
static bool checkpointDue(const TrainingOptions &options, int64_t step) {
  if (options.checkpointDir.empty())
    return false;
  return step + 1 == options.steps ||
         (options.checkpointEvery > 0 &&
          (step + 1) % options.checkpointEvery == 0);
}

/// One checkpoint after step `step`: the replicas hold the same state, so
/// replica 0's ranks collect theirs and world rank 0 writes it.
static bool writeRunCheckpoint(TrainingContext &context,
                               const TrainingOptions &options, int64_t step,
                               std::string &error) {
  const std::string &dir = options.checkpointDir;
  zbrt::Checkpoint checkpoint{step + 1, options.checkpointConfig, {}, {}};
  if (context.world.size() > 1 && !zbrt::createCheckpointDir(dir, error))
    return false;
  if (context.replica == 0) {
    collectArchive(context.pipeline, dir + "/.params",
                   context.data.paramArchive(context.params),
                   checkpoint.params);
    collectArchive(context.pipeline, dir + "/.optimizer",
                   context.optimizer.exportState(), checkpoint.optimizer);
    // The running statistics, from the ranks that update them.
    collectArchive(context.pipeline, dir + "/.stats",
                   context.data.updatedStats(), checkpoint.params);
    for (const auto &[name, value] : context.data.runningStats())
      checkpoint.params.try_emplace(name, value);
  }
  int written = context.world.rank() != 0 ||
                zbrt::writeCheckpoint(dir, checkpoint, error);
  context.world.broadcast(&written, sizeof(written), 0);
  if (!written && error.empty())
    error = "writing the checkpoint failed";
  return written;
}

/// What train() keeps of a step until its check is read.
struct CheckedStep {
  int64_t step = 0;
  /// The gradients by name (their update may need them again).
  zbrt::NpzArchive grads;
  StepValidation validation;
};

bool zb::train(StepProgram &program, TrainingContext &context,
               const TrainingOptions &options, TrainingResult &result,
               std::string &error) {
  zbrt::Comm &world = context.world;
  // The checkpoint folder is this run's while it trains: world rank 0,
  // which writes it, holds its lock.
  std::unique_ptr<zbrt::CheckpointLock> lock;
  if (!options.checkpointDir.empty()) {
    int locked = 1;
    if (world.rank() == 0) {
      lock = zbrt::CheckpointLock::acquire(options.checkpointDir, error);
      locked = lock != nullptr;
    }
    world.broadcast(&locked, sizeof(locked), 0);
    if (!locked) {
      if (error.empty())
        error = "the checkpoint directory is in use by another run";
      return false;
    }
  }
  // Training forwards update the running statistics (as PyTorch's do in
  // training mode, whatever the optimizer then does with the step).
  zbrt::setRecordingStats(options.update);
  llvm::scope_exit stopRecording([] { zbrt::setRecordingStats(false); });
  std::unique_ptr<ParamUpdate> hostUpdate;
  ParamUpdate *update = context.update;
  if (!update) {
    hostUpdate = makeHostUpdate(context.data, context.params, context.counted,
                                context.optimizer);
    update = hostUpdate.get();
  }
  // Without clipping, an optimistic update is void only when a gradient
  // somewhere is not finite: the next step runs on it before its check is
  // read (and runs again in the rare step that follows a skipped one), so
  // no rank waits for another between steps. A clipped update is redone
  // whenever the norm exceeds the clip, so with clipping each step's
  // check is read before the next step.
  bool deferChecks = context.pipeline.size() > 1 &&
                     !options.check.synchronous &&
                     options.check.clipGradNorm <= 0;
  std::optional<CheckedStep> pending;
  // Reads `done`'s check (completing its update), reports the step and
  // writes a checkpoint when one is due. `stood` says whether the update
  // applied before the check stood.
  auto finishStep = [&](CheckedStep &done, bool &stood) {
    StepCheck check;
    if (!done.validation.finish(*update, done.grads, options.check, check,
                                error))
      return false;
    stood = done.validation.optimisticStood();
    // The mean of the replicas' losses (each the mean of its
    // microbatches'), from the processes' shares: the gather summed this
    // replica's.
    double loss = done.validation.lossSum();
    double seconds = done.validation.maxSeconds();
    if (context.replicas > 1) {
      loss = done.validation.myLoss();
      world.allreduceSum(&loss, 1);
      world.allreduceMax(&seconds, 1);
      loss /= context.replicas;
    }
    result.checks.push_back(check);
    result.lastGrads = std::move(done.grads);
    result.losses.push_back(loss);
    result.seconds.push_back(seconds);
    if (world.rank() == 0 && options.onStep)
      options.onStep(done.step, loss, seconds, &check);
    return !checkpointDue(options, done.step) ||
           (update->syncToHost(error) &&
            writeRunCheckpoint(context, options, done.step, error));
  };

  program.runsUntil(options.steps);
  // Every process starts together; a step's time runs from the previous
  // step's check (the first's from here) to its own, on the slowest rank.
  world.barrier();
  auto mark = std::chrono::steady_clock::now();
  for (int64_t s = options.firstStep; s < options.steps; ++s) {
    std::vector<zbrt::NpyArray> grads;
    double loss = program.run(s, grads);
    if (pending) {
      // The previous step's check: when its update was void, this step ran
      // on parameters it must not have seen, and runs again (on every
      // rank alike: they read the same check).
      bool stood = true;
      if (!finishStep(*pending, stood))
        return false;
      pending.reset();
      if (!stood) {
        zbrt::takeStatRecords();
        loss = program.run(s, grads);
      }
    }
    // Records the model does not have are a compiler error, on this
    // rank alone: end the job here.
    if (options.update)
      if (std::string bad =
              context.data.foldStatRecords(zbrt::takeStatRecords());
          !bad.empty())
        world.abort(bad);
    // A forward-only program (--eval) has no gradients.
    zbrt::NpzArchive named;
    if (!grads.empty())
      named = namedArrays(context.params, std::move(grads));
    auto now = std::chrono::steady_clock::now();
    double seconds = std::chrono::duration<double>(now - mark).count();
    mark = now;
    if (!options.update) {
      world.allreduceSum(&loss, 1);
      world.allreduceMax(&seconds, 1);
      loss /= context.replicas;
      result.lastGrads = std::move(named);
      result.losses.push_back(loss);
      result.seconds.push_back(seconds);
      if (world.rank() == 0 && options.onStep)
        options.onStep(s, loss, seconds, nullptr);
      continue;
    }
    CheckedStep &step = pending.emplace();
    step.step = s;
    step.grads = std::move(named);
    if (!step.validation.start(context.pipeline, *update, step.grads,
                               !options.check.synchronous, loss, seconds,
                               error))
      return false;
    // A checkpoint and the run's end need the check read.
    if (!deferChecks || s + 1 == options.steps || checkpointDue(options, s)) {
      bool stood = true;
      if (!finishStep(*pending, stood))
        return false;
      pending.reset();
    }
  }
  program.endRun();
  // The parameters and state where the caller reads them.
  return !options.update || update->syncToHost(error);
}
