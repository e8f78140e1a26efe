//===- RunOptions.cpp - What one zb-run invocation asks for ---------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/RunOptions.h"

#include "zb/Driver/CompiledOptimizer.h"
#include "zb/Schedule/Generators.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <cmath>
#include <limits>
#include <sstream>

using namespace zb;

/// `value` as a flag's value is written: 1.5, 0.01, nan, inf.
static std::string number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

std::string RunOptions::check() const {
  auto message = [](const llvm::Twine &text) { return text.str(); };
  if (eval && grads)
    return message("pass at most one of --eval and --grads");
  if (checkGrad && !grads)
    return message("--check-grad needs --grads");
  if (microbatches < 1)
    return message("--microbatches must be at least 1, got " +
                   llvm::Twine(microbatches));
  // One step's microbatches, on one process or many: the schedules'
  // limit.
  if (microbatches > schedule::kMaxMicrobatches)
    return message("--microbatches must be at most " +
                   llvm::Twine(schedule::kMaxMicrobatches) + ", got " +
                   llvm::Twine(microbatches));
  if (steps < 1)
    return message("--steps must be at least 1, got " + llvm::Twine(steps));
  if (ranks < 1)
    return message("--np must be at least 1, got " + llvm::Twine(ranks));
  if (replicas < 1)
    return message("--dp must be at least 1, got " + llvm::Twine(replicas));
  if (worldSize() > std::numeric_limits<int32_t>::max())
    return message("--np " + llvm::Twine(ranks) + " x --dp " +
                   llvm::Twine(replicas) + " = " + llvm::Twine(worldSize()) +
                   " processes, more than an MPI job holds");
  if (eval && !dumpGradsPath.empty())
    return message("--dump-grads needs --grads or training; --eval computes no "
                   "gradients");
  if (eval && (!tracePath.empty() || !profilePath.empty()))
    return message("--trace and --profile record training or --grads; --eval "
                   "runs forwards only");
  if (replicas > 1 && (eval || checkGrad))
    return message("--dp needs training or --grads; --eval and --check-grad "
                   "run on one process");
  if (replicas > 1 && gpu())
    return message("--dp with --backend nccl is not supported yet: the "
                   "replicas' gradient means run on the MPI backend only");
  if (balance && ranks < 2)
    return message("--balance cuts the stages of a pipeline: it needs --np 2 "
                   "or more");
  if (balance && compileOnly)
    return message("--balance cuts where the stages' measured times say, and "
                   "--compile-only runs nothing to measure: compile without "
                   "--balance");
  if (balance && gpu())
    return message("--balance measures stage times on the CPU; it is not "
                   "supported with --backend nccl yet");
  if (ranks > 1 && checkGrad)
    return message("--check-grad runs on one process (finite differences of "
                   "the unpartitioned model); compare --grads --np P with "
                   "--np 1 instead");
  if ((!tracePath.empty() || !profilePath.empty()) && worldSize() < 2)
    return message("--trace and --profile record a pipelined run: they need "
                   "--np 2 or more (or --dp 2 or more)");
  if ((!checkpointDir.empty() || !resumeDir.empty()) && !training())
    return message("--checkpoint and --resume are for training, not --eval or "
                   "--grads");
  if (!(learningRate >= 0) || !std::isfinite(learningRate))
    return message("--lr must be a finite number, 0 or more, got " +
                   number(learningRate));
  if (!(gradTol >= 0) || !std::isfinite(gradTol))
    return message("--grad-tol must be a positive number (0: the default), "
                   "got " +
                   number(gradTol));
  if (gradSamples < 1)
    return message("--grad-samples must be at least 1, got " +
                   llvm::Twine(gradSamples));
  if (clipGradNorm < 0 || !std::isfinite(clipGradNorm))
    return message("--clip-grad-norm must be a positive number (0: off), "
                   "got " +
                   number(clipGradNorm));
  if (clipGradNorm > 0 && !training())
    return message("--clip-grad-norm clips a training step's gradients; "
                   "--eval and --grads take no step");
  if (checkpointEvery < 0)
    return message("--checkpoint-every must be positive, got " +
                   llvm::Twine(checkpointEvery));
  if (checkpointEvery > 0 && checkpointDir.empty())
    return message("--checkpoint-every needs --checkpoint DIR");
  if (optimizer != "sgd" && optimizer != "sgd-momentum" && optimizer != "adamw")
    return message("unknown --optimizer '" + optimizer +
                   "' (expected sgd, sgd-momentum or adamw)");
  if (!(momentum > 0 && momentum < 1))
    return message("--momentum must lie in (0, 1), got " + number(momentum) +
                   " (no momentum: --optimizer sgd)");
  if (backend != "mpi" && backend != "nccl")
    return message("unknown --backend '" + backend +
                   "' (expected mpi or nccl)");
  if (dtype != "f32" && dtype != "bf16")
    return message("unknown --dtype '" + dtype + "' (expected f32 or bf16)");
  if (dtype == "bf16" && !pipelined() && !gpu())
    return message("--dtype bf16 keeps a pipeline's stashes in bf16: it "
                   "needs --np 2 or more, --dp 2 or more, or --backend nccl "
                   "(one CPU process runs the unpartitioned model in f32)");
  if (gpu() && !training())
    return message("--backend nccl trains; --eval and --grads run on the CPU");
  if (compiledUpdate && (!training() || (!pipelined() && !gpu())))
    return message("--compiled-update compiles a pipelined training run's "
                   "optimizer step: it needs training with --np 2 or more "
                   "(or --dp 2 or more, or --backend nccl, which always "
                   "uses it)");
  if (pipelined() && !zb::schedule::lookupSchedule(schedule))
    return message("unknown --schedule '" + schedule +
                   "'; known: " + zb::schedule::knownScheduleNames());
  // The schedule's layout, before any rank starts (the ranks would each
  // meet it in the pipeline).
  if (pipelined())
    if (std::string problem =
            zb::schedule::layoutProblem(schedule, scheduleLayout());
        !problem.empty())
      return message("--schedule " + schedule + " with --np " +
                     llvm::Twine(ranks) + ": " + problem);
  return "";
}

/// The folder `path` would be written in: its parent, "." for a bare name.
static std::string folderOf(llvm::StringRef path) {
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  return parent.empty() ? "." : parent.str();
}

/// Why `folder` (a folder to write in) cannot be written, or "".
static std::string unwritableFolder(const std::string &folder) {
  if (!llvm::sys::fs::is_directory(folder))
    return llvm::sys::fs::exists(folder)
               ? "'" + folder + "' is not a folder"
               : "folder '" + folder + "' does not exist";
  if (llvm::sys::fs::access(folder, llvm::sys::fs::AccessMode::Write))
    return "folder '" + folder + "' is not writable";
  return "";
}

std::string RunOptions::checkOutputs() const {
  for (auto [flag, path] : {std::pair{"--metrics", &metricsPath},
                            {"--dump-params", &dumpParamsPath},
                            {"--dump-grads", &dumpGradsPath},
                            {"--trace", &tracePath},
                            {"--profile", &profilePath}}) {
    if (path->empty())
      continue;
    if (llvm::sys::fs::is_directory(*path))
      return std::string(flag) + " '" + *path +
             "' is a folder; name a file to write";
    if (std::string why = unwritableFolder(folderOf(*path)); !why.empty())
      return std::string(flag) + " '" + *path + "' cannot be written: " + why;
  }
  if (!checkpointDir.empty()) {
    if (llvm::sys::fs::exists(checkpointDir)) {
      if (std::string why = unwritableFolder(checkpointDir); !why.empty())
        return "--checkpoint '" + checkpointDir + "' cannot be written: " + why;
    } else {
      // The nearest folder that exists, where the checkpoint's are made.
      std::string above = checkpointDir;
      do
        above = folderOf(above);
      while (!llvm::sys::fs::exists(above) && above != ".");
      if (std::string why = unwritableFolder(above); !why.empty())
        return "--checkpoint '" + checkpointDir + "' cannot be made: " + why;
    }
  }
  return "";
}

std::string RunOptions::launchMismatch(int world) const {
  if (world <= 1 || compileOnly || world == worldSize())
    return "";
  std::string flags = "--np " + std::to_string(ranks);
  if (replicas > 1)
    flags += " --dp " + std::to_string(replicas);
  return ("started as one of " + llvm::Twine(world) +
          " processes by an MPI launcher, but " + flags + " needs " +
          llvm::Twine(worldSize()) +
          "; pass --np P and --dp D with P * D = " + llvm::Twine(world) +
          " (or start one process and let zb-run launch them)")
      .str();
}

DataOptions RunOptions::data(int64_t replica) const {
  DataOptions options;
  options.paramsPath = paramsPath;
  options.inputsPath = inputsPath;
  options.seed = seed;
  options.microbatches = microbatches;
  options.steps = steps;
  options.replicas = replicas;
  options.replica = replica;
  return options;
}

zbrt::Optimizer RunOptions::makeOptimizer() const {
  if (optimizer == "adamw")
    return zbrt::Optimizer::adamw(learningRate);
  return zbrt::Optimizer::sgd(learningRate,
                              optimizer == "sgd-momentum" ? momentum : 0.0);
}

std::string RunOptions::checkpointConfig(llvm::StringRef modelText) const {
  return zb::checkpointConfig(modelText, optimizer);
}

TrainingOptions RunOptions::trainingOptions(llvm::StringRef modelText,
                                            int64_t firstStep) const {
  TrainingOptions options;
  options.firstStep = firstStep;
  options.steps = training() ? steps : 1;
  options.update = training();
  options.check.clipGradNorm = clipGradNorm;
  options.check.synchronous = syncGradCheck;
  options.checkpointDir = checkpointDir;
  options.checkpointEvery = checkpointEvery;
  if (training())
    options.checkpointConfig = checkpointConfig(modelText);
  return options;
}

void RunOptions::setPipelineOptions(ZBPipelineOptions &options) const {
  options.stages = ranks;
  options.microbatches = microbatches;
  options.schedule = schedule;
  options.chunks = chunks;
  options.replicas = replicas;
  // --eval: each rank runs its stages' forwards in the schedule's order.
  options.forwardOnly = eval;
  options.lowerToCPU = false;
  options.target = gpu() ? "gpu" : "cpu";
  options.dtype = dtype;
  if (usesCompiledUpdate())
    options.optimizer = compiledUpdateKind();
}

std::string RunOptions::compiledUpdateKind() const {
  return optimizer::kindName(compiledOptimizerKind(makeOptimizer().getConfig()))
      .str();
}

int64_t RunOptions::chunksForSchedule() const {
  const zb::schedule::ScheduleInfo *info =
      zb::schedule::lookupSchedule(schedule);
  return info ? info->chunksFor(chunks) : chunks;
}

zb::schedule::Problem RunOptions::scheduleLayout() const {
  zb::schedule::Problem layout;
  layout.numRanks = ranks;
  layout.numChunks = chunksForSchedule();
  if (const zb::schedule::ScheduleInfo *info =
          zb::schedule::lookupSchedule(schedule))
    layout.placement = info->defaultPlacement;
  layout.numMicrobatches = microbatches;
  return layout;
}

std::string RunOptions::rankProgramKey(llvm::StringRef modelText, int rank,
                                       llvm::StringRef balancedProgram) const {
  return (modelText + ";pipeline;np=" + llvm::Twine(ranks) + ";schedule=" +
          schedule + ";chunks=" + llvm::Twine(chunksForSchedule()) +
          ";m=" + llvm::Twine(microbatches) + ";dp=" + llvm::Twine(replicas) +
          (gpu() ? ";gpu" : "") + (eval ? ";eval" : "") +
          (dtype == "f32" ? "" : ";dtype=" + dtype) +
          (usesCompiledUpdate() ? ";update=" + compiledUpdateKind() : "") +
          ";rank=" + llvm::Twine(rank) +
          (balancedProgram.empty() ? "" : ";balanced=" + balancedProgram))
      .str();
}

CompileSettings RunOptions::compileSettings(std::string identity) const {
  CompileSettings settings;
  settings.cacheDir = cacheDir;
  if (gpu()) {
    settings.target.target = "gpu";
    settings.target.gpuDtype = dtype;
  }
  settings.target.cpu = targetCPU;
  if (settings.target.cpu.empty())
    if (std::optional<std::string> cpu =
            llvm::sys::Process::GetEnv("ZB_TARGET_CPU"))
      settings.target.cpu = *cpu;
  settings.identity = std::move(identity);
  return settings;
}
