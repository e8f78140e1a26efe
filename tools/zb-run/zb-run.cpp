//===- zb-run.cpp - Compile and run a model -------------------------------===//
//
// Part of ZeroBubble MLIR.
//
// zb-run MODEL.mlir (--eval | --grads) [--params P.npz] [--inputs I.npz]
//        [--seed S] [--microbatches M] [--metrics M.json]
//        [--dump-grads G.npz] [--check-grad] [--cache-dir DIR]
// zb-run MODEL.mlir [--np P] [--dp D] [--schedule NAME] [--chunks V]
//        [--steps K] [--optimizer sgd|adamw] [--lr LR] [--dump-params F.npz]
//        [--backend mpi|nccl] [--trace T.json] [--profile P.json]
//        [--checkpoint DIR [--checkpoint-every N]] [--resume DIR] ...
//
// Compiles the model for the CPU, or the GPU with --backend nccl (caching
// the shared object by content hash), initialises parameters from the seed or
// loads them, makes synthetic data or loads it, and runs one step over M
// microbatches: the forward (--eval) or the forward and backward without an
// update (--grads), printing the mean loss; gradients are the mean over the
// microbatches. Without --eval or --grads it trains for --steps steps:
// in-process for P = 1, and for P > 1 as P MPI processes each compiling and
// running only its rank's step function, which the compiler builds with
// --zb-pipeline (and --zb-keep-rank); --grads with P > 1 runs one such step
// without an update, --eval one with the forwards alone. --dp D runs D such
// pipelines side by side (P * D processes), averaging each stage's gradients
// over them. Each update is post-validated (clipping, skipped non-finite
// steps); a pipelined run reports its measured bubble rate and stash memory.
// What runs lives in lib/Driver (one training loop, zb/Driver/Training.h, over
// this process's step program, zb/Driver/Programs.h); this file turns flags
// into its options, launches the ranks and prints.
//
//===----------------------------------------------------------------------===//

#include "zb/Autodiff/GradientOpInterface.h"
#include "zb/Driver/Compile.h"
#include "zb/Driver/GradCheck.h"
#include "zb/Driver/Measure.h"
#include "zb/Driver/Metrics.h"
#include "zb/Driver/ModelData.h"
#include "zb/Driver/Pipeline.h"
#include "zb/Driver/Programs.h"
#include "zb/Driver/RunComms.h"
#include "zb/Driver/Training.h"
#include "zb/Model/Model.h"
#include "zb/Pipelines/Pipelines.h"
#include "zb/Schedule/Generators.h"
#include "zb/Target/CPUCompiler.h"
#include "zb/Transforms/Passes.h"

#include "zbrt/CUDA.h"
#include "zbrt/Comm.h"
#include "zbrt/Executable.h"
#include "zbrt/Launch.h"
#include "zbrt/Npz.h"
#include "zbrt/Optimizer.h"
#include "zbrt/Trace.h"
#include "zbrt/zbrt.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <optional>
#include <sstream>

using namespace mlir;

namespace cl = llvm::cl;

static cl::OptionCategory category("zb-run options");

static cl::opt<std::string> modelPath(cl::Positional, cl::desc("MODEL.mlir"),
                                      cl::Required, cl::cat(category));
static cl::opt<bool> evalMode("eval",
                              cl::desc("Run the forward on each microbatch "
                                       "and print the mean loss"),
                              cl::cat(category));
static cl::opt<std::string>
    paramsPath("params",
               cl::desc("Parameters (.npz, keyed by zb.param name); default: "
                        "initialised from --seed"),
               cl::value_desc("P.npz"), cl::cat(category));
static cl::opt<std::string> inputsPath(
    "inputs",
    cl::desc("Data (.npz, keyed by zb.data name or arg<i>), each array "
             "[M microbatches][argument shape]; default: synthetic"),
    cl::value_desc("I.npz"), cl::cat(category));
static cl::opt<uint64_t> seed("seed",
                              cl::desc("Seed for parameters and data"),
                              cl::init(0), cl::cat(category));
static cl::opt<int64_t> microbatches("microbatches",
                                     cl::desc("Microbatches per step"),
                                     cl::init(1), cl::cat(category));
static cl::opt<std::string>
    metricsPath("metrics", cl::desc("Write metrics JSON ({\"loss\": [...]})"),
                cl::value_desc("M.json"), cl::cat(category));
static cl::opt<bool> gradsMode(
    "grads", cl::desc("Run forward and backward (no update) and print the "
                      "mean loss; see --dump-grads and --check-grad"),
    cl::cat(category));
static cl::opt<std::string> dumpGradsPath(
    "dump-grads",
    cl::desc("Write every parameter's gradient (mean over the microbatches; "
             "of the last step when training) and the loss to this .npz, "
             "keyed by parameter name"),
    cl::value_desc("G.npz"), cl::cat(category));
static cl::opt<bool> compileOnly(
    "compile-only",
    cl::desc("Compile the model for these flags into the cache, print the "
             "object's path (with --np P, each rank's, one per line) and "
             "exit: runs nothing, so --backend nccl needs no GPU and --np "
             "needs no mpirun (a cache warmed where the compiler is serves "
             "a machine that only runs)"),
    cl::cat(category));
static cl::opt<std::string> targetCPUName(
    "target-cpu",
    cl::desc("The CPU to compile host code for, as LLVM names it (e.g. "
             "x86-64-v3); default: $ZB_TARGET_CPU, else this machine's"),
    cl::value_desc("NAME"), cl::cat(category));
static cl::opt<bool> checkGrad(
    "check-grad",
    cl::desc("With --grads: compare a sample of gradient entries with "
             "central finite differences and print the worst error; exit "
             "non-zero above --grad-tol"),
    cl::cat(category));
static cl::opt<double> gradTol(
    "grad-tol",
    cl::desc("Largest relative error --check-grad accepts (default 1e-6 "
             "for f64 parameters, 2e-2 for f32)"),
    cl::init(0), cl::cat(category));
static cl::opt<int> gradSamples(
    "grad-samples",
    cl::desc("Entries per parameter --check-grad compares (default 6)"),
    cl::init(6), cl::cat(category));
static cl::opt<int> numRanks(
    "np",
    cl::desc(
        "Pipeline ranks P (default 1). Training, --grads or --eval with P > 1 "
        "launches P processes through mpirun (or, started by mpirun or "
        "srun, runs as one of them); P = 1 runs in-process, the "
        "unpartitioned reference"),
    cl::init(1), cl::cat(category));
static cl::opt<int> numReplicas(
    "dp",
    cl::desc("Data-parallel replicas D of the pipeline (default 1): P * D "
             "processes, replica r being ranks r*P .. r*P+P-1; each runs "
             "--microbatches M of the step's D * M (replica r takes "
             "microbatches r*M .. r*M+M-1), and each stage's gradients are "
             "averaged over its D replicas after its last W"),
    cl::init(1), cl::cat(category));
static cl::opt<std::string>
    scheduleName("schedule",
                 cl::desc("Pipeline schedule (default zb-h1; see zb-sched "
                          "--help)"),
                 cl::init("zb-h1"), cl::cat(category));
static cl::opt<int> numChunks(
    "chunks", cl::desc("Stages per rank V (default: the schedule's)"),
    cl::init(0), cl::cat(category));
static cl::opt<int> numSteps("steps", cl::desc("Training steps (default 1)"),
                             cl::init(1), cl::cat(category));
static cl::opt<std::string>
    optimizerName("optimizer", cl::desc("sgd (default) or adamw"),
                  cl::init("sgd"), cl::cat(category));
static cl::opt<double> clipGradNorm(
    "clip-grad-norm",
    cl::desc("Scale the step's gradients so that their global L2 norm is at "
             "most X (PyTorch's clip_grad_norm_), checked after an "
             "optimistic update that is redone when clipping applies"),
    cl::value_desc("X"), cl::init(0.0), cl::cat(category));
static cl::opt<bool> syncGradCheck(
    "sync-grad-check",
    cl::desc("Reduce the gradient norm and the finite check before the "
             "optimizer step instead of after it (a synchronisation; to test "
             "the post-validated step against)"),
    cl::Hidden, cl::cat(category));
static cl::opt<double> learningRate("lr",
                                    cl::desc("Learning rate (default 0.01)"),
                                    cl::init(0.01), cl::cat(category));
static cl::opt<std::string>
    dumpParamsPath("dump-params",
                   cl::desc("After training: write every parameter to this "
                            ".npz"),
                   cl::value_desc("F.npz"), cl::cat(category));
static cl::opt<std::string>
    backendName("backend",
                cl::desc("Communication backend: mpi (default; the model "
                         "runs on the CPU) or nccl (the model runs on one "
                         "GPU per rank, transfers through NCCL)"),
                cl::init("mpi"), cl::cat(category));
static cl::opt<std::string> cacheDir(
    "cache-dir",
    cl::desc("Where compiled models are cached (default: $ZB_CACHE_DIR, "
             "else $XDG_CACHE_HOME/zerobubble, else ~/.cache/zerobubble)"),
    cl::cat(category));

static cl::opt<std::string> tracePath(
    "trace",
    cl::desc("With --np > 1: write every rank's actions of every step as one "
             "Chrome trace (the format of zb-sched --format=trace)"),
    cl::value_desc("T.json"), cl::cat(category));
static cl::opt<std::string> profilePath(
    "profile",
    cl::desc("With --np > 1: write the measured mean F/B/W milliseconds per "
             "stage as JSON, for --zb-pipeline=\"costs=...\" and "
             "--zb-schedule"),
    cl::value_desc("PROFILE.json"), cl::cat(category));
static cl::opt<std::string> checkpointDir(
    "checkpoint",
    cl::desc("Write the training state (parameters, optimizer state, step) "
             "to this directory, atomically, at the end and every "
             "--checkpoint-every steps"),
    cl::value_desc("DIR"), cl::cat(category));
static cl::opt<int> checkpointEvery(
    "checkpoint-every",
    cl::desc("With --checkpoint: also write it after every N steps"),
    cl::init(0), cl::value_desc("N"), cl::cat(category));
static cl::opt<std::string> resumeDir(
    "resume",
    cl::desc("Continue training from the newest state in this checkpoint "
             "directory, up to --steps steps in all"),
    cl::value_desc("DIR"), cl::cat(category));

/// Prints "zb-run: error: <message>" and returns the exit code for errors.
static int fail(const llvm::Twine &message) {
  llvm::errs() << "zb-run: error: " << message << "\n";
  return 1;
}

/// Where this process's values come from (replica `replica`).
static zb::DataOptions dataOptions(int64_t replica) {
  zb::DataOptions options;
  options.paramsPath = paramsPath;
  options.inputsPath = inputsPath;
  options.seed = seed;
  options.microbatches = microbatches;
  options.steps = numSteps;
  options.replicas = numReplicas;
  options.replica = replica;
  return options;
}

/// The verified object for `module` (already transformed) under `key`,
/// compiled into the cache unless a valid entry is there; null (with the
/// error printed) on failure.
static std::unique_ptr<zb::CacheEntry> compileCached(ModuleOp module,
                                                     const std::string &key,
                                                     const char *argv0,
                                                     bool gpu = false) {
  zb::CPUCompileOptions options;
  if (gpu)
    options.target = "gpu";
  options.cpu = targetCPUName;
  if (options.cpu.empty())
    if (std::optional<std::string> cpu =
            llvm::sys::Process::GetEnv("ZB_TARGET_CPU"))
      options.cpu = *cpu;
  llvm::Expected<zb::CompileCache> cache = zb::CompileCache::open(
      cacheDir.empty() ? zb::CompileCache::defaultDirectory()
                       : cacheDir.getValue());
  if (!cache) {
    fail(llvm::toString(cache.takeError()));
    return nullptr;
  }
  static std::string identity =
      zb::executableIdentity(argv0, reinterpret_cast<void *>(&compileCached));
  llvm::Expected<std::unique_ptr<zb::CacheEntry>> entry = zb::compileCached(
      module, key, options, *cache, identity, [](const llvm::Twine &message) {
        llvm::errs() << "zb-run: warning: " << message << "\n";
      });
  if (!entry) {
    fail("compiling '" + modelPath + "': " + llvm::toString(entry.takeError()));
    return nullptr;
  }
  return std::move(*entry);
}

/// The optimizer the flags ask for.
static zbrt::Optimizer makeOptimizer() {
  return optimizerName == "adamw" ? zbrt::Optimizer::adamw(learningRate)
                                  : zbrt::Optimizer::sgd(learningRate);
}

/// Writes `archive` plus the loss (when `withLoss`) to `path`.
static bool writeArchive(const std::string &path, zbrt::NpzArchive archive,
                         std::optional<double> loss) {
  if (loss) {
    archive["loss"] = zbrt::NpyArray{zbrt::DType::F64, {},
                                     std::vector<char>(sizeof(double))};
    *archive["loss"].as<double>() = *loss;
  }
  std::string error;
  if (!zbrt::writeNpz(path, archive, error)) {
    fail(error);
    return false;
  }
  return true;
}

/// Samples in one microbatch: dim 0 of the model's first data argument.
static int64_t samplesPerMicrobatch = 1;

static void printStep(int64_t step, double loss, double seconds) {
  double samplesPerStep =
      static_cast<double>(microbatches * numReplicas * samplesPerMicrobatch);
  llvm::outs() << "step " << step + 1 << "/" << numSteps << "  loss "
               << llvm::format("%.6f", loss) << "  samples/s "
               << llvm::format("%.1f", samplesPerStep / seconds) << "\n";
  llvm::outs().flush();
}

/// The summary of --eval and --grads.
static void printMeanLoss(StringRef fnName, double loss) {
  llvm::outs() << "zb-run: " << fnName << ": " << microbatches << " microbatch"
               << (microbatches == 1 ? "" : "es") << ", mean loss "
               << llvm::format("%.6f", loss) << "\n";
}

/// Writes the --metrics file (when asked for) of a run whose steps began
/// at `firstStep`.
static bool writeMetrics(zb::RunMetrics metrics) {
  if (metricsPath.empty())
    return true;
  metrics.samplesPerMicrobatch = samplesPerMicrobatch;
  metrics.clipping = clipGradNorm > 0;
  metrics.ranks = numRanks;
  metrics.replicas = numReplicas;
  if (numRanks > 1 || numReplicas > 1)
    metrics.schedule = scheduleName;
  std::string error;
  if (!zbrt::writeFileAtomically(metricsPath, zb::metricsJson(metrics), error))
    return fail(error), false;
  return true;
}

/// Reports a skipped step.
static void printSkipped(int64_t step) {
  llvm::outs() << "zb-run: step " << step + 1
               << ": a gradient is not finite; the step is skipped on every "
                  "rank\n";
}

/// The loop's options from the flags, after the steps before `firstStep`
/// (--resume): prints each step (or the mean loss without an update) and
/// reports skipped steps.
static zb::TrainingOptions trainingOptions(const zb::ModelSignature &signature,
                                           const std::string &modelText,
                                           int64_t firstStep) {
  bool training = !evalMode && !gradsMode;
  zb::TrainingOptions options;
  options.firstStep = firstStep;
  options.steps = training ? numSteps.getValue() : 1;
  options.update = training;
  options.check.clipGradNorm = clipGradNorm;
  options.check.synchronous = syncGradCheck;
  options.checkpointDir = checkpointDir;
  options.checkpointEvery = checkpointEvery;
  options.checkpointConfig =
      zb::checkpointConfig(modelText, optimizerName.getValue());
  std::string fnName = func::FuncOp(signature.func).getSymName().str();
  options.onStep = [fnName](int64_t step, double loss, double seconds,
                            const zb::StepCheck *check) {
    if (!check) {
      printMeanLoss(fnName, loss);
      return;
    }
    if (check->skipped)
      printSkipped(step);
    printStep(step, loss, seconds);
  };
  return options;
}

/// --resume: the first step to run (0 without it); on failure sets `error`.
static int64_t resumeIfAsked(const std::string &modelText, zb::ModelData &data,
                             ArrayRef<const zb::ModelArg *> params,
                             zbrt::Optimizer &optimizer, std::string &error) {
  if (resumeDir.empty())
    return 0;
  return zb::resumeTraining(
      resumeDir, zb::checkpointConfig(modelText, optimizerName.getValue()),
      numSteps, data, params, optimizer, error);
}

/// Microbatches per second of each step, over every replica.
static std::vector<double> stepRates(const zb::TrainingResult &result) {
  std::vector<double> rates;
  for (double seconds : result.seconds)
    rates.push_back(microbatches * numReplicas / seconds);
  return rates;
}

/// --check-grad: the step's gradients against finite differences of the
/// forward. Returns the exit code.
static int checkGradients(zb::ModelData &data, zb::ModelProgram &program,
                          ArrayRef<const zb::ModelArg *> params,
                          const zbrt::NpzArchive &grads) {
  zb::GradCheckOptions options;
  options.tolerance = gradTol;
  options.samples = gradSamples;
  options.seed = seed;
  zb::GradCheckResult r = zb::checkGradients(
      data, params, grads, [&] { return program.meanLoss(0); }, options);
  llvm::outs() << "zb-run: check-grad: worst relative error "
               << llvm::format("%.3e", r.worst) << " at " << r.at
               << " (analytic " << llvm::format("%.9g", r.analytic)
               << ", finite difference " << llvm::format("%.9g", r.numeric)
               << "), tolerance " << llvm::format("%.1e", r.tolerance) << "\n";
  if (!r.passed())
    return fail("check-grad: gradient error " +
                llvm::formatv("{0:e}", r.worst).str() + " above tolerance");
  return 0;
}

/// --eval, --grads, and training on one process.
static int runSingleProcess(MLIRContext &context, ModuleOp module,
                            const zb::ModelSignature &signature,
                            const std::string &modelText, const char *argv0) {
  bool needGrads = !evalMode;
  OwningOpRef<ModuleOp> clone = module.clone();
  if (needGrads) {
    PassManager pm(&context);
    pm.addPass(zb::createZBAutodiff());
    if (failed(pm.run(*clone)))
      return fail("differentiating '" + modelPath + "' failed");
  }
  std::unique_ptr<zb::CacheEntry> compiled = compileCached(
      *clone, modelText + (needGrads ? ";grads" : ";eval"), argv0);
  if (!compiled)
    return 1;
  if (compileOnly) {
    llvm::outs() << compiled->getPath() << "\n";
    return 0;
  }
  std::string error;
  std::unique_ptr<zbrt::SharedObject> object =
      zbrt::SharedObject::open(compiled->loadPath(), error);
  if (!object)
    return fail(error);
  func::FuncOp modelFn = signature.func;
  std::string fnName = modelFn.getSymName().str();
  zbrt::EntryFn forward =
      object->lookup(std::string(zb::kEntryPrefix) + fnName, error);
  if (!forward)
    return fail(error);
  zbrt::EntryFn gradient = nullptr;
  if (needGrads) {
    gradient =
        object->lookup(std::string(zb::kEntryPrefix) + fnName + "_grad", error);
    if (!gradient)
      return fail(error);
  }
  zb::ModelData data(signature, dataOptions(0));
  error = data.prepare();
  if (!error.empty())
    return fail(error);
  zb::ModelProgram program(
      data, forward, gradient,
      zb::dtypeOf(cast<RankedTensorType>(modelFn.getResultTypes()[0])
                      .getElementType()));

  bool training = !evalMode && !gradsMode;
  zbrt::Optimizer optimizer = makeOptimizer();
  std::vector<const zb::ModelArg *> params;
  for (const zb::ModelArg &arg : signature.args)
    if (arg.isParam())
      params.push_back(&arg);
  int64_t firstStep = resumeIfAsked(modelText, data, params, optimizer, error);
  if (!error.empty())
    return fail(error);
  std::unique_ptr<zbrt::Comm> local = zbrt::createLocalComm();
  SmallVector<bool> counted(params.size(), true);
  zb::TrainingContext run{*local, *local, 1,       0,
                          data,   params, counted, optimizer};
  zb::TrainingResult result;
  if (!zb::train(program, run, trainingOptions(signature, modelText, firstStep),
                 result, error))
    return fail(error);

  zb::RunMetrics metrics;
  metrics.losses = result.losses;
  if (training)
    metrics.microbatchesPerSecond = stepRates(result);
  else
    metrics.microbatchLosses.emplace(program.microbatchLosses().begin(),
                                     program.microbatchLosses().end());
  metrics.checks = result.checks;
  metrics.firstStep = firstStep;
  if (!writeMetrics(std::move(metrics)))
    return 1;
  if (!dumpGradsPath.empty() &&
      !writeArchive(dumpGradsPath, result.lastGrads, result.losses.back()))
    return 1;
  if (!dumpParamsPath.empty() &&
      !writeArchive(dumpParamsPath, data.paramArchive(params), std::nullopt))
    return 1;
  if (checkGrad)
    return checkGradients(data, program, params, result.lastGrads);
  return 0;
}

/// Rank 0 collects every rank's `archive` parts and writes them to `path`.
static bool gatherArchive(zbrt::Comm &comm, const std::string &path,
                          const zbrt::NpzArchive &mine,
                          std::optional<double> loss) {
  zbrt::NpzArchive merged;
  zb::collectArchive(comm, path, mine, merged);
  bool ok = comm.rank() != 0 || writeArchive(path, merged, loss);
  comm.barrier();
  return ok;
}

/// Prints the measured figures after a pipelined run.
static void printMeasurement(const zb::run::RunMeasurement &m) {
  llvm::outs() << "zb-run: bubble rate " << llvm::format("%.3f", m.bubble)
               << " measured, " << llvm::format("%.3f", m.simulatedBubble)
               << " simulated for " << scheduleName
               << " with the measured stage times\n";
  if (numReplicas > 1)
    llvm::outs() << "zb-run: gradient reduction over " << numReplicas
                 << " replicas: " << llvm::format("%.3f", m.reductionWait)
                 << " ms per step not hidden by compute measured, "
                 << llvm::format("%.3f", m.simulatedReduction)
                 << " ms simulated\n";
  for (size_t r = 0; r < m.peakStash.size(); ++r)
    llvm::outs() << "zb-run: rank " << r << ": peak stash "
                 << m.peakStash[r] << " bytes measured, "
                 << m.predictedStash[r] << " predicted; peak memory "
                 << m.peakMemory[r] << " bytes\n";
}

/// One rank of a pipelined run (under mpirun): training, --grads or --eval.
static int runPipelineRank(MLIRContext &context, ModuleOp module,
                           const zb::ModelSignature &signature,
                           const std::string &modelText, const char *argv0,
                           int *argc, char ***argv) {
  std::string error;
  bool gpu = backendName == "nccl";
  std::unique_ptr<zb::RunComms> comms = zb::RunComms::open(
      numRanks, numReplicas, compileOnly, gpu, argc, argv, error);
  if (!comms)
    return fail(error);
  // `comm` is this process's pipeline, which compiled code talks over;
  // `everyone` every process (the same without replicas).
  zbrt::Comm *comm = &comms->pipeline();
  zbrt::Comm *everyone = &comms->world();
  const zbrt::CUDARuntime *cuda = comms->cuda();
  int64_t replicaIndex = comms->replica();
  int rank = comm->rank();
  int worldRank = everyone->rank();

  // Every rank runs the (cheap) MLIR pipeline, then compiles its own part;
  // rank 0 alone reports what the pipeline says (its errors too: every rank
  // meets them alike), and the warnings of the rest, which every rank would
  // repeat.
  bool inSharedPipeline = true;
  std::optional<ScopedDiagnosticHandler> quiet;
  if (worldRank != 0)
    quiet.emplace(&context, [&inSharedPipeline](Diagnostic &diag) {
      return success(inSharedPipeline ||
                     diag.getSeverity() != DiagnosticSeverity::Error);
    });
  zb::ZBPipelineOptions options;
  options.stages = numRanks;
  options.microbatches = microbatches;
  options.schedule = scheduleName;
  options.chunks = numChunks;
  options.replicas = numReplicas;
  // --eval: each rank runs its stages' forwards in the schedule's order.
  options.forwardOnly = evalMode;
  options.lowerToCPU = false;
  options.target = gpu ? "gpu" : "cpu";
  std::unique_ptr<zb::LoweredPipeline> lowered =
      zb::LoweredPipeline::lower(module, options, error);
  if (!lowered)
    everyone->abortAll("compiling the pipeline for '" + modelPath + "' failed" +
                       (error.empty() ? "" : ": " + error));
  inSharedPipeline = false;
  const zb::schedule::ScheduleInfo *info =
      zb::schedule::lookupSchedule(scheduleName);
  int64_t chunks = info->chunksFor(numChunks);
  zb::RankProgramInfo mine;
  if (!lowered->rankProgram(rank, mine, error))
    comm->abort(error);

  // Each rank compiles only its own step function and stage functions, all
  // ranks at once; --compile-only compiles every rank's in turn.
  std::string key = modelText + ";pipeline;np=" + std::to_string(numRanks) +
                    ";schedule=" + scheduleName.getValue() +
                    ";chunks=" + std::to_string(chunks) +
                    ";m=" + std::to_string(microbatches) +
                    ";dp=" + std::to_string(numReplicas) + (gpu ? ";gpu" : "") +
                    (evalMode ? ";eval" : "");
  auto compileRank = [&](int r) -> std::unique_ptr<zb::CacheEntry> {
    OwningOpRef<ModuleOp> rankModule = lowered->keepRank(r, error);
    if (!rankModule) {
      fail(error);
      return nullptr;
    }
    return compileCached(*rankModule, key + ";rank=" + std::to_string(r), argv0,
                         gpu);
  };
  if (compileOnly) {
    for (int r = 0; r < numRanks; ++r) {
      std::unique_ptr<zb::CacheEntry> compiled = compileRank(r);
      if (!compiled)
        return 1;
      llvm::outs() << compiled->getPath() << "\n";
    }
    return 0;
  }
  std::unique_ptr<zb::CacheEntry> compiled = compileRank(rank);
  if (!compiled)
    comm->abort("compiling rank " + std::to_string(rank) +
                "'s program for '" + modelPath + "' failed");
  std::unique_ptr<zbrt::SharedObject> object =
      zbrt::SharedObject::open(compiled->loadPath(), error);
  if (!object)
    comm->abort(error);
  zbrt::EntryFn entry =
      object->lookup(std::string(zb::kEntryPrefix) + mine.stepFunction, error);
  if (!entry)
    comm->abort(error);

  zb::ModelData data(signature, dataOptions(replicaIndex));
  error = data.prepare();
  if (!error.empty())
    everyone->abortAll(error);
  // This rank's parameters, in the step function's order.
  std::vector<const zb::ModelArg *> params;
  for (const std::string &name : mine.params)
    for (const zb::ModelArg &arg : signature.args)
      if (arg.isParam() && arg.name == name)
        params.push_back(&arg);

  zbrt::Optimizer optimizer = makeOptimizer();
  int64_t firstStep = resumeIfAsked(modelText, data, params, optimizer, error);
  if (!error.empty())
    everyone->abortAll(error);

  const zb::StageTable &stageTable = lowered->stageTable();
  SmallVector<bool> counted(mine.countsInNorm.begin(), mine.countsInNorm.end());

  // --grads: one step through the same per-rank programs, no update.
  auto program = std::make_unique<zb::PipelineRankProgram>(data, params, entry,
                                                           *everyone, cuda);
  zb::TrainingContext run{*comm, *everyone, numReplicas, replicaIndex,
                          data,  params,    counted,     optimizer};
  zb::TrainingResult result;
  if (!zb::train(*program, run,
                 trainingOptions(signature, modelText, firstStep), result,
                 error))
    everyone->abortAll(error);

  std::vector<double> reduceMs;
  if (numReplicas > 1)
    reduceMs = zb::run::measureReductions(*everyone, numRanks, numReplicas,
                                          rank, stageTable);
  int code = 0;
  zb::RunMetrics metrics;
  metrics.losses = result.losses;
  if (evalMode) {
    // Forwards alone: no schedule to measure against.
    if (worldRank == 0 && !writeMetrics(std::move(metrics)))
      code = 1;
  } else if (worldRank == 0) {
    zb::schedule::Problem layout;
    layout.numRanks = numRanks;
    layout.numChunks = chunks;
    layout.placement = info->defaultPlacement;
    layout.numMicrobatches = microbatches;
    layout.stageCostReduce = reduceMs;
    zb::run::RunMeasurement measured = zb::run::measure(
        program->measuredSteps(), stageTable, layout, scheduleName);
    printMeasurement(measured);
    metrics.microbatchesPerSecond = stepRates(result);
    metrics.checks = result.checks;
    metrics.firstStep = firstStep;
    metrics.measured = &measured;
    if (!writeMetrics(std::move(metrics)))
      code = 1;
    if (!tracePath.empty()) {
      std::ostringstream trace;
      zb::schedule::writeChromeTrace(measured.trace, trace);
      if (!zbrt::writeFileAtomically(tracePath, trace.str(), error))
        code = fail(error);
    }
    if (!profilePath.empty() &&
        !zbrt::writeFileAtomically(profilePath, zb::run::profileJson(measured),
                                   error))
      code = fail(error);
  }
  // Over every replica: the copies of a parameter (and of its gradient)
  // must be bitwise equal.
  if (!dumpGradsPath.empty() &&
      !gatherArchive(*everyone, dumpGradsPath, result.lastGrads,
                     result.losses.back()))
    code = 1;
  if (!dumpParamsPath.empty() &&
      !gatherArchive(*everyone, dumpParamsPath, data.paramArchive(params),
                     std::nullopt))
    code = 1;
  everyone->barrier();
  program.reset();
  comms.reset();
  return code;
}

/// The first problem with the flags, as a message; empty when there is
/// none.
static std::string checkFlags() {
  auto message = [](const llvm::Twine &text) { return text.str(); };
  bool training = !evalMode && !gradsMode;
  if (evalMode && gradsMode)
    return message("pass at most one of --eval and --grads");
  if (checkGrad && !gradsMode)
    return message("--check-grad needs --grads");
  if (microbatches < 1)
    return message("--microbatches must be at least 1, got " +
                   llvm::Twine(microbatches.getValue()));
  if (numSteps < 1)
    return message("--steps must be at least 1, got " +
                   llvm::Twine(numSteps.getValue()));
  if (numRanks < 1)
    return message("--np must be at least 1, got " +
                   llvm::Twine(numRanks.getValue()));
  if (numReplicas < 1)
    return message("--dp must be at least 1, got " +
                   llvm::Twine(numReplicas.getValue()));
  bool pipelined = numRanks > 1 || numReplicas > 1;
  int64_t worldSize = int64_t(numRanks) * numReplicas;
  if (evalMode && !dumpGradsPath.empty())
    return message("--dump-grads needs --grads or training; --eval computes no "
                   "gradients");
  if (evalMode && (!tracePath.empty() || !profilePath.empty()))
    return message("--trace and --profile record training or --grads; --eval "
                   "runs forwards only");
  if (numReplicas > 1 && (evalMode || checkGrad))
    return message("--dp needs training or --grads; --eval and --check-grad "
                   "run on one process");
  if (numReplicas > 1 && backendName == "nccl")
    return message("--dp with --backend nccl is not supported yet: the "
                   "replicas' gradient means run on the MPI backend only");
  if (numRanks > 1 && checkGrad)
    return message("--check-grad runs on one process (finite differences of "
                   "the unpartitioned model); compare --grads --np P with "
                   "--np 1 instead");
  if ((!tracePath.empty() || !profilePath.empty()) && worldSize < 2)
    return message("--trace and --profile record a pipelined run: they need "
                   "--np 2 or more (or --dp 2 or more)");
  if ((!checkpointDir.empty() || !resumeDir.empty()) && !training)
    return message("--checkpoint and --resume are for training, not --eval or "
                   "--grads");
  if (clipGradNorm < 0 || !std::isfinite(clipGradNorm))
    return message("--clip-grad-norm must be a positive number, got " +
                   llvm::formatv("{0}", clipGradNorm.getValue()).str());
  if (clipGradNorm > 0 && !training)
    return message("--clip-grad-norm clips a training step's gradients; "
                   "--eval and --grads take no step");
  if (checkpointEvery < 0)
    return message("--checkpoint-every must be positive, got " +
                   llvm::Twine(checkpointEvery.getValue()));
  if (checkpointEvery > 0 && checkpointDir.empty())
    return message("--checkpoint-every needs --checkpoint DIR");
  if (optimizerName != "sgd" && optimizerName != "adamw")
    return message("unknown --optimizer '" + optimizerName +
                   "' (expected sgd or adamw)");
  if (backendName != "mpi" && backendName != "nccl")
    return message("unknown --backend '" + backendName +
                   "' (expected mpi or nccl)");
  if (backendName == "nccl" && !training)
    return message("--backend nccl trains; --eval and --grads run on the CPU");
  if (pipelined && !zb::schedule::lookupSchedule(scheduleName))
    return message("unknown --schedule '" + scheduleName +
                   "'; known: " + zb::schedule::knownScheduleNames());
  return "";
}

/// Reports an error of the flags or of the launch, which every process of
/// an outside launcher's job meets alike, once: there through rank 0 of
/// the job's MPI world. Returns the exit code.
static int failOnce(const std::string &message, int *argc, char ***argv) {
  if (zbrt::launchedWorldSize() > 1 && !compileOnly) {
    std::string error;
    zbrt::initComm(argc, argv);
    if (std::unique_ptr<zbrt::Comm> everyone = zbrt::createMPIComm(error))
      everyone->abortAll(message);
  }
  return fail(message);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "zb-run: compile a ZeroBubble model and run or train it (CPU; GPU "
      "with --backend nccl)\n");

  if (std::string problem = checkFlags(); !problem.empty())
    return failOnce(problem, &argc, &argv);
  bool pipelined = numRanks > 1 || numReplicas > 1;
  int64_t worldSize = int64_t(numRanks) * numReplicas;

  // Started by an outside launcher (mpirun, srun): run as its rank, with
  // as many ranks as the flags ask for.
  if (int world = zbrt::launchedWorldSize();
      world > 1 && !compileOnly && world != worldSize) {
    std::string flags = "--np " + std::to_string(numRanks);
    if (numReplicas > 1)
      flags += " --dp " + std::to_string(numReplicas);
    std::string message =
        ("started as one of " + llvm::Twine(world) +
         " processes by an MPI launcher, but " + flags + " needs " +
         llvm::Twine(worldSize) +
         "; pass --np P and --dp D with P * D = " + llvm::Twine(world) +
         " (or start one process and let zb-run launch them)")
            .str();
    return failOnce(message, &argc, &argv);
  }

  // Parse and check the model.
  DialectRegistry registry;
  zb::registerCPUCompilerDependencies(registry);
  zb::autodiff::registerGradientExternalModels(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // A diagnostic names its place in the user's model; the op's dump after
  // a pass would bury it.
  context.printOpOnDiagnostic(false);
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(modelPath, &errorMessage);
  if (!file)
    return fail(errorMessage);
  std::string modelText = file->getBuffer().str();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return fail("cannot parse '" + modelPath + "'");
  FailureOr<zb::ModelSignature> signature = zb::analyzeModel(*module);
  if (failed(signature))
    return 1;
  for (const zb::ModelArg &arg : signature->args)
    if (!arg.isParam() && !arg.shape().empty()) {
      samplesPerMicrobatch = arg.shape().front();
      break;
    }
  // The model is read before the ranks start, so that a bad one is
  // reported once.
  if (worldSize > 1 && !compileOnly && !zbrt::isMPIWorker()) {
    int rc = zbrt::relaunchUnderMPI(static_cast<int>(worldSize), argc, argv,
                                    errorMessage);
    if (rc < 0)
      return fail(errorMessage);
    return rc;
  }
  if (pipelined || backendName == "nccl")
    return runPipelineRank(context, *module, *signature, modelText, argv[0],
                           &argc, &argv);
  return runSingleProcess(context, *module, *signature, modelText, argv[0]);
}
