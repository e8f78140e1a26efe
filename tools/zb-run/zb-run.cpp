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
// without an update. --dp D runs D such pipelines side by side (P * D
// processes), averaging each stage's gradients over them. Each update is
// post-validated (checkedUpdate: clipping, skipped non-finite steps); a
// pipelined run reports its measured bubble rate and stash memory (Measure.h).
//
//===----------------------------------------------------------------------===//

#include "zb/Autodiff/GradientOpInterface.h"
#include "zb/Conversion/Passes.h"
#include "zb/Dialect/Pipe/PipeOps.h"
#include "zb/Driver/Compile.h"
#include "zb/Model/Model.h"
#include "zb/Pipelines/Pipelines.h"
#include "zb/Schedule/Generators.h"
#include "zb/Target/CPUCompiler.h"
#include "zb/Transforms/Passes.h"

#include "Measure.h"

#include "zb/Dialect/ZB/ZBDialect.h"
#include "zbrt/CUDA.h"
#include "zbrt/Checkpoint.h"
#include "zbrt/Comm.h"
#include "zbrt/Executable.h"
#include "zbrt/Init.h"
#include "zbrt/Launch.h"
#include "zbrt/Npz.h"
#include "zbrt/Optimizer.h"
#include "zbrt/Trace.h"
#include "zbrt/zbrt.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
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
    cl::desc("Pipeline ranks P (default 1). Training or --grads with P > 1 "
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

static zbrt::DType dtypeOf(Type type) {
  if (type.isF64())
    return zbrt::DType::F64;
  if (type.isInteger(32))
    return zbrt::DType::I32;
  if (type.isInteger(64))
    return zbrt::DType::I64;
  return zbrt::DType::F32;
}

static bool isFloat(zbrt::DType d) {
  return d == zbrt::DType::F32 || d == zbrt::DType::F64;
}

/// Converts `array` in place to `dtype` (float to float, int to int).
static bool convert(zbrt::NpyArray &array, zbrt::DType dtype) {
  if (array.dtype == dtype)
    return true;
  if (isFloat(array.dtype) != isFloat(dtype))
    return false;
  int64_t n = array.numElements();
  std::vector<char> out(n * zbrt::dtypeSize(dtype));
  auto load = [&](int64_t i) -> double {
    switch (array.dtype) {
    case zbrt::DType::F32:
      return array.as<float>()[i];
    case zbrt::DType::F64:
      return array.as<double>()[i];
    case zbrt::DType::I32:
      return array.as<int32_t>()[i];
    case zbrt::DType::I64:
      return static_cast<double>(array.as<int64_t>()[i]);
    }
    return 0;
  };
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
    case zbrt::DType::F32:
      reinterpret_cast<float *>(out.data())[i] = static_cast<float>(load(i));
      break;
    case zbrt::DType::F64:
      reinterpret_cast<double *>(out.data())[i] = load(i);
      break;
    case zbrt::DType::I32:
      reinterpret_cast<int32_t *>(out.data())[i] =
          static_cast<int32_t>(load(i));
      break;
    case zbrt::DType::I64:
      reinterpret_cast<int64_t *>(out.data())[i] =
          static_cast<int64_t>(array.dtype == zbrt::DType::I64
                                   ? array.as<int64_t>()[i]
                                   : array.as<int32_t>()[i]);
      break;
    }
  }
  array.data = std::move(out);
  array.dtype = dtype;
  return true;
}

static std::string shapeString(ArrayRef<int64_t> shape) {
  zbrt::NpyArray a;
  a.shape.assign(shape.begin(), shape.end());
  return a.shapeString();
}

static double loadScalar(const zbrt::NpyArray &array, int64_t i) {
  return array.dtype == zbrt::DType::F64 ? array.as<double>()[i]
                                         : array.as<float>()[i];
}

static void storeScalar(zbrt::NpyArray &array, int64_t i, double v) {
  if (array.dtype == zbrt::DType::F64)
    array.as<double>()[i] = v;
  else
    array.as<float>()[i] = static_cast<float>(v);
}

/// A model's parameters and data, and the compiled functions that run it.
class Runner {
public:
  Runner(const zb::ModelSignature &signature, zbrt::DType lossType)
      : signature(signature), lossType(lossType),
        values(signature.args.size()), data(signature.args.size()) {}

  void setEntries(zbrt::EntryFn fwd, zbrt::EntryFn grad) {
    forward = fwd;
    gradient = grad;
  }

  /// Loads or initialises the parameters and loads the data (synthetic data
  /// is made per step and microbatch). Returns an error message, empty on
  /// success.
  std::string prepare();

  /// The loss of microbatch `mb` of step `step`; with `grads`, also
  /// accumulates the microbatch's parameter gradients into `grads` (one per
  /// param, signature order).
  double run(int64_t step, int64_t mb, std::vector<zbrt::NpyArray> *grads);

  /// The data argument `arg` of step `step`: all microbatches, [M][shape].
  zbrt::NpyArray stepData(const zb::ModelArg &arg, int64_t step);

  /// All arguments in signature order (data ones hold the last microbatch).
  std::vector<zbrt::NpyArray> &arguments() { return values; }

private:
  void bindData(int64_t step, int64_t mb);

  const zb::ModelSignature &signature;
  zbrt::EntryFn forward = nullptr, gradient = nullptr;
  zbrt::DType lossType;
  std::vector<zbrt::NpyArray> values;
  /// Per data argument from --inputs: [M][shape] or [K][M][shape].
  std::vector<zbrt::NpyArray> data;
};

std::string Runner::prepare() {
  std::string error;
  zbrt::NpzArchive params, inputs;
  if (!paramsPath.empty() && !zbrt::readNpz(paramsPath, params, error))
    return error;
  if (!inputsPath.empty() && !zbrt::readNpz(inputsPath, inputs, error))
    return error;
  for (const zb::ModelArg &arg : signature.args) {
    zbrt::NpyArray &value = values[arg.position];
    zbrt::DType dtype = dtypeOf(arg.type.getElementType());
    value.dtype = dtype;
    std::vector<int64_t> shape = arg.shape();
    value.shape = shape;
    value.data.assign(value.numElements() * zbrt::dtypeSize(dtype), 0);
    if (arg.isParam()) {
      if (paramsPath.empty()) {
        zbrt::initParam(value, arg.name, seed);
        continue;
      }
      auto it = params.find(arg.name);
      if (it == params.end())
        return "parameter '" + arg.name + "' is missing from '" + paramsPath +
               "'";
      value = it->second;
      if (value.shape != shape)
        return "parameter '" + arg.name + "' in '" + paramsPath +
               "' has shape " + value.shapeString() +
               ", but the model expects " + shapeString(shape);
      if (!convert(value, dtype))
        return "parameter '" + arg.name + "' in '" + paramsPath +
               "' has dtype " + zbrt::dtypeDescr(value.dtype) +
               ", which cannot be converted to the model's " +
               zbrt::dtypeDescr(dtype);
      continue;
    }
    if (inputsPath.empty())
      continue;
    auto it = inputs.find(arg.name);
    if (it == inputs.end())
      return "data array '" + arg.name + "' is missing from '" + inputsPath +
             "'";
    zbrt::NpyArray &all = data[arg.position];
    all = std::move(it->second);
    std::vector<int64_t> perStep = shape;
    perStep.insert(perStep.begin(), microbatches * numReplicas);
    std::vector<int64_t> allSteps = perStep;
    allSteps.insert(allSteps.begin(), numSteps);
    if (all.shape != perStep && all.shape != allSteps)
      return "data array '" + arg.name + "' in '" + inputsPath +
             "' has shape " + all.shapeString() + ", but " +
             std::to_string(microbatches * numReplicas) +
             " microbatches of the model's argument need " +
             shapeString(perStep) + " (or " + shapeString(allSteps) + " for " +
             std::to_string(numSteps) + " steps)";
    if (!convert(all, dtype))
      return "data array '" + arg.name + "' in '" + inputsPath +
             "' has dtype " + zbrt::dtypeDescr(all.dtype) +
             ", which cannot be converted to the model's " +
             zbrt::dtypeDescr(dtype);
  }
  return "";
}

/// This process's replica (--dp), and the number of microbatch `mb` of
/// step `step` among all the run's microbatches: replica r runs microbatches
/// r*M .. r*M+M-1 of the step's D*M.
static int64_t replicaIndex = 0;
static int64_t globalMicrobatch(int64_t step, int64_t mb) {
  return (step * numReplicas + replicaIndex) * microbatches + mb;
}

zbrt::NpyArray Runner::stepData(const zb::ModelArg &arg, int64_t step) {
  zbrt::NpyArray out;
  out.dtype = dtypeOf(arg.type.getElementType());
  out.shape = arg.shape();
  out.shape.insert(out.shape.begin(), microbatches);
  size_t bytes = out.numElements() * zbrt::dtypeSize(out.dtype);
  if (inputsPath.empty()) {
    out.data.resize(bytes);
    size_t mbBytes = bytes / microbatches;
    zbrt::NpyArray one{out.dtype, arg.shape(), {}};
    for (int64_t mb = 0; mb < microbatches; ++mb) {
      zbrt::synthesizeData(one, arg.name, seed, globalMicrobatch(step, mb),
                           arg.range);
      std::copy(one.data.begin(), one.data.end(),
                out.data.begin() + mb * mbBytes);
    }
    return out;
  }
  const zbrt::NpyArray &all = data[arg.position];
  size_t perStep = bytes * numReplicas;
  size_t offset =
      (all.data.size() > perStep ? step * perStep : 0) + replicaIndex * bytes;
  out.data.assign(all.data.begin() + offset,
                  all.data.begin() + offset + bytes);
  return out;
}

void Runner::bindData(int64_t step, int64_t mb) {
  for (const zb::ModelArg &arg : signature.args) {
    if (arg.isParam())
      continue;
    zbrt::NpyArray &value = values[arg.position];
    size_t bytes = value.numElements() * zbrt::dtypeSize(value.dtype);
    if (inputsPath.empty()) {
      zbrt::synthesizeData(value, arg.name, seed, globalMicrobatch(step, mb),
                           arg.range);
      continue;
    }
    const zbrt::NpyArray &all = data[arg.position];
    size_t offset = (all.data.size() > bytes * microbatches
                         ? step * microbatches + mb
                         : mb) *
                    bytes;
    value.data.assign(all.data.begin() + offset,
                      all.data.begin() + offset + bytes);
  }
}

double Runner::run(int64_t step, int64_t mb,
                   std::vector<zbrt::NpyArray> *grads) {
  bindData(step, mb);
  std::vector<zbrt::NpyArray *> callArgs;
  for (zbrt::NpyArray &value : values)
    callArgs.push_back(&value);
  zbrt::NpyArray loss{lossType, {}, std::vector<char>(zbrt::dtypeSize(lossType))};
  callArgs.push_back(&loss);
  if (!grads) {
    zbrt::callEntry(forward, callArgs);
    return loadScalar(loss, 0);
  }
  std::vector<zbrt::NpyArray> out;
  for (const zb::ModelArg &arg : signature.args)
    if (arg.isParam())
      out.push_back(zbrt::NpyArray{
          values[arg.position].dtype, arg.shape(),
          std::vector<char>(values[arg.position].data.size())});
  for (zbrt::NpyArray &g : out)
    callArgs.push_back(&g);
  zbrt::callEntry(gradient, callArgs);
  if (grads->empty())
    *grads = std::move(out);
  else
    for (size_t i = 0; i < out.size(); ++i)
      for (int64_t j = 0, e = out[i].numElements(); j < e; ++j)
        storeScalar((*grads)[i], j,
                    loadScalar((*grads)[i], j) + loadScalar(out[i], j));
  return loadScalar(loss, 0);
}

/// Compares a sample of `grads` (means over the microbatches) with central
/// finite differences of the mean loss. Returns the exit code.
static int checkGradients(Runner &runner, const zb::ModelSignature &signature,
                          const std::vector<zbrt::NpyArray> &grads) {
  auto meanLoss = [&] {
    double sum = 0;
    for (int64_t mb = 0; mb < microbatches; ++mb)
      sum += runner.run(0, mb, nullptr);
    return sum / microbatches;
  };
  double worst = 0, tol = gradTol;
  std::string worstAt;
  double worstAnalytic = 0, worstNumeric = 0;
  size_t g = 0;
  for (const zb::ModelArg &arg : signature.args) {
    if (!arg.isParam())
      continue;
    zbrt::NpyArray &param = runner.arguments()[arg.position];
    const zbrt::NpyArray &grad = grads[g++];
    bool isF64 = param.dtype == zbrt::DType::F64;
    if (tol <= 0)
      tol = isF64 ? 1e-6 : 2e-2;
    double gradScale = 0;
    for (int64_t i = 0, e = grad.numElements(); i < e; ++i)
      gradScale = std::max(gradScale, std::fabs(loadScalar(grad, i)));
    int64_t n = param.numElements();
    int64_t samples = std::min<int64_t>(n, std::max(1, gradSamples.getValue()));
    for (int64_t s = 0; s < samples; ++s) {
      // Spread the sampled entries over the tensor, deterministically.
      int64_t i = (s * n) / samples + (seed + s * 7919) % std::max<int64_t>(
                                          1, n / samples);
      double x = loadScalar(param, i);
      double eps = (isF64 ? 1e-6 : 2e-3) * std::max(1.0, std::fabs(x));
      storeScalar(param, i, x + eps);
      double up = meanLoss();
      storeScalar(param, i, x - eps);
      double down = meanLoss();
      storeScalar(param, i, x);
      double numeric = (up - down) / (2 * eps);
      double analytic = loadScalar(grad, i);
      // Relative to the gradient's scale and to the rounding noise of the
      // difference quotient (about 100 ulp of the loss over 2·eps), so that
      // entries near zero do not dominate through noise.
      double ulp = isF64 ? 2.2e-16 : 1.2e-7;
      double noise = 100 * ulp * std::max(1.0, std::fabs(up)) / (2 * eps);
      double denom = std::max({std::fabs(numeric), std::fabs(analytic),
                               1e-3 * gradScale, noise, 1e-12});
      double err = std::fabs(numeric - analytic) / denom;
      if (err >= worst) {
        worst = err;
        worstAt = arg.name + "[" + std::to_string(i) + "]";
        worstAnalytic = analytic;
        worstNumeric = numeric;
      }
    }
  }
  llvm::outs() << "zb-run: check-grad: worst relative error "
               << llvm::format("%.3e", worst) << " at " << worstAt
               << " (analytic " << llvm::format("%.9g", worstAnalytic)
               << ", finite difference " << llvm::format("%.9g", worstNumeric)
               << "), tolerance " << llvm::format("%.1e", tol) << "\n";
  if (worst > tol)
    return fail("check-grad: gradient error " +
                llvm::formatv("{0:e}", worst).str() + " above tolerance");
  return 0;
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

/// Writes `values` as a JSON list; a value that is not finite (the loss or
/// norm of a skipped step) is null: JSON has no NaN.
static void writeJsonNumbers(llvm::raw_ostream &os, ArrayRef<double> values) {
  os << "[";
  for (size_t i = 0; i < values.size(); ++i) {
    os << (i ? ", " : "");
    if (std::isfinite(values[i]))
      os << llvm::format("%.9g", values[i]);
    else
      os << "null";
  }
  os << "]";
}

/// What the global check of a step's gradients found.
struct StepCheck {
  double norm = 0.0;
  bool clipped = false;
  bool skipped = false;
};

/// The metrics of the gradient checks: with --clip-grad-norm or after a
/// skipped step, the global norm per step ("grad_norm", null when not
/// finite), the clipped and the skipped steps (1-based).
static std::string checksJson(ArrayRef<StepCheck> checks, int64_t firstStep) {
  bool any = clipGradNorm > 0 ||
             llvm::any_of(checks, [](const StepCheck &c) { return c.skipped; });
  if (!any)
    return "";
  std::string json;
  llvm::raw_string_ostream os(json);
  os << ", \"grad_norm\": ";
  writeJsonNumbers(os, llvm::to_vector(llvm::map_range(
                           checks, [](const StepCheck &c) { return c.norm; })));
  auto steps = [&](auto pick) {
    os << "[";
    bool first = true;
    for (size_t i = 0; i < checks.size(); ++i)
      if (pick(checks[i])) {
        os << (first ? "" : ", ") << firstStep + int64_t(i) + 1;
        first = false;
      }
    os << "]";
  };
  os << ", \"clipped_steps\": ";
  steps([](const StepCheck &c) { return c.clipped; });
  os << ", \"skipped_steps\": ";
  steps([](const StepCheck &c) { return c.skipped; });
  return json;
}

/// The summary of --eval and --grads.
static void printMeanLoss(StringRef fnName, double loss) {
  llvm::outs() << "zb-run: " << fnName << ": " << microbatches << " microbatch"
               << (microbatches == 1 ? "" : "es") << ", mean loss "
               << llvm::format("%.6f", loss) << "\n";
}

static bool writeMetrics(const std::vector<double> &losses,
                         const std::vector<double> &rates,
                         const std::vector<double> *microbatchLosses,
                         const std::string &extra = "") {
  if (metricsPath.empty())
    return true;
  std::string json;
  llvm::raw_string_ostream os(json);
  auto list = [&](ArrayRef<double> values) { writeJsonNumbers(os, values); };
  os << "{\"loss\": ";
  list(losses);
  if (!rates.empty()) {
    os << ", \"microbatches_per_s\": ";
    list(rates);
    std::vector<double> samples;
    for (double r : rates)
      samples.push_back(r * samplesPerMicrobatch);
    os << ", \"samples_per_s\": ";
    list(samples);
  }
  if (microbatchLosses) {
    os << ", \"microbatch_loss\": ";
    list(*microbatchLosses);
  }
  os << extra;
  bool pipelined = numRanks > 1 || numReplicas > 1;
  os << ", \"ranks\": " << numRanks << ", \"replicas\": " << numReplicas
     << ", \"schedule\": \""
     << (pipelined ? scheduleName.getValue() : std::string("none")) << "\"}\n";
  std::string error;
  if (!zbrt::writeFileAtomically(metricsPath, json, error))
    return fail(error), false;
  return true;
}

/// What a checkpoint belongs to: the model and the optimizer.
static std::string checkpointConfig(const std::string &modelText) {
  std::string hash = llvm::toHex(llvm::SHA256::hash(ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(modelText.data()), modelText.size())));
  return "model-sha256=" + hash.substr(0, 32) + ";optimizer=" +
         optimizerName.getValue();
}

/// Reads and checks the state --resume names, before anything is written.
/// Returns an error message, empty on success (or without --resume).
static std::string readResumeState(const std::string &modelText,
                                   const zb::ModelSignature &signature,
                                   zbrt::Checkpoint &checkpoint) {
  if (resumeDir.empty())
    return "";
  std::string error;
  if (!zbrt::readCheckpoint(resumeDir, checkpoint, error))
    return "cannot resume: " + error;
  std::string prefix = "cannot resume from '" + resumeDir + "': ";
  if (checkpoint.config != checkpointConfig(modelText))
    return prefix + "it was written for another model or optimizer (" +
           checkpoint.config + "; this run: " + checkpointConfig(modelText) +
           ")";
  if (checkpoint.step >= numSteps)
    return prefix + "it is at step " + std::to_string(checkpoint.step) +
           ", and --steps " + std::to_string(numSteps) +
           " (the total) leaves nothing to run";
  for (const zb::ModelArg &arg : signature.args) {
    if (!arg.isParam())
      continue;
    auto it = checkpoint.params.find(arg.name);
    if (it == checkpoint.params.end())
      return prefix + "parameter '" + arg.name + "' is missing";
    if (it->second.shape != arg.shape())
      return prefix + "parameter '" + arg.name + "' has shape " +
             it->second.shapeString() + ", but the model expects " +
             shapeString(arg.shape());
    if (!convert(it->second, dtypeOf(arg.type.getElementType())))
      return prefix + "parameter '" + arg.name + "' has dtype " +
             zbrt::dtypeDescr(it->second.dtype);
  }
  return "";
}

/// Continues from `checkpoint`: the parameters named in `params` take its
/// values and `optimizer` its state for them.
static std::string resumeFrom(const zbrt::Checkpoint &checkpoint,
                              zbrt::NpzArchive &params,
                              zbrt::Optimizer &optimizer) {
  for (auto &[name, value] : params)
    value = checkpoint.params.at(name);
  std::string error;
  if (!optimizer.importState(checkpoint.optimizer, error, &params))
    return "cannot resume from '" + resumeDir + "': " + error;
  return "";
}

/// This process's parameters `params`, keyed by name.
static zbrt::NpzArchive paramArchive(Runner &runner,
                                     ArrayRef<const zb::ModelArg *> params) {
  zbrt::NpzArchive archive;
  for (const zb::ModelArg *arg : params)
    archive[arg->name] = runner.arguments()[arg->position];
  return archive;
}

/// `grads[i]`, the gradient of `params[i]`, keyed by the parameter's name.
static zbrt::NpzArchive namedGrads(ArrayRef<const zb::ModelArg *> params,
                                   ArrayRef<zbrt::NpyArray> grads) {
  zbrt::NpzArchive archive;
  for (size_t i = 0; i < params.size(); ++i)
    archive[params[i]->name] = grads[i];
  return archive;
}

/// One optimizer update of this process's parameters `params`.
static bool updateParams(Runner &runner, ArrayRef<const zb::ModelArg *> params,
                         const zbrt::NpzArchive &grads,
                         zbrt::Optimizer &optimizer, std::string &error) {
  zbrt::NpzArchive values = paramArchive(runner, params);
  if (!optimizer.apply(values, grads, error))
    return false;
  for (const zb::ModelArg *arg : params)
    runner.arguments()[arg->position] = values[arg->name];
  return true;
}

/// --resume: checks the state it names, then gives `params` (this
/// process's parameters) its values and `optimizer` its state for them.
/// Returns the first step to run (0 without --resume); on failure sets
/// `error`.
static int64_t resumeTraining(const std::string &modelText,
                              const zb::ModelSignature &signature,
                              Runner &runner,
                              ArrayRef<const zb::ModelArg *> params,
                              zbrt::Optimizer &optimizer, std::string &error) {
  if (resumeDir.empty())
    return 0;
  zbrt::Checkpoint checkpoint;
  error = readResumeState(modelText, signature, checkpoint);
  zbrt::NpzArchive values = paramArchive(runner, params);
  if (error.empty())
    error = resumeFrom(checkpoint, values, optimizer);
  if (!error.empty())
    return 0;
  for (const zb::ModelArg *arg : params)
    runner.arguments()[arg->position] = values[arg->name];
  return checkpoint.step;
}

/// Whether a checkpoint is due after step `step` (0-based).
static bool checkpointDue(int64_t step) {
  if (checkpointDir.empty())
    return false;
  return step + 1 == numSteps ||
         (checkpointEvery > 0 && (step + 1) % checkpointEvery == 0);
}

/// The optimizer step, post-validated as in the zero-bubble paper (§4):
/// the rank's partial squared norm and count of non-finite values (a
/// shared parameter counted on its first holder only, `counted`) start
/// gathering over every rank (`comm`; none: one process) while the rank
/// updates optimistically. When the gathered sums (added in rank order:
/// the same bits everywhere) say that a gradient somewhere is not finite,
/// the update is rolled back (parameters and optimizer state) and the step
/// skipped; when the norm exceeds --clip-grad-norm, it is rolled back and
/// redone with the gradients scaled by X / (norm + 1e-6). Every rank thus
/// decides alike, and no synchronisation precedes the update.
static bool checkedUpdate(zbrt::Comm *comm, Runner &runner,
                          ArrayRef<const zb::ModelArg *> params,
                          ArrayRef<bool> counted, zbrt::NpzArchive &grads,
                          zbrt::Optimizer &optimizer, StepCheck &check,
                          std::string &error) {
  double mine[2] = {0.0, 0.0};
  for (size_t i = 0; i < params.size(); ++i) {
    if (!counted[i])
      continue;
    const zbrt::NpyArray &g = grads[params[i]->name];
    for (int64_t j = 0, e = g.numElements(); j < e; ++j) {
      double v = loadScalar(g, j);
      if (std::isfinite(v))
        mine[0] += v * v;
      else
        mine[1] += 1;
    }
  }
  int ranks = comm ? comm->size() : 1;
  std::vector<double> all(2 * ranks);
  bool optimistic = comm && !syncGradCheck;
  if (comm)
    comm->startAllgather(mine, 2, all.data());
  else
    std::copy(mine, mine + 2, all.begin());
  if (comm && !optimistic)
    comm->waitAllgather();

  // The optimistic update, unless this rank already knows it is void.
  std::optional<zbrt::NpzArchive> before;
  std::optional<zbrt::Optimizer> saved;
  bool updated = false;
  if (optimistic && mine[1] == 0) {
    before = paramArchive(runner, params);
    saved = optimizer;
    if (!updateParams(runner, params, grads, optimizer, error))
      return false;
    updated = true;
  }
  if (optimistic)
    comm->waitAllgather();
  double squares = 0.0, nonFinite = 0.0;
  for (int r = 0; r < ranks; ++r) {
    squares += all[2 * r];
    nonFinite += all[2 * r + 1];
  }
  check.norm = nonFinite > 0 ? std::numeric_limits<double>::quiet_NaN()
                             : std::sqrt(squares);
  check.skipped = nonFinite > 0;
  double coef = clipGradNorm > 0 && !check.skipped
                    ? clipGradNorm / (check.norm + 1e-6)
                    : 1.0;
  check.clipped = coef < 1.0;
  if (!check.skipped && !check.clipped && updated)
    return true;
  // Roll back what the optimistic update did.
  if (updated) {
    for (const zb::ModelArg *arg : params)
      runner.arguments()[arg->position] = (*before)[arg->name];
    optimizer = *saved;
  }
  if (check.skipped)
    return true;
  if (check.clipped) {
    auto scale = static_cast<float>(coef);
    for (auto &entry : grads) {
      zbrt::NpyArray &g = entry.second;
      for (int64_t j = 0, e = g.numElements(); j < e; ++j)
        storeScalar(g, j,
                    g.dtype == zbrt::DType::F32
                        ? static_cast<double>(
                              static_cast<float>(loadScalar(g, j)) * scale)
                        : loadScalar(g, j) * coef);
    }
  }
  return updateParams(runner, params, grads, optimizer, error);
}

/// Reports a skipped step.
static void printSkipped(int64_t step) {
  llvm::outs() << "zb-run: step " << step + 1
               << ": a gradient is not finite; the step is skipped on every "
                  "rank\n";
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
  std::string errorMessage;
  std::unique_ptr<zbrt::SharedObject> object =
      zbrt::SharedObject::open(compiled->loadPath(), errorMessage);
  if (!object)
    return fail(errorMessage);
  func::FuncOp modelFn = signature.func;
  std::string fnName = modelFn.getSymName().str();
  zbrt::EntryFn forward =
      object->lookup(std::string(zb::kEntryPrefix) + fnName, errorMessage);
  if (!forward)
    return fail(errorMessage);
  zbrt::EntryFn gradient = nullptr;
  if (needGrads) {
    gradient = object->lookup(std::string(zb::kEntryPrefix) + fnName + "_grad",
                              errorMessage);
    if (!gradient)
      return fail(errorMessage);
  }
  auto lossType = dtypeOf(
      cast<RankedTensorType>(modelFn.getResultTypes()[0]).getElementType());
  Runner runner(signature, lossType);
  runner.setEntries(forward, gradient);
  std::string error = runner.prepare();
  if (!error.empty())
    return fail(error);

  bool training = !evalMode && !gradsMode;
  int64_t steps = training ? numSteps.getValue() : 1;
  zbrt::Optimizer optimizer = makeOptimizer();
  std::vector<const zb::ModelArg *> params;
  for (const zb::ModelArg &arg : signature.args)
    if (arg.isParam())
      params.push_back(&arg);
  int64_t firstStep =
      resumeTraining(modelText, signature, runner, params, optimizer, error);
  if (!error.empty())
    return fail(error);
  std::vector<double> stepLosses, rates, losses;
  std::vector<zbrt::NpyArray> grads;
  SmallVector<bool> counted(params.size(), true);
  std::vector<StepCheck> stepChecks;
  for (int64_t step = firstStep; step < steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    losses.clear();
    grads.clear();
    for (int64_t mb = 0; mb < microbatches; ++mb)
      losses.push_back(runner.run(step, mb, needGrads ? &grads : nullptr));
    double mean = 0;
    for (double l : losses)
      mean += l;
    mean /= losses.size();
    for (zbrt::NpyArray &g : grads)
      for (int64_t j = 0, e = g.numElements(); j < e; ++j)
        storeScalar(g, j, loadScalar(g, j) / microbatches);
    stepLosses.push_back(mean);
    if (training) {
      zbrt::NpzArchive named = namedGrads(params, grads);
      StepCheck check;
      if (!checkedUpdate(nullptr, runner, params, counted, named, optimizer,
                         check, error))
        return fail(error);
      if (check.skipped)
        printSkipped(step);
      stepChecks.push_back(check);
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      rates.push_back(microbatches / seconds);
      printStep(step, mean, seconds);
      if (checkpointDue(step)) {
        zbrt::Checkpoint checkpoint{step + 1, checkpointConfig(modelText),
                                    paramArchive(runner, params),
                                    optimizer.exportState()};
        if (!zbrt::writeCheckpoint(checkpointDir, checkpoint, error))
          return fail(error);
      }
    }
  }

  if (!training)
    printMeanLoss(fnName, stepLosses.back());
  if (!writeMetrics(stepLosses, rates, training ? nullptr : &losses,
                    checksJson(stepChecks, firstStep)))
    return 1;
  if (!dumpGradsPath.empty()) {
    if (!writeArchive(dumpGradsPath, namedGrads(params, grads),
                      stepLosses.back()))
      return 1;
  }
  if (!dumpParamsPath.empty()) {
    if (!writeArchive(dumpParamsPath, paramArchive(runner, params),
                      std::nullopt))
      return 1;
  }
  if (checkGrad)
    return checkGradients(runner, signature, grads);
  return 0;
}

/// Rank 0 gets the union of every rank's `mine` in `merged`, passed through
/// the files `<scratch>.part<r>`; a name several ranks hold (a shared
/// parameter) must have bitwise-equal copies.
static void collectArchive(zbrt::Comm &comm, const std::string &scratch,
                           const zbrt::NpzArchive &mine,
                           zbrt::NpzArchive &merged) {
  std::string part = scratch + ".part" + std::to_string(comm.rank());
  std::string error;
  if (!zbrt::writeNpz(part, mine, error))
    comm.abort(error);
  comm.barrier();
  if (comm.rank() == 0) {
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
            (it->second.dtype != array.dtype ||
             it->second.shape != array.shape || it->second.data != array.data))
          comm.abort("the copies of '" + name + "' on rank " +
                     std::to_string(r) +
                     " and an earlier rank differ; the ranks that hold a "
                     "shared parameter must keep it equal");
      }
    }
  }
}

/// Rank 0 collects every rank's `archive` parts and writes them to `path`.
static bool gatherArchive(zbrt::Comm &comm, const std::string &path,
                          const zbrt::NpzArchive &mine,
                          std::optional<double> loss) {
  zbrt::NpzArchive merged;
  collectArchive(comm, path, mine, merged);
  bool ok = comm.rank() != 0 || writeArchive(path, merged, loss);
  comm.barrier();
  return ok;
}

/// The JSON fields of the measured figures, for the metrics file.
static std::string measurementJson(const zb::run::RunMeasurement &m) {
  std::string json;
  llvm::raw_string_ostream os(json);
  auto list = [&](const auto &values) {
    os << "[";
    for (size_t i = 0; i < values.size(); ++i)
      os << (i ? ", " : "") << llvm::formatv("{0}", values[i]);
    os << "]";
  };
  os << ", \"bubble_rate\": " << llvm::format("%.6f", m.bubble)
     << ", \"simulated_bubble_rate\": "
     << llvm::format("%.6f", m.simulatedBubble) << ", \"step_bubble_rate\": ";
  list(m.stepBubble);
  os << ", \"peak_stash_bytes\": ";
  list(m.peakStash);
  os << ", \"predicted_stash_bytes\": ";
  list(m.predictedStash);
  os << ", \"peak_memory_bytes\": ";
  list(m.peakMemory);
  os << ", \"microbatch_stash_bytes\": ";
  list(m.microbatchStash);
  os << ", \"microbatch_w_stash_bytes\": ";
  list(m.microbatchWStash);
  if (numReplicas > 1)
    os << ", \"reduction_wait_ms\": " << llvm::format("%.6f", m.reductionWait)
       << ", \"simulated_reduction_ms\": "
       << llvm::format("%.6f", m.simulatedReduction);
  return json;
}

/// With replicas: per stage, the milliseconds its gradient bucket takes to
/// average over the replicas with nothing else running (the reduction cost
/// the simulator takes), on `world`'s rank 0 (empty elsewhere). Each rank
/// times the mean of all its stages' parameters over its replicas, and a
/// stage takes its share of its rank's time by bytes.
static std::vector<double> measureReductions(zbrt::Comm &world, int rank,
                                             const zb::StageTable &table) {
  std::vector<double> rankBytes(numRanks, 0.0);
  for (size_t s = 0; s < table.ranks.size(); ++s)
    rankBytes[table.ranks[s]] += table.paramBytes[s];
  std::vector<float> scratch(
      static_cast<size_t>(rankBytes[rank] / sizeof(float)), 1.0f);
  std::vector<int> group;
  for (int r = 0; r < numReplicas; ++r)
    group.push_back(r * numRanks + rank);
  constexpr int kRepeats = 3;
  world.barrier();
  double start = zbrt::traceClock();
  for (int i = 0; i < kRepeats; ++i) {
    world.startGroupSum(scratch.data(), scratch.size(), group);
    world.waitGroupSums();
  }
  double seconds = (zbrt::traceClock() - start) / kRepeats;
  std::vector<std::string> all;
  world.gather(
      std::string(reinterpret_cast<const char *>(&seconds), sizeof(seconds)),
      all, 0);
  if (world.rank() != 0)
    return {};
  std::vector<double> perRank(numRanks, 0.0);
  for (size_t w = 0; w < all.size(); ++w) {
    double s = 0;
    if (all[w].size() == sizeof(s))
      std::memcpy(&s, all[w].data(), sizeof(s));
    perRank[w % numRanks] = std::max(perRank[w % numRanks], s);
  }
  std::vector<double> stageMs;
  for (size_t s = 0; s < table.ranks.size(); ++s) {
    int r = table.ranks[s];
    stageMs.push_back(rankBytes[r] > 0 ? perRank[r] * 1e3 *
                                             table.paramBytes[s] / rankBytes[r]
                                       : 0.0);
  }
  return stageMs;
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

/// One rank of a pipelined training run (under mpirun).
static int runPipelineRank(MLIRContext &context, ModuleOp module,
                           const zb::ModelSignature &signature,
                           const std::string &modelText, const char *argv0,
                           int *argc, char ***argv) {
  std::string error;
  // `world` holds every process; `comm` this process's pipeline (replica
  // r's ranks r*P .. r*P+P-1), which compiled code talks over. Without
  // replicas they are one communicator.
  std::unique_ptr<zbrt::Comm> world, replicaPipeline;
  int64_t worldSize = int64_t(numRanks) * numReplicas;
  if (worldSize > 1 && !compileOnly) {
    zbrt::initComm(argc, argv);
    world = zbrt::createMPIComm(error);
  } else {
    world = zbrt::createLocalComm();
  }
  if (!world)
    return fail(error);
  if (!compileOnly && world->size() != worldSize)
    world->abort("started with " + std::to_string(world->size()) +
                 " processes, but --np " + std::to_string(numRanks) +
                 (numReplicas > 1 ? " --dp " + std::to_string(numReplicas)
                                  : std::string()) +
                 " needs " + std::to_string(worldSize));
  replicaIndex = world->rank() / numRanks;
  if (numReplicas > 1) {
    replicaPipeline = world->split(static_cast<int>(replicaIndex),
                                   world->rank() % numRanks, error);
    if (!replicaPipeline)
      world->abort(error);
  }
  std::unique_ptr<zbrt::Comm> comm =
      numReplicas > 1 ? std::move(replicaPipeline) : std::move(world);
  // --backend nccl: the model runs on this rank's GPU; NCCL moves values.
  bool gpu = backendName == "nccl";
  const zbrt::CUDARuntime *cuda = nullptr;
  if (gpu && !compileOnly) {
    cuda = zbrt::loadCUDARuntime(error);
    if (!cuda ||
        !cuda->init(zbrt::selectCUDADevice(cuda->deviceCount()), error))
      comm->abort("--backend nccl: " + error);
    comm = cuda->createNCCLComm(std::move(comm), error);
    if (!comm)
      return fail("--backend nccl: " + error);
  }
  zbrt::Comm *everyone = numReplicas > 1 ? world.get() : comm.get();
  zbrt_set_comm(comm.get());
  zbrt_set_replicas(everyone, numReplicas);
  int rank = comm->rank();
  int worldRank = everyone->rank();

  // Every rank runs the (cheap) MLIR pipeline, then compiles its own part;
  // rank 0 alone reports the pipeline's warnings and remarks, which every
  // rank would repeat.
  std::optional<ScopedDiagnosticHandler> quiet;
  if (worldRank != 0)
    quiet.emplace(&context, [](Diagnostic &diag) {
      return success(diag.getSeverity() != DiagnosticSeverity::Error);
    });
  OwningOpRef<ModuleOp> lowered = module.clone();
  PassManager pm(&context);
  zb::ZBPipelineOptions options;
  options.stages = numRanks;
  options.microbatches = microbatches;
  options.schedule = scheduleName;
  options.chunks = numChunks;
  options.replicas = numReplicas;
  options.lowerToCPU = false;
  options.target = gpu ? "gpu" : "cpu";
  if (failed(zb::buildZBPipeline(pm, options, error)))
    comm->abort(error);
  const zb::schedule::ScheduleInfo *info =
      zb::schedule::lookupSchedule(scheduleName);
  int64_t chunks = info->chunksFor(numChunks);
  if (failed(pm.run(*lowered)))
    comm->abort("compiling the pipeline for '" + modelPath + "' failed");
  std::string stepName = "zb_rank" + std::to_string(rank) + "_step";
  auto step = lowered->lookupSymbol<func::FuncOp>(stepName);
  if (!step)
    comm->abort("the compiled program has no step function for rank " +
                std::to_string(rank));
  SmallVector<std::string> myParams;
  for (Attribute a :
       step->getAttrOfType<ArrayAttr>(zb::ZBDialect::kParamsAttrName))
    myParams.push_back(cast<StringAttr>(a).str());

  // Each rank compiles only its own step function and stage functions, all
  // ranks at once; --compile-only compiles every rank's in turn.
  std::string key = modelText + ";pipeline;np=" + std::to_string(numRanks) +
                    ";schedule=" + scheduleName.getValue() +
                    ";chunks=" + std::to_string(chunks) +
                    ";m=" + std::to_string(microbatches) +
                    ";dp=" + std::to_string(numReplicas) + (gpu ? ";gpu" : "");
  auto compileRank = [&](int r) -> std::unique_ptr<zb::CacheEntry> {
    OwningOpRef<ModuleOp> mine = lowered->clone();
    PassManager keepPm(&context);
    zb::ZBKeepRankOptions keep;
    keep.rank = r;
    keepPm.addPass(zb::createZBKeepRank(keep));
    if (failed(keepPm.run(*mine))) {
      fail("selecting rank " + std::to_string(r) + "'s program failed");
      return nullptr;
    }
    return compileCached(*mine, key + ";rank=" + std::to_string(r), argv0,
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
      object->lookup(std::string(zb::kEntryPrefix) + stepName, error);
  if (!entry)
    comm->abort(error);

  Runner runner(signature, zbrt::DType::F32);
  error = runner.prepare();
  if (!error.empty())
    comm->abort(error);
  // This rank's parameters, in the step function's order.
  std::vector<const zb::ModelArg *> params;
  for (const std::string &name : myParams)
    for (const zb::ModelArg &arg : signature.args)
      if (arg.isParam() && arg.name == name)
        params.push_back(&arg);

  zbrt::Optimizer optimizer = makeOptimizer();
  int64_t firstStep =
      resumeTraining(modelText, signature, runner, params, optimizer, error);
  if (!error.empty())
    comm->abort(error);

  zb::StageTable stageTable;
  if (!zb::readStageTable(*lowered, stageTable, error))
    comm->abort(error);
  std::vector<std::vector<zb::run::RankStep>> measuredSteps;
  std::vector<void *> devicePointers;
  double firstOrigin = 0;
  std::vector<double> stepLosses, rates;
  zbrt::NpzArchive lastGrads;
  double lastLoss = 0;
  // Each shared parameter's norm counts on its first holder only: the
  // lowest rank whose step function lists it.
  llvm::StringMap<int64_t> firstHolder;
  for (auto fn : lowered->getOps<func::FuncOp>()) {
    auto holder = fn->getAttrOfType<IntegerAttr>(zb::ZBDialect::kRankAttrName);
    auto names = fn->getAttrOfType<ArrayAttr>(zb::ZBDialect::kParamsAttrName);
    if (!holder || !names)
      continue;
    for (StringAttr name : names.getAsRange<StringAttr>()) {
      auto [it, inserted] = firstHolder.try_emplace(name, holder.getInt());
      if (!inserted)
        it->second = std::min(it->second, holder.getInt());
    }
  }
  SmallVector<bool> counted;
  for (const zb::ModelArg *arg : params)
    counted.push_back(firstHolder.lookup(arg->name) == rank);
  std::vector<StepCheck> stepChecks;
  // --grads: one step through the same per-rank programs, no update.
  bool training = !gradsMode;
  int64_t steps = training ? numSteps.getValue() : 1;
  for (int64_t s = firstStep; s < steps; ++s) {
    // Every rank starts the step together; its records are timed from this
    // barrier (and placed in the trace on the rank's own clock).
    everyone->barrier();
    auto start = std::chrono::steady_clock::now();
    double origin = zbrt::traceClock();
    if (s == firstStep)
      firstOrigin = origin;
    zbrt::takeActionRecords();
    zbrt::takeReductionWaitSeconds();
    zb::run::RankStep mine;
    mine.baseBytes = zbrt::liveBytes();
    zbrt::resetPeakLiveBytes();
    std::vector<zbrt::NpyArray> data;
    for (const zb::ModelArg &arg : signature.args)
      if (!arg.isParam())
        data.push_back(runner.stepData(arg, s));
    std::vector<zbrt::NpyArray *> callArgs;
    for (const zb::ModelArg *arg : params)
      callArgs.push_back(&runner.arguments()[arg->position]);
    for (zbrt::NpyArray &d : data)
      callArgs.push_back(&d);
    zbrt::NpyArray loss{zbrt::DType::F32, {}, std::vector<char>(4)};
    callArgs.push_back(&loss);
    std::vector<zbrt::NpyArray> grads;
    for (const zb::ModelArg *arg : params)
      grads.push_back(zbrt::NpyArray{
          runner.arguments()[arg->position].dtype, arg->shape(),
          std::vector<char>(runner.arguments()[arg->position].data.size())});
    for (zbrt::NpyArray &g : grads)
      callArgs.push_back(&g);
    if (gpu) {
      // Every argument through device memory: inputs and the zeroed outputs
      // (as on the CPU) copied up, the outputs (loss, gradients) back; the
      // optimizer stays on the host.
      if (devicePointers.empty())
        for (zbrt::NpyArray *array : callArgs) {
          devicePointers.push_back(cuda->alloc(array->data.size(), error));
          if (!devicePointers.back())
            comm->abort("--backend nccl: " + error);
        }
      size_t numInputs = params.size() + data.size();
      for (size_t i = 0; i < callArgs.size(); ++i)
        if (!cuda->copyToDevice(devicePointers[i], callArgs[i]->data.data(),
                                callArgs[i]->data.size(), error))
          comm->abort("--backend nccl: " + error);
      zbrt::callEntry(entry, callArgs, &devicePointers);
      zbrt_step_end();
      for (size_t i = numInputs; i < callArgs.size(); ++i)
        if (!cuda->copyToHost(callArgs[i]->data.data(), devicePointers[i],
                              callArgs[i]->data.size(), error))
          comm->abort("--backend nccl: " + error);
    } else {
      zbrt::callEntry(entry, callArgs);
      zbrt_step_end();
    }
    mine.actions = zbrt::takeActionRecords();
    for (zbrt::ActionRecord &a : mine.actions) {
      a.start -= origin;
      a.end -= origin;
    }
    mine.peakBytes = zbrt::peakLiveBytes();
    mine.reductionWait = zbrt::takeReductionWaitSeconds();
    // On this rank's own clock, so that its actions never overlap in the
    // trace: a rank leaving a later barrier a little late (descheduled)
    // must not shift that step's actions before the previous one's.
    mine.offset = origin - firstOrigin;
    std::vector<std::string> parts;
    everyone->gather(zb::run::serialize(mine), parts, 0);
    if (worldRank == 0) {
      std::vector<zb::run::RankStep> all(everyone->size());
      for (int r = 0; r < everyone->size(); ++r) {
        if (!zb::run::deserialize(parts[r], all[r]))
          comm->abort("rank " + std::to_string(r) +
                      " sent malformed action records");
      }
      measuredSteps.push_back(std::move(all));
    }

    // The mean of the replicas' losses (each the mean of its microbatches').
    double stepLoss = *loss.as<float>();
    everyone->allreduceSum(&stepLoss, 1);
    stepLoss /= numReplicas;
    zbrt::NpzArchive gradArchive = namedGrads(params, grads);
    if (training) {
      // The update works on a copy: --dump-grads writes the gradients as
      // the step computed them.
      zbrt::NpzArchive stepGrads = gradArchive;
      StepCheck check;
      if (!checkedUpdate(comm.get(), runner, params, counted, stepGrads,
                         optimizer, check, error))
        comm->abort(error);
      if (check.skipped && worldRank == 0)
        printSkipped(s);
      stepChecks.push_back(check);
    }
    lastGrads = std::move(gradArchive);
    lastLoss = stepLoss;
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    everyone->allreduceMax(&seconds, 1);
    stepLosses.push_back(stepLoss);
    rates.push_back(microbatches * numReplicas / seconds);
    if (worldRank == 0 && training)
      printStep(s, stepLoss, seconds);
    if (worldRank == 0 && !training)
      printMeanLoss(func::FuncOp(signature.func).getSymName(), stepLoss);
    // One checkpoint: the replicas hold the same state, replica 0 writes it.
    if (checkpointDue(s)) {
      zbrt::Checkpoint checkpoint{s + 1, checkpointConfig(modelText), {}, {}};
      if (std::error_code ec =
              llvm::sys::fs::create_directories(checkpointDir))
        comm->abort("cannot create checkpoint directory '" + checkpointDir +
                    "': " + ec.message());
      if (replicaIndex == 0) {
        collectArchive(*comm, checkpointDir + "/.params",
                       paramArchive(runner, params), checkpoint.params);
        collectArchive(*comm, checkpointDir + "/.optimizer",
                       optimizer.exportState(), checkpoint.optimizer);
      }
      int written = worldRank != 0 ||
                    zbrt::writeCheckpoint(checkpointDir, checkpoint, error);
      everyone->broadcast(&written, sizeof(written), 0);
      if (!written)
        comm->abort(error.empty() ? "writing the checkpoint failed" : error);
    }
  }

  std::vector<double> reduceMs;
  if (numReplicas > 1)
    reduceMs = measureReductions(*everyone, rank, stageTable);
  int code = 0;
  if (worldRank == 0) {
    zb::schedule::Problem layout;
    layout.numRanks = numRanks;
    layout.numChunks = chunks;
    layout.placement = info->defaultPlacement;
    layout.numMicrobatches = microbatches;
    layout.stageCostReduce = reduceMs;
    zb::run::RunMeasurement measured =
        zb::run::measure(measuredSteps, stageTable, layout, scheduleName);
    printMeasurement(measured);
    if (!writeMetrics(stepLosses, rates, nullptr,
                      measurementJson(measured) +
                          checksJson(stepChecks, firstStep)))
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
      !gatherArchive(*everyone, dumpGradsPath, lastGrads, lastLoss))
    code = 1;
  if (!dumpParamsPath.empty() &&
      !gatherArchive(*everyone, dumpParamsPath, paramArchive(runner, params),
                     std::nullopt))
    code = 1;
  everyone->barrier();
  for (void *pointer : devicePointers)
    cuda->free(pointer);
  zbrt_set_replicas(nullptr, 1);
  zbrt_set_comm(nullptr);
  comm.reset();
  world.reset();
  zbrt::finalizeComm();
  return code;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "zb-run: compile a ZeroBubble model and run or train it (CPU; GPU "
      "with --backend nccl)\n");

  bool training = !evalMode && !gradsMode;
  if (evalMode && gradsMode)
    return fail("pass at most one of --eval and --grads");
  if (checkGrad && !gradsMode)
    return fail("--check-grad needs --grads");
  if (microbatches < 1)
    return fail("--microbatches must be at least 1, got " +
                llvm::Twine(microbatches.getValue()));
  if (numSteps < 1)
    return fail("--steps must be at least 1, got " +
                llvm::Twine(numSteps.getValue()));
  if (numRanks < 1)
    return fail("--np must be at least 1, got " +
                llvm::Twine(numRanks.getValue()));
  if (numReplicas < 1)
    return fail("--dp must be at least 1, got " +
                llvm::Twine(numReplicas.getValue()));
  bool pipelined = numRanks > 1 || numReplicas > 1;
  int64_t worldSize = int64_t(numRanks) * numReplicas;
  if (numRanks > 1 && evalMode)
    return fail("--eval runs on one process; --np needs training or --grads");
  if (numReplicas > 1 && (evalMode || checkGrad))
    return fail("--dp needs training or --grads; --eval and --check-grad "
                "run on one process");
  if (numReplicas > 1 && backendName == "nccl")
    return fail("--dp with --backend nccl is not supported yet: the "
                "replicas' gradient means run on the MPI backend only");
  if (numRanks > 1 && checkGrad)
    return fail("--check-grad runs on one process (finite differences of "
                "the unpartitioned model); compare --grads --np P with "
                "--np 1 instead");
  if ((!tracePath.empty() || !profilePath.empty()) && worldSize < 2)
    return fail("--trace and --profile record a pipelined run: they need "
                "--np 2 or more (or --dp 2 or more)");
  if ((!checkpointDir.empty() || !resumeDir.empty()) && !training)
    return fail("--checkpoint and --resume are for training, not --eval or "
                "--grads");
  if (clipGradNorm < 0 || !std::isfinite(clipGradNorm))
    return fail("--clip-grad-norm must be a positive number, got " +
                llvm::formatv("{0}", clipGradNorm.getValue()).str());
  if (clipGradNorm > 0 && !training)
    return fail("--clip-grad-norm clips a training step's gradients; "
                "--eval and --grads take no step");
  if (checkpointEvery < 0)
    return fail("--checkpoint-every must be positive, got " +
                llvm::Twine(checkpointEvery.getValue()));
  if (checkpointEvery > 0 && checkpointDir.empty())
    return fail("--checkpoint-every needs --checkpoint DIR");
  if (optimizerName != "sgd" && optimizerName != "adamw")
    return fail("unknown --optimizer '" + optimizerName +
                "' (expected sgd or adamw)");
  if (backendName != "mpi" && backendName != "nccl")
    return fail("unknown --backend '" + backendName +
                "' (expected mpi or nccl)");
  if (backendName == "nccl" && !training)
    return fail("--backend nccl trains; --eval and --grads run on the CPU");
  if (pipelined && !zb::schedule::lookupSchedule(scheduleName))
    return fail("unknown --schedule '" + scheduleName + "'; known: " +
                zb::schedule::knownScheduleNames());

  // Started by an outside launcher (mpirun, srun): run as its rank, with
  // as many ranks as the flags ask for.
  if (int world = zbrt::launchedWorldSize();
      world > 1 && !compileOnly && world != worldSize) {
    std::string flags = "--np " + std::to_string(numRanks);
    if (numReplicas > 1)
      flags += " --dp " + std::to_string(numReplicas);
    return fail("started as one of " + llvm::Twine(world) +
                " processes by an MPI launcher, but " + flags + " needs " +
                llvm::Twine(worldSize) +
                "; pass --np P and --dp D with P * D = " + llvm::Twine(world) +
                " (or start one process and let zb-run launch them)");
  }
  if (worldSize > 1 && !compileOnly && !zbrt::isMPIWorker()) {
    std::string error;
    int rc =
        zbrt::relaunchUnderMPI(static_cast<int>(worldSize), argc, argv, error);
    if (rc < 0)
      return fail(error);
    return rc;
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
  if (pipelined || backendName == "nccl")
    return runPipelineRank(context, *module, *signature, modelText, argv[0],
                           &argc, &argv);
  return runSingleProcess(context, *module, *signature, modelText, argv[0]);
}
