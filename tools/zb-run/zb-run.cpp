//===- zb-run.cpp - Compile and run a model -------------------------------===//
//
// Part of ZeroBubble MLIR.
//
// zb-run MODEL.mlir --eval [--params P.npz] [--inputs I.npz] [--seed S]
//        [--microbatches M] [--metrics M.json] [--cache-dir DIR]
//
// Compiles the model for the CPU (caching the shared object by content
// hash), initialises parameters from the seed or loads them, makes
// synthetic data or loads it, runs the forward on each microbatch and
// prints the mean loss.
//
//===----------------------------------------------------------------------===//

#include "zb/Model/Model.h"
#include "zb/Target/CPUCompiler.h"

#include "zbrt/Executable.h"
#include "zbrt/Init.h"
#include "zbrt/Npz.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

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

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "zb-run: compile a ZeroBubble model for the CPU and run it\n");

  if (!evalMode)
    return fail("nothing to do: pass --eval");
  if (microbatches < 1)
    return fail("--microbatches must be at least 1, got " +
                llvm::Twine(microbatches.getValue()));

  // Parse and check the model.
  DialectRegistry registry;
  zb::registerCPUCompilerDependencies(registry);
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

  // Compile, or reuse the cached shared object.
  zb::CPUCompileOptions compileOptions;
  std::string dir = cacheDir.empty() ? defaultCacheDir() : cacheDir.getValue();
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return fail("cannot create cache directory '" + dir + "': " +
                ec.message());
  std::string key = modelText + "\n" +
                    zb::getCPUCompilerFingerprint(compileOptions);
  std::string hash = llvm::toHex(llvm::SHA256::hash(
      ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(key.data()),
                        key.size())));
  std::string soPath = dir + "/" + hash.substr(0, 32) + ".so";
  if (!llvm::sys::fs::exists(soPath)) {
    OwningOpRef<ModuleOp> clone = module->clone();
    if (failed(zb::compileToSharedObject(*clone, soPath, compileOptions)))
      return fail("compiling '" + modelPath + "' failed");
  }
  std::unique_ptr<zbrt::SharedObject> object =
      zbrt::SharedObject::open(soPath, errorMessage);
  if (!object)
    return fail(errorMessage);
  zbrt::EntryFn entry =
      object->lookup(std::string(zb::kEntryPrefix) + fnName, errorMessage);
  if (!entry)
    return fail(errorMessage);

  // Parameters.
  const std::vector<zb::ModelArg> &args = signature->args;
  zbrt::NpzArchive params, inputs;
  if (!paramsPath.empty() && !zbrt::readNpz(paramsPath, params, errorMessage))
    return fail(errorMessage);
  if (!inputsPath.empty() && !zbrt::readNpz(inputsPath, inputs, errorMessage))
    return fail(errorMessage);
  std::vector<zbrt::NpyArray> values(args.size());
  for (const zb::ModelArg &arg : args) {
    zbrt::NpyArray &value = values[arg.position];
    value.dtype = dtypeOf(arg.type.getElementType());
    std::vector<int64_t> shape = arg.shape();
    if (!arg.isParam())
      continue;
    if (paramsPath.empty()) {
      value.shape = shape;
      zbrt::initParam(value, arg.name, seed);
      continue;
    }
    auto it = params.find(arg.name);
    if (it == params.end())
      return fail("parameter '" + arg.name + "' is missing from '" +
                  paramsPath + "'");
    value = it->second;
    if (value.shape != shape)
      return fail("parameter '" + arg.name + "' in '" + paramsPath +
                  "' has shape " + value.shapeString() +
                  ", but the model expects " + shapeString(shape));
    if (!convert(value, dtypeOf(arg.type.getElementType())))
      return fail("parameter '" + arg.name + "' in '" + paramsPath +
                  "' has dtype " + zbrt::dtypeDescr(value.dtype) +
                  ", which cannot be converted to the model's");
  }

  // Data: one array per data argument, [M][shape].
  std::vector<zbrt::NpyArray> dataArrays(args.size());
  for (const zb::ModelArg &arg : args) {
    if (arg.isParam() || inputsPath.empty())
      continue;
    auto it = inputs.find(arg.name);
    if (it == inputs.end())
      return fail("data array '" + arg.name + "' is missing from '" +
                  inputsPath + "'");
    zbrt::NpyArray &array = it->second;
    std::vector<int64_t> expected = arg.shape();
    expected.insert(expected.begin(), microbatches);
    if (array.shape != expected)
      return fail("data array '" + arg.name + "' in '" + inputsPath +
                  "' has shape " + array.shapeString() + ", but " +
                  llvm::Twine(microbatches.getValue()) +
                  " microbatches of the model's argument need " +
                  shapeString(expected));
    if (!convert(array, dtypeOf(arg.type.getElementType())))
      return fail("data array '" + arg.name + "' in '" + inputsPath +
                  "' has dtype " + zbrt::dtypeDescr(array.dtype) +
                  ", which cannot be converted to the model's " +
                  zbrt::dtypeDescr(dtypeOf(arg.type.getElementType())));
    dataArrays[arg.position] = std::move(array);
  }

  // Run the forward on each microbatch.
  std::vector<double> losses;
  zbrt::NpyArray loss;
  loss.dtype = zbrt::DType::F32;
  loss.data.assign(sizeof(float), 0);
  for (int64_t mb = 0; mb < microbatches; ++mb) {
    std::vector<zbrt::NpyArray *> callArgs;
    for (const zb::ModelArg &arg : args) {
      zbrt::NpyArray &value = values[arg.position];
      if (!arg.isParam()) {
        value.shape = arg.shape();
        size_t bytes = value.numElements() * zbrt::dtypeSize(value.dtype);
        if (inputsPath.empty()) {
          zbrt::synthesizeData(value, arg.name, seed, mb, arg.range);
        } else {
          const zbrt::NpyArray &all = dataArrays[arg.position];
          value.data.assign(all.data.begin() + mb * bytes,
                            all.data.begin() + (mb + 1) * bytes);
        }
      }
      callArgs.push_back(&value);
    }
    callArgs.push_back(&loss);
    zbrt::callEntry(entry, callArgs);
    losses.push_back(*loss.as<float>());
  }
  double mean = 0;
  for (double l : losses)
    mean += l;
  mean /= losses.size();

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
  return 0;
}
