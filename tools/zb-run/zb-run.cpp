//===- zb-run.cpp - Compile and run a model -------------------------------===//
//
// Part of ZeroBubble MLIR.
//
// zb-run MODEL.mlir (--eval | --grads) [--params P.npz] [--inputs I.npz]
//        [--seed S] [--microbatches M] [--metrics M.json]
//        [--dump-grads G.npz] [--check-grad] [--cache-dir DIR]
// zb-run MODEL.mlir [--np P] [--dp D] [--schedule NAME] [--chunks V]
//        [--steps K] [--optimizer sgd|sgd-momentum|adamw] [--lr LR]
//        [--dump-params F.npz]
//        [--backend mpi|nccl] [--trace T.json] [--profile P.json]
//        [--checkpoint DIR [--checkpoint-every N]] [--resume DIR]
//        [--balance] [--dtype f32|bf16] ...
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

#include "zb/Conversion/CompiledOptimizer.h"
#include "zb/Dialect/Sched/Profile.h"
#include "zb/Driver/Balance.h"
#include "zb/Driver/Compile.h"
#include "zb/Driver/GradCheck.h"
#include "zb/Driver/Measure.h"
#include "zb/Driver/Metrics.h"
#include "zb/Driver/ModelData.h"
#include "zb/Driver/ModelFile.h"
#include "zb/Driver/Pipeline.h"
#include "zb/Driver/Programs.h"
#include "zb/Driver/RunComms.h"
#include "zb/Driver/RunOptions.h"
#include "zb/Driver/Training.h"
#include "zb/Model/Model.h"
#include "zb/Pipelines/Pipelines.h"
#include "zb/Target/CPUCompiler.h"

#include "zbrt/CUDA.h"
#include "zbrt/Comm.h"
#include "zbrt/Executable.h"
#include "zbrt/Gemm.h"
#include "zbrt/Launch.h"
#include "zbrt/Lending.h"
#include "zbrt/Npz.h"
#include "zbrt/Optimizer.h"
#include "zbrt/zbrt.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <sstream>

using namespace mlir;

namespace cl = llvm::cl;

static cl::OptionCategory category("zb-run options");

/// The flags, bound to their fields.
static zb::RunOptions opts;

static cl::opt<std::string, true>
    modelPath(cl::Positional, cl::desc("MODEL.mlir"), cl::Required,
              cl::location(opts.modelPath), cl::cat(category));
static cl::opt<bool, true>
    evalMode("eval",
             cl::desc("Run the forward on each microbatch "
                      "and print the mean loss"),
             cl::location(opts.eval), cl::cat(category));
static cl::opt<std::string, true>
    paramsPath("params",
               cl::desc("Parameters (.npz, keyed by zb.param name); default: "
                        "initialised from --seed"),
               cl::value_desc("P.npz"), cl::location(opts.paramsPath),
               cl::cat(category));
static cl::opt<std::string, true> inputsPath(
    "inputs",
    cl::desc("Data (.npz, keyed by zb.data name or arg<i>), each array "
             "[M microbatches][argument shape] for every step, or "
             "[K >= steps][M][argument shape], one per step; default: "
             "synthetic (a {zb.rng} random key is never read from it: "
             "zb-run draws it from --seed per microbatch)"),
    cl::value_desc("I.npz"), cl::location(opts.inputsPath), cl::cat(category));
static cl::opt<uint64_t, true>
    seed("seed", cl::desc("Seed for parameters, data and random keys"),
         cl::location(opts.seed), cl::cat(category));
static cl::opt<int64_t, true> microbatches("microbatches",
                                           cl::desc("Microbatches per step"),
                                           cl::location(opts.microbatches),
                                           cl::cat(category));
static cl::opt<std::string, true>
    metricsPath("metrics", cl::desc("Write metrics JSON ({\"loss\": [...]})"),
                cl::value_desc("M.json"), cl::location(opts.metricsPath),
                cl::cat(category));
static cl::opt<bool, true>
    gradsMode("grads",
              cl::desc("Run forward and backward (no update) and print the "
                       "mean loss; see --dump-grads and --check-grad"),
              cl::location(opts.grads), cl::cat(category));
static cl::opt<std::string, true> dumpGradsPath(
    "dump-grads",
    cl::desc("Write every parameter's gradient (mean over the microbatches; "
             "of the last step when training) and the loss to this .npz, "
             "keyed by parameter name"),
    cl::value_desc("G.npz"), cl::location(opts.dumpGradsPath),
    cl::cat(category));
static cl::opt<bool, true> compileOnly(
    "compile-only",
    cl::desc("Compile the model for these flags into the cache, print the "
             "object's path (with --np P, each rank's, one per line) and "
             "exit: runs nothing, so --backend nccl needs no GPU and --np "
             "needs no mpirun (a cache warmed where the compiler is serves "
             "a machine that only runs)"),
    cl::location(opts.compileOnly), cl::cat(category));
static cl::opt<std::string, true> targetCPUName(
    "target-cpu",
    cl::desc("The CPU to compile host code for, as LLVM names it (e.g. "
             "x86-64-v3); default: $ZB_TARGET_CPU, else this machine's. "
             "A CPU with instruction sets this one lacks is only compiled "
             "for (--compile-only)"),
    cl::value_desc("NAME"), cl::location(opts.targetCPU), cl::cat(category));
static cl::opt<bool, true> checkGrad(
    "check-grad",
    cl::desc("With --grads: compare a sample of gradient entries with "
             "central finite differences and print the worst error; exit "
             "non-zero above --grad-tol"),
    cl::location(opts.checkGrad), cl::cat(category));
static cl::opt<double, true> gradTol(
    "grad-tol",
    cl::desc("Largest relative error --check-grad accepts (default 1e-6 "
             "for f64 parameters, 2e-2 for f32)"),
    cl::location(opts.gradTol), cl::cat(category));
static cl::opt<int, true> gradSamples(
    "grad-samples",
    cl::desc("Entries per parameter --check-grad compares (default 6)"),
    cl::location(opts.gradSamples), cl::cat(category));
static cl::opt<int, true> numRanks(
    "np",
    cl::desc(
        "Pipeline ranks P (default 1). Training, --grads or --eval with P > 1 "
        "launches P processes through mpirun (or, started by mpirun or "
        "srun, runs as one of them); P = 1 runs in-process, the "
        "unpartitioned reference"),
    cl::location(opts.ranks), cl::cat(category));
static cl::opt<int, true> numReplicas(
    "dp",
    cl::desc("Data-parallel replicas D of the pipeline (default 1): P * D "
             "processes, replica r being ranks r*P .. r*P+P-1; each runs "
             "--microbatches M of the step's D * M (replica r takes "
             "microbatches r*M .. r*M+M-1), and each stage's gradients are "
             "averaged over its D replicas after its last W"),
    cl::location(opts.replicas), cl::cat(category));
static cl::opt<std::string, true>
    scheduleName("schedule",
                 cl::desc("Pipeline schedule (default zb-h1; see zb-sched "
                          "--help)"),
                 cl::location(opts.schedule), cl::cat(category));
static cl::opt<int, true>
    numChunks("chunks", cl::desc("Stages per rank V (default: the schedule's)"),
              cl::location(opts.chunks), cl::cat(category));
static cl::opt<std::string, true> dtypeName(
    "dtype",
    cl::desc("Precision: f32 (default) or bf16 (mixed: the pipeline's "
             "activation stashes in bf16, parameters, gradients and "
             "arithmetic in f32; with --backend nccl the gemms also "
             "multiply in bf16)"),
    cl::location(opts.dtype), cl::cat(category));
static cl::opt<bool, true> balance(
    "balance",
    cl::desc("Cut the pipeline's stages at measured times: before training, "
             "run a few steps of the model cut into up to 4 stages per "
             "pipeline stage, round the first replica's ranks, then cut and "
             "schedule with those stage times instead of the cost model's "
             "FLOPs"),
    cl::location(opts.balance), cl::cat(category));
static cl::opt<bool, true> compiledUpdate(
    "compiled-update",
    cl::desc("Run the optimizer step as code compiled with each rank's "
             "program (--zb-emit-optimizer) instead of the runtime's loops; "
             "--backend nccl always does, keeping the parameters, gradients "
             "and optimizer state on the GPU"),
    cl::location(opts.compiledUpdate), cl::cat(category));
static cl::opt<int, true> numSteps("steps",
                                   cl::desc("Training steps (default 1)"),
                                   cl::location(opts.steps), cl::cat(category));
static cl::opt<std::string, true>
    optimizerName("optimizer",
                  cl::desc("sgd (default), sgd-momentum (--momentum) or "
                           "adamw"),
                  cl::location(opts.optimizer), cl::cat(category));
static cl::opt<double, true> clipGradNorm(
    "clip-grad-norm",
    cl::desc("Scale the step's gradients so that their global L2 norm is at "
             "most X (PyTorch's clip_grad_norm_), checked after an "
             "optimistic update that is redone when clipping applies"),
    cl::value_desc("X"), cl::location(opts.clipGradNorm), cl::cat(category));
static cl::opt<bool, true> syncGradCheck(
    "sync-grad-check",
    cl::desc("Reduce the gradient norm and the finite check before the "
             "optimizer step instead of after it (a synchronisation; to test "
             "the post-validated step against)"),
    cl::Hidden, cl::location(opts.syncGradCheck), cl::cat(category));
static cl::opt<double, true>
    learningRate("lr", cl::desc("Learning rate (default 0.01)"),
                 cl::location(opts.learningRate), cl::cat(category));
static cl::opt<double, true>
    momentum("momentum",
             cl::desc("SGD's momentum factor with --optimizer sgd-momentum, "
                      "as PyTorch's SGD(momentum=...) (default 0.9)"),
             cl::location(opts.momentum), cl::cat(category));
static cl::opt<std::string, true>
    dumpParamsPath("dump-params",
                   cl::desc("After training: write every parameter to this "
                            ".npz"),
                   cl::value_desc("F.npz"), cl::location(opts.dumpParamsPath),
                   cl::cat(category));
static cl::opt<std::string, true>
    backendName("backend",
                cl::desc("Communication backend: mpi (default; the model "
                         "runs on the CPU) or nccl (the model runs on one "
                         "GPU per rank, transfers through NCCL)"),
                cl::location(opts.backend), cl::cat(category));
static cl::opt<std::string, true> cacheDir(
    "cache-dir",
    cl::desc("Where compiled models are cached (default: $ZB_CACHE_DIR, "
             "else $XDG_CACHE_HOME/zerobubble, else ~/.cache/zerobubble)"),
    cl::location(opts.cacheDir), cl::cat(category));

static cl::opt<std::string, true> tracePath(
    "trace",
    cl::desc("With --np > 1: write every rank's actions of every step as one "
             "Chrome trace (the format of zb-sched --format=trace)"),
    cl::value_desc("T.json"), cl::location(opts.tracePath), cl::cat(category));
static cl::opt<std::string, true> profilePath(
    "profile",
    cl::desc("With --np > 1: write the measured mean F/B/W milliseconds per "
             "stage as JSON, for --zb-pipeline=\"costs=...\" and "
             "--zb-schedule"),
    cl::value_desc("PROFILE.json"), cl::location(opts.profilePath),
    cl::cat(category));
static cl::opt<std::string, true> checkpointDir(
    "checkpoint",
    cl::desc("Write the training state (parameters, optimizer state, step) "
             "to this directory, atomically, at the end and every "
             "--checkpoint-every steps"),
    cl::value_desc("DIR"), cl::location(opts.checkpointDir), cl::cat(category));
static cl::opt<int, true> checkpointEvery(
    "checkpoint-every",
    cl::desc("With --checkpoint: also write it after every N steps"),
    cl::value_desc("N"), cl::location(opts.checkpointEvery), cl::cat(category));
static cl::opt<std::string, true> resumeDir(
    "resume",
    cl::desc("Continue training from the newest state in this checkpoint "
             "directory, up to --steps steps in all"),
    cl::value_desc("DIR"), cl::location(opts.resumeDir), cl::cat(category));

/// Prints "zb-run: error: <message>" and returns the exit code for errors.
static int fail(const llvm::Twine &message) {
  llvm::errs() << "zb-run: error: " << message << "\n";
  return 1;
}

static void warn(const llvm::Twine &message) {
  llvm::errs() << "zb-run: warning: " << message << "\n";
}

/// The compiler's settings for this run and the cache they name, opened
/// once.
struct Compiler {
  zb::CompileSettings settings;
  zb::CompileCache cache;
};

/// This run's compiler; none (with the error printed) when the cache cannot
/// be used.
static std::optional<Compiler> openCompiler(const char *argv0) {
  static int anchor;
  zb::CompileSettings settings =
      opts.compileSettings(zb::executableIdentity(argv0, &anchor));
  llvm::Expected<zb::CompileCache> cache = zb::openCache(settings);
  if (!cache)
    return fail(llvm::toString(cache.takeError())), std::nullopt;
  return Compiler{std::move(settings), std::move(*cache)};
}

/// Writes `archive` plus the loss (when given) to `path`.
static bool writeArchive(const std::string &path, zbrt::NpzArchive archive,
                         std::optional<double> loss) {
  if (loss) {
    archive["loss"] =
        zbrt::NpyArray{zbrt::DType::F64, {}, std::vector<char>(sizeof(double))};
    *archive["loss"].as<double>() = *loss;
  }
  std::string error;
  if (!zbrt::writeNpz(path, archive, error))
    return fail(error), false;
  return true;
}

/// Rank 0 of `comm` collects every rank's `mine` and writes it to `path`,
/// with the arrays of `defaults` that no rank sent.
static bool gatherArchive(zbrt::Comm &comm, const std::string &path,
                          const zbrt::NpzArchive &mine,
                          std::optional<double> loss,
                          const zbrt::NpzArchive &defaults = {}) {
  zbrt::NpzArchive merged;
  zb::collectArchive(comm, path, mine, merged);
  for (const auto &[name, value] : defaults)
    merged.try_emplace(name, value);
  bool ok = comm.rank() != 0 || writeArchive(path, merged, loss);
  comm.barrier();
  return ok;
}

/// Writes the --metrics file (when asked for) of a run of `model`.
static bool writeMetrics(const zb::ModelFile &model, zb::RunMetrics metrics) {
  if (opts.metricsPath.empty())
    return true;
  metrics.samplesPerMicrobatch = model.samplesPerMicrobatch();
  metrics.clipping = opts.clipGradNorm > 0;
  metrics.ranks = opts.ranks;
  metrics.replicas = opts.replicas;
  if (opts.pipelined())
    metrics.schedule = opts.schedule;
  std::string error;
  if (!zbrt::writeFileAtomically(opts.metricsPath, zb::metricsJson(metrics),
                                 error))
    return fail(error), false;
  return true;
}

/// The loop's options: prints each step (or, without an update, the mean
/// loss) and reports skipped steps.
static zb::TrainingOptions trainingOptions(const zb::ModelFile &model,
                                           int64_t firstStep) {
  zb::TrainingOptions options = opts.trainingOptions(model.text(), firstStep);
  std::string fnName = func::FuncOp(model.signature().func).getSymName().str();
  int64_t samplesPerMicrobatch = model.samplesPerMicrobatch();
  options.onStep = [fnName, samplesPerMicrobatch](int64_t step, double loss,
                                                  double seconds,
                                                  const zb::StepCheck *check) {
    if (!check) {
      llvm::outs() << "zb-run: " << fnName << ": " << opts.microbatches
                   << " microbatch" << (opts.microbatches == 1 ? "" : "es")
                   << ", mean loss " << llvm::format("%.6f", loss) << "\n";
      return;
    }
    if (check->skipped)
      llvm::outs() << "zb-run: step " << step + 1
                   << ": a gradient is not finite; the step is skipped on "
                      "every rank\n";
    double samples = static_cast<double>(opts.microbatches * opts.replicas *
                                         samplesPerMicrobatch);
    llvm::outs() << "step " << step + 1 << "/" << opts.steps << "  loss "
                 << llvm::format("%.6f", loss) << "  samples/s "
                 << llvm::format("%.1f", samples / seconds) << "\n";
    llvm::outs().flush();
  };
  return options;
}

/// --resume: the first step to run (0 without it); on failure sets `error`.
static int64_t resumeIfAsked(StringRef modelText, zb::ModelData &data,
                             ArrayRef<const zb::ModelArg *> params,
                             zbrt::Optimizer &optimizer, std::string &error) {
  if (opts.resumeDir.empty())
    return 0;
  return zb::resumeTraining(opts.resumeDir, opts.checkpointConfig(modelText),
                            opts.steps, data, params, optimizer, error);
}

/// Microbatches per second of each step, over every replica.
static std::vector<double> stepRates(const zb::TrainingResult &result) {
  std::vector<double> rates;
  for (double seconds : result.seconds)
    rates.push_back(opts.microbatches * opts.replicas / seconds);
  return rates;
}

/// --check-grad: the step's gradients against finite differences of the
/// forward. Returns the exit code.
static int checkGradients(zb::ModelData &data, zb::ModelProgram &program,
                          ArrayRef<const zb::ModelArg *> params,
                          const zbrt::NpzArchive &grads) {
  zb::GradCheckOptions options;
  options.tolerance = opts.gradTol;
  options.samples = opts.gradSamples;
  options.seed = opts.seed;
  zb::GradCheckResult r = zb::checkGradients(
      data, params, grads, [&] { return program.meanLoss(0); }, options);
  if (r.checked == 0)
    return fail("check-grad: every entry tried (" + std::to_string(r.kinked) +
                ") is near a point where the loss is not smooth (its "
                "difference quotients with the step, half of it and one "
                "side of it disagree); try another --seed or more "
                "--grad-samples");
  llvm::outs() << "zb-run: check-grad: worst relative error "
               << llvm::format("%.3e", r.worst) << " at " << r.at
               << " (analytic " << llvm::format("%.9g", r.analytic)
               << ", finite difference " << llvm::format("%.9g", r.numeric)
               << "), tolerance " << llvm::format("%.1e", r.tolerance) << "; "
               << r.checked << " entries compared";
  if (r.kinked)
    llvm::outs() << ", " << r.kinked
                 << " passed over where the loss is not smooth";
  llvm::outs() << "\n";
  if (!r.passed())
    return fail("check-grad: gradient error " +
                llvm::formatv("{0:e}", r.worst).str() + " above tolerance");
  return 0;
}

/// --eval, --grads, and training on one process.
static int runSingleProcess(const zb::ModelFile &model, const char *argv0) {
  const zb::ModelSignature &signature = model.signature();
  StringRef modelText = model.text();
  // The forward entry point is compiled only where it runs: --eval, and
  // --check-grad's finite differences.
  zb::ModelEntries entries = opts.eval ? zb::ModelEntries::Forward
                             : opts.checkGrad
                                 ? zb::ModelEntries::ForwardAndGradients
                                 : zb::ModelEntries::Gradients;
  std::optional<Compiler> compiler = openCompiler(argv0);
  if (!compiler)
    return 1;
  llvm::Expected<std::unique_ptr<zb::CacheEntry>> compiled =
      zb::compileModel(model.module(), modelText, entries, compiler->settings,
                       compiler->cache, warn);
  if (!compiled)
    return fail("compiling '" + opts.modelPath +
                "': " + llvm::toString(compiled.takeError()));
  if (opts.compileOnly) {
    llvm::outs() << (*compiled)->getPath() << "\n";
    return 0;
  }
  llvm::Expected<zb::LoadedProgram> object =
      zb::LoadedProgram::load(**compiled);
  if (!object)
    return fail(llvm::toString(object.takeError()));
  func::FuncOp modelFn = signature.func;
  std::string fnName = modelFn.getSymName().str();
  zbrt::EntryFn forward = nullptr, gradient = nullptr;
  if (entries != zb::ModelEntries::Gradients) {
    llvm::Expected<zbrt::EntryFn> fn = object->entryPoint(fnName);
    if (!fn)
      return fail(llvm::toString(fn.takeError()));
    forward = *fn;
  }
  if (entries != zb::ModelEntries::Forward) {
    llvm::Expected<zbrt::EntryFn> fn = object->entryPoint(fnName + "_grad_acc");
    if (!fn)
      return fail(llvm::toString(fn.takeError()));
    gradient = *fn;
  }
  zb::ModelData data(signature, opts.data(0));
  std::string error = data.prepare();
  if (!error.empty())
    return fail(error);
  zb::ModelProgram program(data, forward, gradient);

  zbrt::Optimizer optimizer = opts.makeOptimizer();
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
  if (!zb::train(program, run, trainingOptions(model, firstStep), result,
                 error))
    return fail(error);

  zb::RunMetrics metrics;
  metrics.losses = result.losses;
  metrics.f64Losses = zb::lossDType(signature) == zbrt::DType::F64;
  if (opts.training())
    metrics.microbatchesPerSecond = stepRates(result);
  else
    metrics.microbatchLosses.emplace(program.microbatchLosses().begin(),
                                     program.microbatchLosses().end());
  metrics.checks = result.checks;
  metrics.firstStep = firstStep;
  if (!writeMetrics(model, std::move(metrics)))
    return 1;
  if (!opts.dumpGradsPath.empty() &&
      !writeArchive(opts.dumpGradsPath, result.lastGrads, result.losses.back()))
    return 1;
  if (!opts.dumpParamsPath.empty()) {
    zbrt::NpzArchive archive = data.paramArchive(params);
    for (const auto &[name, value] : data.runningStats())
      archive.try_emplace(name, value);
    if (!writeArchive(opts.dumpParamsPath, std::move(archive), std::nullopt))
      return 1;
  }
  if (opts.checkGrad)
    return checkGradients(data, program, params, result.lastGrads);
  return 0;
}

/// Prints the measured figures of a pipelined run and writes its trace and
/// profile. Returns the exit code.
static int reportMeasurement(const zb::run::RunMeasurement &m) {
  llvm::outs() << "zb-run: bubble rate " << llvm::format("%.3f", m.bubble)
               << " measured, " << llvm::format("%.3f", m.simulatedBubble)
               << " simulated for " << opts.schedule
               << " with the measured stage times\n";
  if (opts.replicas > 1)
    llvm::outs() << "zb-run: gradient reduction over " << opts.replicas
                 << " replicas: " << llvm::format("%.3f", m.reductionWait)
                 << " ms per step not hidden by compute measured, "
                 << llvm::format("%.3f", m.simulatedReduction)
                 << " ms simulated\n";
  for (size_t r = 0; r < m.peakStash.size(); ++r)
    llvm::outs() << "zb-run: rank " << r << ": peak stash " << m.peakStash[r]
                 << " bytes measured, " << m.predictedStash[r]
                 << " predicted; peak memory " << m.peakMemory[r] << " bytes\n";
  int code = 0;
  std::string error;
  if (!opts.tracePath.empty()) {
    std::ostringstream trace;
    zb::schedule::writeChromeTrace(m.trace, trace);
    if (!zbrt::writeFileAtomically(opts.tracePath, trace.str(), error))
      code = fail(error);
  }
  if (!opts.profilePath.empty() &&
      !zbrt::writeFileAtomically(opts.profilePath, zb::run::profileJson(m),
                                 error))
    code = fail(error);
  return code;
}

/// One rank of a pipelined run (under mpirun): training, --grads or --eval.
static int runPipelineRank(MLIRContext &context, const zb::ModelFile &model,
                           const char *argv0, int *argc, char ***argv) {
  const zb::ModelSignature &signature = model.signature();
  StringRef modelText = model.text();
  std::string error;
  std::unique_ptr<zb::RunComms> comms =
      zb::RunComms::open(opts.ranks, opts.replicas, opts.compileOnly,
                         opts.gpu(), argc, argv, error);
  if (!comms)
    return fail(error);
  // `comm` is this process's pipeline, which compiled code talks over;
  // `everyone` every process (the same without replicas).
  zbrt::Comm *comm = &comms->pipeline();
  zbrt::Comm *everyone = &comms->world();
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
  zb::ZBPipelineOptions pipelineOptions;
  opts.setPipelineOptions(pipelineOptions);
  std::optional<Compiler> compiler = openCompiler(argv0);
  // --balance: the stage times of a finer partition, measured first;
  // the partition cuts at them.
  std::string balanceProfile;
  llvm::SmallString<128> balancePath;
  llvm::scope_exit removeBalanceProfile([&] {
    if (!balancePath.empty())
      llvm::sys::fs::remove(balancePath);
  });
  if (opts.balance && !opts.compileOnly) {
    if (!compiler)
      everyone->abortAll("--balance: the compile cache cannot be opened");
    if (!zb::measureFineProfile(model.module(), modelText, opts,
                                compiler->settings, compiler->cache, warn,
                                *comm, *everyone, comms->replica(),
                                balanceProfile, error))
      everyone->abortAll(error);
    int fd = -1;
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
            "zb-balance", "json", fd, balancePath))
      comm->abort("--balance: cannot write the profile: " + ec.message());
    {
      llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
      out << balanceProfile;
    }
    pipelineOptions.partitionProfile = balancePath.str().str();
    zb::sched::StageProfile fine;
    if (worldRank == 0 &&
        !zb::sched::parseProfile(balanceProfile, /*numStages=*/-1, fine)) {
      llvm::outs() << "zb-run: --balance: " << fine.f.size()
                   << " finer stages measured, F+B+W ms:";
      for (size_t s = 0; s < fine.f.size(); ++s)
        llvm::outs() << " "
                     << llvm::format("%.3f", fine.f[s] + fine.b[s] + fine.w[s]);
      llvm::outs() << "; the pipeline's stages are cut at these times\n";
    }
  }
  std::unique_ptr<zb::LoweredPipeline> lowered =
      zb::LoweredPipeline::lower(model.module(), pipelineOptions, error);
  if (!lowered)
    everyone->abortAll("compiling the pipeline for '" + opts.modelPath +
                       "' failed" + (error.empty() ? "" : ": " + error));
  inSharedPipeline = false;
  zb::RankProgramInfo mine;
  if (!lowered->rankProgram(rank, mine, error))
    comm->abort(error);

  // Each rank compiles only its own step function and stage functions, all
  // ranks at once; --compile-only compiles every rank's in turn.
  auto compileRank = [&](int r) -> std::unique_ptr<zb::CacheEntry> {
    OwningOpRef<ModuleOp> rankModule = lowered->keepRank(r, error);
    if (!rankModule)
      return fail(error), nullptr;
    if (!compiler)
      return nullptr;
    // Cut at measured times, the program is keyed by what it is: a rerun
    // whose times give the same cut and schedule finds it cached.
    std::string balanced =
        balanceProfile.empty() ? "" : zb::moduleDigest(*rankModule);
    llvm::Expected<std::unique_ptr<zb::CacheEntry>> entry = zb::compileCached(
        *rankModule, opts.rankProgramKey(modelText, r, balanced),
        compiler->settings, compiler->cache, warn);
    if (!entry)
      return fail("compiling '" + opts.modelPath +
                  "': " + llvm::toString(entry.takeError())),
             nullptr;
    return std::move(*entry);
  };
  if (opts.compileOnly) {
    for (int r = 0; r < opts.ranks; ++r) {
      std::unique_ptr<zb::CacheEntry> compiled = compileRank(r);
      if (!compiled)
        return 1;
      llvm::outs() << compiled->getPath() << "\n";
    }
    return 0;
  }
  std::unique_ptr<zb::CacheEntry> compiled = compileRank(rank);
  if (!compiled)
    comm->abort("compiling rank " + std::to_string(rank) + "'s program for '" +
                opts.modelPath + "' failed");
  llvm::Expected<zb::LoadedProgram> object = zb::LoadedProgram::load(*compiled);
  if (!object)
    comm->abort(llvm::toString(object.takeError()));
  llvm::Expected<zbrt::EntryFn> entry = object->entryPoint(mine.stepFunction);
  if (!entry)
    comm->abort(llvm::toString(entry.takeError()));

  zb::ModelData data(signature, opts.data(comms->replica()));
  error = data.prepare();
  if (!error.empty())
    everyone->abortAll(error);
  // This rank's parameters, in the step function's order.
  std::vector<const zb::ModelArg *> params = mine.paramArgs(signature);

  zbrt::Optimizer optimizer = opts.makeOptimizer();
  int64_t firstStep = resumeIfAsked(modelText, data, params, optimizer, error);
  if (!error.empty())
    everyone->abortAll(error);

  SmallVector<bool> counted(mine.countsInNorm.begin(), mine.countsInNorm.end());
  auto program = std::make_unique<zb::PipelineRankProgram>(
      data, params, *entry, *everyone, comms->cuda(),
      /*recordActions=*/!opts.eval);
  zb::TrainingContext run{*comm, *everyone, opts.replicas, comms->replica(),
                          data,  params,    counted,       optimizer};
  // The compiled update, on the device with --backend nccl.
  std::unique_ptr<zb::ParamUpdate> update;
  if (opts.usesCompiledUpdate()) {
    llvm::Expected<zbrt::EntryFn> squares =
        object->entryPoint(zb::optimizer::gradSquaresFunction(rank));
    if (!squares)
      comm->abort(llvm::toString(squares.takeError()));
    llvm::Expected<zbrt::EntryFn> updateEntry =
        object->entryPoint(zb::optimizer::updateFunction(rank));
    if (!updateEntry)
      comm->abort(llvm::toString(updateEntry.takeError()));
    program->computeGradSquares(*squares);
    update = zb::makeCompiledUpdate(*updateEntry, data, params, counted,
                                    optimizer, program->rankBuffers(), error);
    if (!update)
      comm->abort("the compiled optimizer update: " + error);
    run.update = update.get();
  }
  zb::TrainingResult result;
  if (!zb::train(*program, run, trainingOptions(model, firstStep), result,
                 error))
    everyone->abortAll(error);
  // On the GPU the gradients stayed on the device: the last step's.
  if (comms->cuda() && !opts.dumpGradsPath.empty())
    result.lastGrads = zb::namedArrays(params, program->gradsFromDevice());

  const zb::StageTable &stageTable = lowered->stageTable();
  zb::schedule::Problem layout = opts.scheduleLayout();
  if (opts.replicas > 1)
    layout.stageCostReduce = zb::run::measureReductions(
        *everyone, opts.ranks, opts.replicas, rank, stageTable);
  int code = 0;
  zb::RunMetrics metrics;
  metrics.losses = result.losses;
  metrics.f64Losses = zb::lossDType(signature) == zbrt::DType::F64;
  // --eval runs forwards alone: no schedule to measure against.
  std::optional<zb::run::RunMeasurement> measured;
  if (worldRank == 0 && !opts.eval) {
    measured = zb::run::measure(program->measuredSteps(), stageTable, layout,
                                opts.schedule);
    code = reportMeasurement(*measured);
    metrics.microbatchesPerSecond = stepRates(result);
    metrics.checks = result.checks;
    metrics.firstStep = firstStep;
    metrics.measured = &*measured;
  }
  if (worldRank == 0 && !writeMetrics(model, std::move(metrics)))
    code = 1;
  // Over every replica: the copies of a parameter (and of its gradient)
  // must be bitwise equal.
  if (!opts.dumpGradsPath.empty() &&
      !gatherArchive(*everyone, opts.dumpGradsPath, result.lastGrads,
                     result.losses.back()))
    code = 1;
  // The running statistics from the ranks that update them, replica 0's
  // (each replica's follow its own data; DDP keeps rank 0's too).
  if (!opts.dumpParamsPath.empty()) {
    zbrt::NpzArchive mine = data.paramArchive(params);
    if (comms->replica() == 0)
      for (auto &[name, value] : data.updatedStats())
        mine.try_emplace(name, std::move(value));
    if (!gatherArchive(*everyone, opts.dumpParamsPath, mine, std::nullopt,
                       data.runningStats()))
      code = 1;
  }
  everyone->barrier();
  update.reset();
  program.reset();
  comms.reset();
  return code;
}

/// Reports an error of the flags or of the launch, which every process of
/// an outside launcher's job meets alike, once: there through rank 0 of
/// the job's MPI world. Returns the exit code.
static int failOnce(const std::string &message, int *argc, char ***argv) {
  if (zbrt::launchedWorldSize() > 1 && !opts.compileOnly) {
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

  if (std::string problem = opts.check(); !problem.empty())
    return failOnce(problem, &argc, &argv);
  if (momentum.getNumOccurrences() && opts.optimizer != "sgd-momentum")
    return failOnce("--momentum sets the momentum of --optimizer "
                    "sgd-momentum, not of " +
                        opts.optimizer,
                    &argc, &argv);
  if (!opts.compileOnly)
    if (std::string problem = opts.checkOutputs(); !problem.empty())
      return failOnce(problem, &argc, &argv);
  if (std::string problem = zbrt::sgemmChoiceProblem(); !problem.empty())
    return failOnce(problem, &argc, &argv);
  // Read here for every run, so that a bad value is one message before the
  // ranks start (a single process would not read it at all).
  {
    double seconds;
    std::string problem;
    if (!zbrt::readTimeoutFromEnv(seconds, problem))
      return failOnce(problem, &argc, &argv);
  }
  // The same command with --resume added continues a run: the checkpoint's
  // parameters are the ones it continues from.
  if (!opts.resumeDir.empty() && !opts.paramsPath.empty() &&
      !zbrt::isMPIWorker())
    llvm::errs() << "zb-run: note: --resume continues from the checkpoint's "
                    "parameters; --params is not read\n";
  if (std::string note = zbrt::avoidFaultyOpenBLASThreads();
      !note.empty() && !zbrt::isMPIWorker())
    llvm::errs() << "zb-run: note: " << note << "\n";
  if (std::string problem = zbrt::lendingProblem(); !problem.empty())
    return failOnce(problem, &argc, &argv);
  // Code for a CPU with instructions this one lacks compiles, but would
  // stop at the first of them.
  std::string cpu = opts.compileSettings("").target.cpu;
  if (std::string problem = zb::unknownTargetCPU(cpu); !problem.empty())
    return failOnce(
        (opts.targetCPU.empty() ? "ZB_TARGET_CPU: " : "--target-cpu: ") +
            problem,
        &argc, &argv);
  if (!opts.compileOnly)
    if (std::string problem = zb::hostCannotRun(cpu); !problem.empty())
      return failOnce(problem, &argc, &argv);
  // Started by an outside launcher (mpirun, srun): run as its rank, with
  // as many ranks as the flags ask for.
  if (std::string mismatch = opts.launchMismatch(zbrt::launchedWorldSize());
      !mismatch.empty())
    return failOnce(mismatch, &argc, &argv);

  // Parse and check the model.
  DialectRegistry registry;
  zb::ModelFile::registerDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // A diagnostic names its place in the user's model; the op's dump after
  // a pass would bury it.
  context.printOpOnDiagnostic(false);
  std::string error;
  std::unique_ptr<zb::ModelFile> model =
      zb::ModelFile::open(opts.modelPath, context, error);
  if (!model)
    return error.empty() ? 1 : fail(error);
  // The model, and the headers of the files it reads, are checked before
  // the ranks start and before anything compiles, so that a bad one is
  // reported once and at once.
  if (!opts.compileOnly) {
    std::string unknown;
    if (std::string problem = zb::ModelData::checkFiles(model->signature(),
                                                        opts.data(0), &unknown);
        !problem.empty())
      return failOnce(problem, &argc, &argv);
    if (!unknown.empty() && !zbrt::isMPIWorker())
      llvm::errs() << "zb-run: warning: " << unknown << "\n";
  }
  if (opts.worldSize() > 1 && !zbrt::isMPIWorker()) {
    // Each rank reads the model again: a stream would be empty there.
    if (opts.modelPath == "-" || opts.modelPath == "/dev/stdin")
      return fail("--np or --dp above 1 runs a process per rank, each "
                  "reading the model: give it as a file, not standard input");
    // Every stage holds an op, as the partition requires: refused before
    // the ranks start.
    int64_t ops = zb::cuttableOps(model->signature().func);
    if (opts.ranks * opts.chunksForSchedule() > ops)
      return fail(
          "--np " + std::to_string(opts.ranks) + " with " +
          std::to_string(opts.chunksForSchedule()) + " chunks per rank needs " +
          std::to_string(opts.ranks * opts.chunksForSchedule()) +
          " stages, but the model has " + std::to_string(ops) + " ops to cut");
  }
  if (opts.worldSize() > 1 && !opts.compileOnly && !zbrt::isMPIWorker()) {
    int rc = zbrt::relaunchUnderMPI(static_cast<int>(opts.worldSize()), argc,
                                    argv, error);
    if (rc < 0)
      return fail(error);
    return rc;
  }
  if (opts.pipelined() || opts.gpu())
    return runPipelineRank(context, *model, argv[0], &argc, &argv);
  return runSingleProcess(*model, argv[0]);
}
