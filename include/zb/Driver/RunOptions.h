//===- RunOptions.h - What one zb-run invocation asks for -------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The flags of zb-run as values (the tool binds its command-line options to
// the fields), the rules they must satisfy (check()), and the options of
// each layer they turn into: the data, the optimizer, the named pipeline,
// the cache key of a rank's program, the training loop's options.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_RUNOPTIONS_H
#define ZB_DRIVER_RUNOPTIONS_H

#include "zb/Driver/Compile.h"
#include "zb/Driver/ModelData.h"
#include "zb/Driver/Training.h"
#include "zb/Pipelines/Pipelines.h"
#include "zb/Schedule/Problem.h"

#include "zbrt/Optimizer.h"

#include <cstdint>
#include <string>

namespace zb {

struct RunOptions {
  std::string modelPath;
  /// One step of forwards (eval) or of forwards and backwards without an
  /// update (grads); neither: training.
  bool eval = false;
  bool grads = false;
  bool checkGrad = false;
  double gradTol = 0.0;
  int gradSamples = 6;
  bool compileOnly = false;
  std::string paramsPath, inputsPath;
  uint64_t seed = 0;
  int64_t microbatches = 1;
  /// Pipeline ranks P and replicas D.
  int ranks = 1;
  int replicas = 1;
  std::string schedule = "zb-h1";
  /// Stages per rank; 0: the schedule's.
  int chunks = 0;
  int steps = 1;
  std::string optimizer = "sgd";
  double learningRate = 0.01;
  /// SGD's momentum factor for --optimizer sgd-momentum.
  double momentum = 0.9;
  double clipGradNorm = 0.0;
  bool syncGradCheck = false;
  std::string backend = "mpi";
  /// Precision: "f32", or "bf16" (a pipeline's stashes in bf16; on the GPU
  /// bf16 gemm products too).
  std::string dtype = "f32";
  std::string targetCPU, cacheDir;
  std::string metricsPath, dumpGradsPath, dumpParamsPath, tracePath,
      profilePath;
  std::string checkpointDir, resumeDir;
  int checkpointEvery = 0;
  /// Cut the stages at times measured before training (Balance.h).
  bool balance = false;
  /// Run the optimizer step as the ranks' compiled code (Update.h), as
  /// --backend nccl always does.
  bool compiledUpdate = false;

  bool training() const { return !eval && !grads; }
  /// More than one process: the pipelined programs.
  bool pipelined() const { return ranks > 1 || replicas > 1; }
  int64_t worldSize() const { return int64_t(ranks) * replicas; }
  bool gpu() const { return backend == "nccl"; }
  /// Whether the step's update is compiled code (--compiled-update, or on
  /// the GPU, where the parameters stay).
  bool usesCompiledUpdate() const {
    return training() && (compiledUpdate || gpu());
  }

  /// The first problem with the options, as a message; empty when there is
  /// none.
  std::string check() const;
  /// The first output the run could not write (--metrics, --dump-params,
  /// --dump-grads, --trace, --profile: a folder, or in a folder that does
  /// not exist or is not writable; --checkpoint: not a folder, or none can
  /// be made there), as a message; empty when there is none. Checked
  /// before anything runs, so that a long run does not end in a write that
  /// fails.
  std::string checkOutputs() const;

  /// The message for a run started as one of `world` processes by an
  /// outside launcher when the options need another number; empty when
  /// they match (or nothing is launched).
  std::string launchMismatch(int world) const;

  /// Where replica `replica`'s values come from.
  DataOptions data(int64_t replica) const;
  zbrt::Optimizer makeOptimizer() const;
  /// The update --zb-emit-optimizer compiles for makeOptimizer() (its kind
  /// name: sgd, sgd-momentum or adamw): what the programs and their cache
  /// keys say.
  std::string compiledUpdateKind() const;
  /// What a checkpoint of this run belongs to.
  std::string checkpointConfig(llvm::StringRef modelText) const;
  /// The training loop's options for steps `firstStep` on (no onStep).
  TrainingOptions trainingOptions(llvm::StringRef modelText,
                                  int64_t firstStep) const;

  /// Sets the named pipeline's options for the pipelined programs (stopped
  /// before the target's lowering).
  void setPipelineOptions(ZBPipelineOptions &options) const;
  /// The stages per rank the schedule runs with.
  int64_t chunksForSchedule() const;
  /// The ranks, chunks, placement and microbatches of the schedule that
  /// runs (for the simulator beside a measured run).
  zb::schedule::Problem scheduleLayout() const;
  /// The cache key of rank `rank`'s program of `modelText`; with --balance,
  /// `balancedProgram` is the moduleDigest of the rank's program as cut at
  /// the measured times: the same cut and schedule make the same key,
  /// whatever times a run measured.
  std::string rankProgramKey(llvm::StringRef modelText, int rank,
                             llvm::StringRef balancedProgram = "") const;
  /// The compiler's settings (the CPU from $ZB_TARGET_CPU unless given);
  /// `identity` is the running compiler's.
  CompileSettings compileSettings(std::string identity) const;
};

} // namespace zb

#endif // ZB_DRIVER_RUNOPTIONS_H
