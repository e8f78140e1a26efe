//===- ModelData.cpp - A model's parameters and data in one process -------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/ModelData.h"

#include "zbrt/Init.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <unistd.h>

using namespace zb;

zbrt::DType zb::dtypeOf(mlir::Type type) {
  if (type.isF64())
    return zbrt::DType::F64;
  if (type.isInteger(32))
    return zbrt::DType::I32;
  if (type.isInteger(64))
    return zbrt::DType::I64;
  return zbrt::DType::F32;
}

zbrt::DType zb::lossDType(const ModelSignature &signature) {
  mlir::func::FuncOp fn = signature.func;
  return dtypeOf(mlir::cast<mlir::RankedTensorType>(fn.getResultTypes()[0])
                     .getElementType());
}

static bool isFloat(zbrt::DType d) {
  return d == zbrt::DType::F32 || d == zbrt::DType::F64;
}

bool zb::canConvert(zbrt::DType from, zbrt::DType to) {
  return isFloat(from) == isFloat(to);
}

bool zb::convertArray(zbrt::NpyArray &array, zbrt::DType dtype) {
  if (array.dtype == dtype)
    return true;
  if (!canConvert(array.dtype, dtype))
    return false;
  int64_t n = array.numElements();
  std::vector<char> out(n * zbrt::dtypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
    case zbrt::DType::F32:
      reinterpret_cast<float *>(out.data())[i] =
          static_cast<float>(array.as<double>()[i]);
      break;
    case zbrt::DType::F64:
      reinterpret_cast<double *>(out.data())[i] = array.as<float>()[i];
      break;
    case zbrt::DType::I32:
      reinterpret_cast<int32_t *>(out.data())[i] =
          static_cast<int32_t>(array.as<int64_t>()[i]);
      break;
    case zbrt::DType::I64:
      reinterpret_cast<int64_t *>(out.data())[i] = array.as<int32_t>()[i];
      break;
    }
  }
  array.data = std::move(out);
  array.dtype = dtype;
  return true;
}

double zb::loadScalar(const zbrt::NpyArray &array, int64_t i) {
  return array.dtype == zbrt::DType::F64 ? array.as<double>()[i]
                                         : array.as<float>()[i];
}

void zb::storeScalar(zbrt::NpyArray &array, int64_t i, double v) {
  if (array.dtype == zbrt::DType::F64)
    array.as<double>()[i] = v;
  else
    array.as<float>()[i] = static_cast<float>(v);
}

std::string zb::shapeString(llvm::ArrayRef<int64_t> shape) {
  zbrt::NpyArray a;
  a.shape.assign(shape.begin(), shape.end());
  return a.shapeString();
}

zbrt::NpzArchive zb::namedArrays(llvm::ArrayRef<const ModelArg *> params,
                                 std::vector<zbrt::NpyArray> &&grads) {
  zbrt::NpzArchive archive;
  for (size_t i = 0; i < params.size(); ++i)
    archive[params[i]->name] = std::move(grads[i]);
  grads.clear();
  return archive;
}

/// Checks that `value`, read from a file, has the model's `shape` and
/// converts it to `dtype` (with `headerOnly`, only that it could: its data
/// were not read); returns what is wrong ("has shape ...") or empty.
static std::string checkStored(zbrt::NpyArray &value,
                               const std::vector<int64_t> &shape,
                               zbrt::DType dtype, bool headerOnly) {
  if (value.shape != shape)
    return "has shape " + value.shapeString() + ", but the model expects " +
           shapeString(shape);
  if (headerOnly ? !canConvert(value.dtype, dtype)
                 : !convertArray(value, dtype))
    return std::string("has dtype ") + zbrt::dtypeDescr(value.dtype) +
           ", which cannot be converted to the model's " +
           zbrt::dtypeDescr(dtype);
  return "";
}

ModelData::ModelData(const ModelSignature &signature, DataOptions options)
    : sig(signature), opts(std::move(options)), args(signature.args.size()),
      inputs(signature.args.size()) {}

std::string ModelData::prepare() { return load(/*headersOnly=*/false); }

std::string ModelData::checkFiles(const ModelSignature &signature,
                                  DataOptions options, std::string *unknown) {
  return ModelData(signature, std::move(options))
      .load(/*headersOnly=*/true, unknown);
}

/// The arrays of `archive` (read from `path`) that are not `known` (the
/// names of a model's arguments and running statistics), as "'path' holds N
/// arrays the model does not have: a, b, ...", empty when there are none.
static std::string unknownArrays(const std::set<std::string> &known,
                                 const zbrt::NpzArchive &archive,
                                 const std::string &path) {
  std::vector<std::string> names;
  for (const auto &entry : archive)
    if (!known.count(entry.first))
      names.push_back(entry.first);
  if (names.empty())
    return "";
  std::sort(names.begin(), names.end());
  constexpr size_t kShown = 5;
  std::string text = "'" + path + "' holds " + std::to_string(names.size()) +
                     (names.size() == 1 ? " array" : " arrays") +
                     " the model does not have, left unread: ";
  for (size_t i = 0; i < names.size() && i < kShown; ++i)
    text += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > kShown)
    text += ", ...";
  return text;
}

/// What is wrong with the model's arguments for one process to hold them
/// (their bytes past 64 bits or past this machine's memory), empty when
/// nothing is.
static std::string checkArgumentBytes(const ModelSignature &sig) {
  uint64_t total = 0;
  for (const ModelArg &arg : sig.args) {
    std::optional<uint64_t> bytes = tensorBytes(arg.type);
    if (!bytes || __builtin_add_overflow(total, *bytes, &total))
      return "argument '" + arg.name + "' of shape " +
             shapeString(arg.shape()) +
             " is too large: its size in bytes overflows 64 bits";
  }
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0 &&
      total / static_cast<uint64_t>(pageSize) >= static_cast<uint64_t>(pages))
    return "the model's arguments take " + std::to_string(total) +
           " bytes, more than this machine's memory (" +
           std::to_string(static_cast<uint64_t>(pages) * pageSize) + " bytes)";
  return "";
}

/// The first element of integer data `arg`'s array outside [rangeFrom,
/// range) (and not its rangeIgnored) as "V at [i, j, ...]", empty when
/// every one lies inside.
static std::string outsideRange(const zbrt::NpyArray &array,
                                const ModelArg &arg) {
  for (int64_t i = 0, e = array.numElements(); i < e; ++i) {
    int64_t v = array.dtype == zbrt::DType::I64 ? array.as<int64_t>()[i]
                                                : array.as<int32_t>()[i];
    if ((v >= arg.rangeFrom && v < arg.range) || v == arg.rangeIgnored)
      continue;
    std::vector<int64_t> index(array.shape.size());
    for (int64_t d = static_cast<int64_t>(index.size()) - 1, rest = i; d >= 0;
         --d) {
      index[d] = rest % array.shape[d];
      rest /= array.shape[d];
    }
    return std::to_string(v) + " at " + shapeString(index);
  }
  return "";
}

std::string ModelData::load(bool headersOnly, std::string *unknown) {
  if (std::string problem = checkArgumentBytes(sig); !problem.empty())
    return problem;
  std::string error;
  zbrt::NpzArchive params, archive;
  const std::string &paramsPath = opts.paramsPath;
  const std::string &inputsPath = opts.inputsPath;
  auto read = headersOnly ? zbrt::readNpzHeaders : zbrt::readNpz;
  if (!paramsPath.empty() && !read(paramsPath, params, error))
    return error;
  if (!inputsPath.empty() && !read(inputsPath, archive, error))
    return error;
  if (unknown) {
    std::set<std::string> known;
    for (const ModelArg &arg : sig.args)
      known.insert(arg.name);
    for (const RunningStat &stat : sig.runningStats)
      known.insert(stat.name);
    std::string inParams = unknownArrays(known, params, paramsPath);
    std::string inInputs = unknownArrays(known, archive, inputsPath);
    *unknown = inParams + (inParams.empty() || inInputs.empty() ? "" : "; ") +
               inInputs;
  }
  int64_t perStepCount = opts.microbatches * opts.replicas;
  for (const ModelArg &arg : sig.args) {
    zbrt::NpyArray &value = args[arg.position];
    zbrt::DType dtype = dtypeOf(arg.type.getElementType());
    value.dtype = dtype;
    std::vector<int64_t> shape = arg.shape();
    value.shape = shape;
    if (!headersOnly)
      value.data.assign(value.numElements() * zbrt::dtypeSize(dtype), 0);
    if (arg.isParam()) {
      if (paramsPath.empty()) {
        if (!headersOnly)
          zbrt::initParam(value, arg.name, opts.seed);
        continue;
      }
      auto it = params.find(arg.name);
      if (it == params.end())
        return "parameter '" + arg.name + "' is missing from '" + paramsPath +
               "'";
      value = it->second;
      std::string problem = checkStored(value, shape, dtype, headersOnly);
      if (!problem.empty())
        return "parameter '" + arg.name + "' in '" + paramsPath + "' " +
               problem;
      continue;
    }
    // A random key is the runner's, whatever the files hold.
    if (fromSeed(arg))
      continue;
    auto it = archive.find(arg.name);
    if (it == archive.end())
      return "data array '" + arg.name + "' is missing from '" + inputsPath +
             "'";
    zbrt::NpyArray &all = inputs[arg.position];
    all = std::move(it->second);
    std::vector<int64_t> perStep = shape;
    perStep.insert(perStep.begin(), perStepCount);
    // One array for every step, or one per step for at least the steps
    // run (step s reads the s-th; later ones are left unread).
    bool everyStep = all.shape == perStep;
    bool perStepArrays =
        all.shape.size() == perStep.size() + 1 && all.shape[0] >= opts.steps &&
        std::equal(perStep.begin(), perStep.end(), all.shape.begin() + 1);
    if (!everyStep && !perStepArrays) {
      std::vector<int64_t> allSteps = perStep;
      allSteps.insert(allSteps.begin(), opts.steps);
      return "data array '" + arg.name + "' in '" + inputsPath +
             "' has shape " + all.shapeString() + ", but " +
             std::to_string(perStepCount) +
             " microbatches of the model's argument need " +
             shapeString(perStep) + " (or " + shapeString(allSteps) +
             ", one per step, for " + std::to_string(opts.steps) +
             " steps; more steps are allowed)";
    }
    if (headersOnly ? !canConvert(all.dtype, dtype) : !convertArray(all, dtype))
      return "data array '" + arg.name + "' in '" + inputsPath +
             "' has dtype " + zbrt::dtypeDescr(all.dtype) +
             ", which cannot be converted to the model's " +
             zbrt::dtypeDescr(dtype);
    // Integer data index tables (token ids): a value past the model's
    // zb.range would read outside them.
    if (!headersOnly && arg.range > 0 && !isFloat(dtype))
      if (std::string bad = outsideRange(all, arg); !bad.empty())
        return "data array '" + arg.name + "' in '" + inputsPath + "' holds " +
               bad + ", outside the model's range [" +
               std::to_string(arg.rangeFrom) + ", " +
               std::to_string(arg.range) + ") (zb.range" +
               (arg.rangeFrom ? ", zb.range_from" : "") + ")" +
               (arg.rangeIgnored
                    ? " and not " + std::to_string(*arg.rangeIgnored) +
                          " (zb.range_ignored)"
                    : "");
  }
  for (const RunningStat &stat : sig.runningStats) {
    zbrt::NpyArray &value = stats[stat.name];
    zbrt::DType dtype = dtypeOf(stat.type.getElementType());
    std::vector<int64_t> shape = stat.shape();
    auto it = params.find(stat.name);
    if (it == params.end()) {
      value = zbrt::NpyArray{dtype, shape, {}};
      value.data.resize(value.numElements() * zbrt::dtypeSize(dtype));
      for (int64_t j = 0, e = value.numElements(); j < e; ++j)
        storeScalar(value, j, stat.init);
      continue;
    }
    value = it->second;
    std::string problem = checkStored(value, shape, dtype, headersOnly);
    if (!problem.empty())
      return "running statistic '" + stat.name + "' in '" + paramsPath + "' " +
             problem;
  }
  return "";
}

zbrt::NpzArchive ModelData::updatedStats() const {
  zbrt::NpzArchive archive;
  for (const std::string &name : updated)
    archive[name] = stats.at(name);
  return archive;
}

std::string ModelData::foldStatRecords(const zbrt::StatRecords &records) {
  for (const auto &[name, values] : records) {
    auto stat = llvm::find_if(
        sig.runningStats, [&](const RunningStat &s) { return s.name == name; });
    if (stat == sig.runningStats.end())
      return "compiled code recorded the running statistic '" + name +
             "', which the model does not have";
    zbrt::NpyArray &buffer = stats.at(name);
    double momentum = stat->momentum;
    for (const std::vector<double> &value : values) {
      if (static_cast<int64_t>(value.size()) != buffer.numElements())
        return "compiled code recorded " + std::to_string(value.size()) +
               " values for the running statistic '" + name + "' of " +
               std::to_string(buffer.numElements()) + " elements";
      for (int64_t j = 0, e = buffer.numElements(); j < e; ++j)
        storeScalar(buffer, j,
                    (1.0 - momentum) * loadScalar(buffer, j) +
                        momentum * value[j]);
    }
    updated.insert(name);
  }
  return "";
}

std::string ModelData::setRunningStats(const zbrt::NpzArchive &values) {
  for (auto &[name, buffer] : stats) {
    auto it = values.find(name);
    if (it == values.end())
      continue;
    zbrt::NpyArray value = it->second;
    if (value.shape != buffer.shape || !convertArray(value, buffer.dtype))
      return "running statistic '" + name + "' has shape " +
             value.shapeString() + " and dtype " +
             zbrt::dtypeDescr(value.dtype) + ", but the model's is " +
             buffer.shapeString() + " " + zbrt::dtypeDescr(buffer.dtype);
    buffer = std::move(value);
  }
  return "";
}

int64_t ModelData::globalMicrobatch(int64_t step, int64_t mb) const {
  return (step * opts.replicas + opts.replica) * opts.microbatches + mb;
}

size_t ModelData::inputOffset(const zbrt::NpyArray &all, size_t bytes,
                              int64_t step, int64_t mb) const {
  size_t perStep = bytes * opts.microbatches * opts.replicas;
  int64_t index = opts.replica * opts.microbatches + mb;
  return (all.data.size() > perStep ? step * perStep : 0) + index * bytes;
}

void ModelData::synthesize(const ModelArg &arg, zbrt::NpyArray &value,
                           int64_t microbatch) const {
  if (!arg.rng) {
    zbrt::synthesizeData(value, arg.name, opts.seed, microbatch, arg.range);
    return;
  }
  uint64_t key = zbrt::rngKey(opts.seed, microbatch);
  value.data.resize(sizeof(key));
  std::memcpy(value.data.data(), &key, sizeof(key));
}

zbrt::NpyArray ModelData::stepData(const ModelArg &arg, int64_t step) const {
  zbrt::NpyArray out;
  out.dtype = dtypeOf(arg.type.getElementType());
  out.shape = arg.shape();
  out.shape.insert(out.shape.begin(), opts.microbatches);
  size_t bytes = out.numElements() * zbrt::dtypeSize(out.dtype);
  size_t mbBytes = bytes / opts.microbatches;
  if (fromSeed(arg)) {
    out.data.resize(bytes);
    zbrt::NpyArray one{out.dtype, arg.shape(), {}};
    for (int64_t mb = 0; mb < opts.microbatches; ++mb) {
      synthesize(arg, one, globalMicrobatch(step, mb));
      std::copy(one.data.begin(), one.data.end(),
                out.data.begin() + mb * mbBytes);
    }
    return out;
  }
  const zbrt::NpyArray &all = inputs[arg.position];
  size_t offset = inputOffset(all, mbBytes, step, 0);
  out.data.assign(all.data.begin() + offset, all.data.begin() + offset + bytes);
  return out;
}

void ModelData::bindMicrobatch(int64_t step, int64_t mb) {
  for (const ModelArg &arg : sig.args) {
    if (arg.isParam())
      continue;
    zbrt::NpyArray &value = args[arg.position];
    if (fromSeed(arg)) {
      synthesize(arg, value, globalMicrobatch(step, mb));
      continue;
    }
    size_t bytes = value.numElements() * zbrt::dtypeSize(value.dtype);
    const zbrt::NpyArray &all = inputs[arg.position];
    size_t offset = inputOffset(all, bytes, step, mb);
    value.data.assign(all.data.begin() + offset,
                      all.data.begin() + offset + bytes);
  }
}

zbrt::NpzArchive
ModelData::paramArchive(llvm::ArrayRef<const ModelArg *> params) const {
  zbrt::NpzArchive archive;
  for (const ModelArg *arg : params)
    archive[arg->name] = args[arg->position];
  return archive;
}

void ModelData::setParams(llvm::ArrayRef<const ModelArg *> params,
                          const zbrt::NpzArchive &values) {
  for (const ModelArg *arg : params)
    args[arg->position] = values.at(arg->name);
}

zbrt::NpzArchive
ModelData::takeParams(llvm::ArrayRef<const ModelArg *> params) {
  zbrt::NpzArchive archive;
  for (const ModelArg *arg : params)
    archive[arg->name] = std::move(args[arg->position]);
  return archive;
}

void ModelData::setParams(llvm::ArrayRef<const ModelArg *> params,
                          zbrt::NpzArchive &&values) {
  for (const ModelArg *arg : params)
    args[arg->position] = std::move(values.at(arg->name));
}
