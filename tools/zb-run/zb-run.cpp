//===- zb-run.cpp - Compile and run a model -------------------------------===//
//
// Part of ZeroBubble MLIR.
//
// zb-run MODEL.mlir (--eval | --grads) [--params P.npz] [--inputs I.npz]
//        [--seed S] [--microbatches M] [--metrics M.json]
//        [--dump-grads G.npz] [--check-grad] [--cache-dir DIR]
//
// Compiles the model for the CPU (caching the shared object by content
// hash), initialises parameters from the seed or loads them, makes
// synthetic data or loads it, and runs one step over M microbatches: the
// forward (--eval) or the forward and backward without an update (--grads),
// printing the mean loss; gradients are the mean over the microbatches.
//
//===----------------------------------------------------------------------===//

#include "zb/Autodiff/GradientOpInterface.h"
#include "zb/Model/Model.h"
#include "zb/Transforms/Passes.h"
#include "zb/Target/CPUCompiler.h"

#include "zbrt/Executable.h"
#include "zbrt/Init.h"
#include "zbrt/Npz.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
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
#include <cmath>
#include <cstring>
#include <optional>

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
    cl::desc("With --grads: write every parameter's gradient (mean over "
             "the microbatches) to this .npz, keyed by parameter name"),
    cl::value_desc("G.npz"), cl::cat(category));
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
static cl::opt<std::string> cacheDir(
    "cache-dir",
    cl::desc("Where compiled models are cached (default: $ZB_CACHE_DIR, "
             "else $XDG_CACHE_HOME/zerobubble, else ~/.cache/zerobubble)"),
    cl::cat(category));

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

/// A hash of this executable: a rebuilt compiler never reuses objects an
/// older one cached.
static std::string compilerIdentity(const char *argv0) {
  std::string self = llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&compilerIdentity));
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> binary =
      llvm::MemoryBuffer::getFile(self);
  if (!binary)
    return "unknown";
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(
      (*binary)->getBuffer())));
}

static std::string defaultCacheDir() {
  if (std::optional<std::string> dir = llvm::sys::Process::GetEnv("ZB_CACHE_DIR"))
    return *dir;
  if (std::optional<std::string> xdg =
          llvm::sys::Process::GetEnv("XDG_CACHE_HOME"))
    return *xdg + "/zerobubble";
  SmallString<128> home;
  if (llvm::sys::path::home_directory(home))
    return (home + "/.cache/zerobubble").str();
  return "/tmp/zerobubble-cache";
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

/// A compiled model with its parameters and one step's data.
class Runner {
public:
  Runner(const zb::ModelSignature &signature, zbrt::EntryFn forward,
         zbrt::EntryFn gradient, zbrt::DType lossType)
      : signature(signature), forward(forward), gradient(gradient),
        lossType(lossType), values(signature.args.size()),
        data(signature.args.size()) {}

  /// Loads or initialises the parameters, and loads or synthesises the
  /// data. Returns an error message, empty on success.
  std::string prepare();

  /// The loss of microbatch `mb`; with `grads`, also accumulates
  /// the microbatch's parameter gradients into `grads` (one per param).
  double run(int64_t mb, std::vector<zbrt::NpyArray> *grads);

  /// The parameters, in signature order (non-params are empty).
  std::vector<zbrt::NpyArray> &arguments() { return values; }

private:
  void bindData(int64_t mb);

  const zb::ModelSignature &signature;
  zbrt::EntryFn forward, gradient;
  zbrt::DType lossType;
  std::vector<zbrt::NpyArray> values;
  /// Per data argument: all microbatches, [M][shape].
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
    if (arg.isParam()) {
      if (paramsPath.empty()) {
        value.shape = shape;
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
    value.shape = shape;
    zbrt::NpyArray &all = data[arg.position];
    std::vector<int64_t> expected = shape;
    expected.insert(expected.begin(), microbatches);
    if (inputsPath.empty()) {
      all.dtype = dtype;
      all.shape = expected;
      size_t bytes = zbrt::NpyArray{dtype, shape, {}}.numElements() *
                     zbrt::dtypeSize(dtype);
      all.data.resize(bytes * microbatches);
      for (int64_t mb = 0; mb < microbatches; ++mb) {
        zbrt::synthesizeData(value, arg.name, seed, mb, arg.range);
        std::copy(value.data.begin(), value.data.end(),
                  all.data.begin() + mb * bytes);
      }
      continue;
    }
    auto it = inputs.find(arg.name);
    if (it == inputs.end())
      return "data array '" + arg.name + "' is missing from '" + inputsPath +
             "'";
    all = std::move(it->second);
    if (all.shape != expected)
      return "data array '" + arg.name + "' in '" + inputsPath +
             "' has shape " + all.shapeString() + ", but " +
             std::to_string(microbatches) +
             " microbatches of the model's argument need " +
             shapeString(expected);
    if (!convert(all, dtype))
      return "data array '" + arg.name + "' in '" + inputsPath +
             "' has dtype " + zbrt::dtypeDescr(all.dtype) +
             ", which cannot be converted to the model's " +
             zbrt::dtypeDescr(dtype);
  }
  return "";
}

void Runner::bindData(int64_t mb) {
  for (const zb::ModelArg &arg : signature.args) {
    if (arg.isParam())
      continue;
    zbrt::NpyArray &value = values[arg.position];
    const zbrt::NpyArray &all = data[arg.position];
    size_t bytes = value.numElements() * zbrt::dtypeSize(value.dtype);
    value.data.assign(all.data.begin() + mb * bytes,
                      all.data.begin() + (mb + 1) * bytes);
  }
}

double Runner::run(int64_t mb, std::vector<zbrt::NpyArray> *grads) {
  bindData(mb);
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
      sum += runner.run(mb, nullptr);
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

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "zb-run: compile a ZeroBubble model for the CPU and run it\n");

  if (evalMode == gradsMode)
    return fail("pass exactly one of --eval and --grads");
  if ((!dumpGradsPath.empty() || checkGrad) && !gradsMode)
    return fail("--dump-grads and --check-grad need --grads");
  if (microbatches < 1)
    return fail("--microbatches must be at least 1, got " +
                llvm::Twine(microbatches.getValue()));

  // Parse and check the model.
  DialectRegistry registry;
  zb::registerCPUCompilerDependencies(registry);
  zb::autodiff::registerGradientExternalModels(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
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
  std::string fnName = signature->func.getSymName().str();
  auto lossType = dtypeOf(
      cast<RankedTensorType>(signature->func.getResultTypes()[0])
          .getElementType());

  // Compile, or reuse the cached shared object.
  zb::CPUCompileOptions compileOptions;
  std::string dir = cacheDir.empty() ? defaultCacheDir() : cacheDir.getValue();
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return fail("cannot create cache directory '" + dir + "': " +
                ec.message());
  std::string key = modelText + "\n" +
                    zb::getCPUCompilerFingerprint(compileOptions) + ";" +
                    compilerIdentity(argv[0]) +
                    (gradsMode ? ";grads" : ";eval");
  std::string hash = llvm::toHex(llvm::SHA256::hash(
      ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(key.data()),
                        key.size())));
  std::string soPath = dir + "/" + hash.substr(0, 32) + ".so";
  if (!llvm::sys::fs::exists(soPath)) {
    OwningOpRef<ModuleOp> clone = module->clone();
    if (gradsMode) {
      PassManager pm(&context);
      pm.addPass(zb::createZBAutodiff());
      if (failed(pm.run(*clone)))
        return fail("differentiating '" + modelPath + "' failed");
    }
    if (failed(zb::compileToSharedObject(*clone, soPath, compileOptions)))
      return fail("compiling '" + modelPath + "' failed");
  }
  std::unique_ptr<zbrt::SharedObject> object =
      zbrt::SharedObject::open(soPath, errorMessage);
  if (!object)
    return fail(errorMessage);
  zbrt::EntryFn forward =
      object->lookup(std::string(zb::kEntryPrefix) + fnName, errorMessage);
  if (!forward)
    return fail(errorMessage);
  zbrt::EntryFn gradient = nullptr;
  if (gradsMode) {
    gradient = object->lookup(std::string(zb::kEntryPrefix) + fnName + "_grad",
                              errorMessage);
    if (!gradient)
      return fail(errorMessage);
  }

  Runner runner(*signature, forward, gradient, lossType);
  std::string error = runner.prepare();
  if (!error.empty())
    return fail(error);

  std::vector<double> losses;
  std::vector<zbrt::NpyArray> grads;
  for (int64_t mb = 0; mb < microbatches; ++mb)
    losses.push_back(runner.run(mb, gradsMode ? &grads : nullptr));
  double mean = 0;
  for (double l : losses)
    mean += l;
  mean /= losses.size();
  for (zbrt::NpyArray &g : grads)
    for (int64_t j = 0, e = g.numElements(); j < e; ++j)
      storeScalar(g, j, loadScalar(g, j) / microbatches);

  llvm::outs() << "zb-run: " << fnName << ": " << microbatches
               << " microbatch" << (microbatches == 1 ? "" : "es")
               << ", mean loss " << llvm::format("%.6f", mean) << "\n";

  if (!metricsPath.empty()) {
    std::string json;
    llvm::raw_string_ostream os(json);
    os << "{\"loss\": [" << llvm::format("%.9g", mean)
       << "], \"microbatch_loss\": [";
    for (size_t i = 0; i < losses.size(); ++i)
      os << (i ? ", " : "") << llvm::format("%.9g", losses[i]);
    os << "]}\n";
    if (!zbrt::writeFileAtomically(metricsPath, json, errorMessage))
      return fail(errorMessage);
  }
  if (!dumpGradsPath.empty()) {
    zbrt::NpzArchive archive;
    // The step's mean loss beside the gradients, unless a parameter has
    // that name.
    archive["loss"] = zbrt::NpyArray{
        zbrt::DType::F64, {}, std::vector<char>(sizeof(double))};
    *archive["loss"].as<double>() = mean;
    size_t g = 0;
    for (const zb::ModelArg &arg : signature->args)
      if (arg.isParam())
        archive[arg.name] = grads[g++];
    if (!zbrt::writeNpz(dumpGradsPath, archive, errorMessage))
      return fail(errorMessage);
  }
  if (checkGrad)
    return checkGradients(runner, *signature, grads);
  return 0;
}
