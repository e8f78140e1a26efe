//===- Programs.cpp - What one process runs in a step ---------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/Programs.h"

#include "zbrt/Gemm.h"
#include "zbrt/Lending.h"
#include "zbrt/Trace.h"
#include "zbrt/zbrt.h"

#include <cassert>
#include <cstring>

using namespace zb;

ModelProgram::ModelProgram(ModelData &data, zbrt::EntryFn forward,
                           zbrt::EntryFn gradient)
    : data(data), forward(forward), gradient(gradient) {}

/// The 0-d array an entry point or step function of `data`'s model writes
/// its loss into: of the model's loss type.
static zbrt::NpyArray lossArray(const ModelData &data) {
  zbrt::DType type = lossDType(data.signature());
  return zbrt::NpyArray{type, {}, std::vector<char>(zbrt::dtypeSize(type))};
}

/// values[j] /= divisor.
template <typename T> static void divide(zbrt::NpyArray &values, T divisor) {
  T *out = values.as<T>();
  for (int64_t j = 0, e = values.numElements(); j < e; ++j)
    out[j] /= divisor;
}

double ModelProgram::runMicrobatch(int64_t step, int64_t mb,
                                   std::vector<zbrt::NpyArray> *grads) {
  data.bindMicrobatch(step, mb);
  std::vector<zbrt::NpyArray> &values = data.values();
  std::vector<zbrt::NpyArray *> callArgs;
  for (zbrt::NpyArray &value : values)
    callArgs.push_back(&value);
  // The gradient sums (updated in place) follow the model's arguments; the
  // loss, the one result, comes last.
  if (grads)
    for (zbrt::NpyArray &sum : *grads)
      callArgs.push_back(&sum);
  zbrt::NpyArray loss = lossArray(data);
  callArgs.push_back(&loss);
  zbrt::EntryFn entry = grads ? gradient : forward;
  assert(entry && "the program was made without this entry point");
  zbrt::callEntry(entry, callArgs);
  return loadScalar(loss, 0);
}

/// The memory of `params`' values in `data`: what a step reads and never
/// writes, its products' weights packed once (zbrt::PackedWeights).
static std::vector<zbrt::MemoryRange>
paramMemory(ModelData &data, llvm::ArrayRef<const ModelArg *> params) {
  std::vector<zbrt::MemoryRange> ranges;
  for (const ModelArg *arg : params) {
    const std::vector<char> &bytes = data.values()[arg->position].data;
    ranges.emplace_back(bytes.data(), bytes.size());
  }
  return ranges;
}

std::vector<const ModelArg *> ModelProgram::params() const {
  std::vector<const ModelArg *> params;
  for (const ModelArg &arg : data.signature().args)
    if (arg.isParam())
      params.push_back(&arg);
  return params;
}

double ModelProgram::run(int64_t step, std::vector<zbrt::NpyArray> &grads) {
  std::vector<const ModelArg *> paramArgs = params();
  zbrt::PackedWeights packed(paramMemory(data, paramArgs));
  int64_t microbatches = data.options().microbatches;
  losses.clear();
  grads.clear();
  // Zeroed sums, which every microbatch's gradients are added into, as a
  // pipelined step adds them.
  if (gradient)
    for (const ModelArg *arg : paramArgs) {
      const zbrt::NpyArray &value = data.values()[arg->position];
      grads.push_back(zbrt::NpyArray{value.dtype, arg->shape(),
                                     std::vector<char>(value.data.size())});
    }
  for (int64_t mb = 0; mb < microbatches; ++mb)
    losses.push_back(runMicrobatch(step, mb, gradient ? &grads : nullptr));
  double mean = 0;
  for (double l : losses)
    mean += l;
  mean /= losses.size();
  for (zbrt::NpyArray &g : grads) {
    if (g.dtype == zbrt::DType::F64)
      divide<double>(g, static_cast<double>(microbatches));
    else
      divide<float>(g, static_cast<float>(microbatches));
  }
  return mean;
}

double ModelProgram::meanLoss(int64_t step) {
  zbrt::PackedWeights packed(paramMemory(data, params()));
  int64_t microbatches = data.options().microbatches;
  double sum = 0;
  for (int64_t mb = 0; mb < microbatches; ++mb)
    sum += runMicrobatch(step, mb, nullptr);
  return sum / microbatches;
}

PipelineRankProgram::PipelineRankProgram(
    ModelData &data, llvm::ArrayRef<const ModelArg *> params,
    zbrt::EntryFn step, zbrt::Comm &world, const zbrt::CUDARuntime *cuda,
    bool recordActions)
    : data(data), params(params.begin(), params.end()), entry(step),
      world(world), cuda(cuda), recordActions(recordActions),
      endStep(data.options().steps) {}

PipelineRankProgram::~PipelineRankProgram() {
  // The last step's prefetch may still be writing its set.
  std::string error;
  if (prefetchedStep >= 0)
    cuda->awaitPrefetches(error);
  for (auto *pointers :
       {&buffers.params, &buffers.grads, &deviceInputs[0], &deviceInputs[1]})
    for (void *pointer : *pointers)
      cuda->free(pointer);
  if (deviceResults)
    cuda->free(deviceResults);
}

const RankBuffers &PipelineRankProgram::rankBuffers() {
  if (cuda && !buffers.cuda) {
    buffers.cuda = cuda;
    std::string error;
    for (auto *pointers : {&buffers.params, &buffers.grads})
      for (const ModelArg *arg : params) {
        pointers->push_back(
            cuda->alloc(data.values()[arg->position].data.size(), error));
        if (!pointers->back())
          world.abort("--backend nccl: " + error);
      }
  }
  return buffers;
}

void PipelineRankProgram::callGradSquares(const std::vector<void *> &grads,
                                          double *sums) {
  std::vector<zbrt::NpyArray *> arrays;
  std::vector<void *> pointers(grads);
  for (const ModelArg *arg : params)
    arrays.push_back(&data.values()[arg->position]);
  zbrt::NpyArray scalar{zbrt::DType::F64, {}, {}};
  for (size_t i = 0; i < params.size(); ++i) {
    arrays.push_back(&scalar);
    pointers.push_back(sums + i);
  }
  zbrt::callEntry(squaresEntry, arrays, &pointers);
}

std::vector<zbrt::NpyArray>
PipelineRankProgram::stepInputs(int64_t step) const {
  std::vector<zbrt::NpyArray> inputs;
  for (const ModelArg &arg : data.signature().args)
    if (!arg.isParam())
      inputs.push_back(data.stepData(arg, step));
  return inputs;
}

void PipelineRankProgram::runOnDevice(int64_t step,
                                      std::vector<zbrt::NpyArray *> &callArgs,
                                      size_t numData) {
  std::string error;
  auto check = [&](bool ok) {
    if (!ok)
      world.abort("--backend nccl: " + error);
  };
  rankBuffers();
  size_t numParams = params.size();
  // The loss, then (8 bytes on) one f64 sum of squares per gradient.
  size_t resultBytes = sizeof(double) * (1 + numParams);
  // The first step: the buffers, and the parameters (then only the
  // compiled update changes them).
  if (!deviceResults) {
    for (std::vector<void *> &set : deviceInputs)
      for (size_t i = 0; i < numData; ++i) {
        set.push_back(cuda->alloc(callArgs[numParams + i]->data.size(), error));
        check(set.back());
      }
    deviceResults = cuda->alloc(resultBytes, error);
    check(deviceResults);
    for (size_t i = 0; i < numParams; ++i)
      check(cuda->copyToDeviceAsync(buffers.params[i], callArgs[i]->data.data(),
                                    callArgs[i]->data.size(), error));
    // The allocations are ordered on the compute stream; the copy stream
    // may use them once they are done.
    check(cuda->synchronize(error));
  }
  // The step's data: prefetched during the last step, or uploaded now
  // without waiting; then the loss and gradients zeroed (as the host's
  // arrays are).
  const std::vector<void *> &inputs = deviceInputs[step % 2];
  if (prefetchedStep >= 0)
    check(cuda->awaitPrefetches(error));
  if (prefetchedStep != step)
    for (size_t i = 0; i < numData; ++i)
      check(cuda->copyToDeviceAsync(
          inputs[i], callArgs[numParams + i]->data.data(),
          callArgs[numParams + i]->data.size(), error));
  prefetchedStep = -1;
  check(cuda->zero(deviceResults, resultBytes, error));
  std::vector<void *> pointers(buffers.params);
  pointers.insert(pointers.end(), inputs.begin(), inputs.end());
  pointers.push_back(deviceResults);
  for (size_t i = 0; i < numParams; ++i) {
    check(cuda->zero(buffers.grads[i], callArgs[i]->data.size(), error));
    // Only the shape is read: the parameter's.
    callArgs.push_back(callArgs[i]);
    pointers.push_back(buffers.grads[i]);
  }
  zbrt::callEntry(entry, callArgs, &pointers);
  zbrt_step_end();
  if (squaresEntry)
    callGradSquares(buffers.grads, static_cast<double *>(deviceResults) + 1);
  // The next step's data into the other set (the previous step's, done),
  // while this one computes.
  if (step + 1 < endStep) {
    const std::vector<void *> &next = deviceInputs[(step + 1) % 2];
    prefetchedInputs = stepInputs(step + 1);
    for (size_t i = 0; i < numData; ++i)
      check(cuda->prefetchToDevice(next[i], prefetchedInputs[i].data.data(),
                                   prefetchedInputs[i].data.size(), error));
    prefetchedStep = step + 1;
  }
  // The step's one wait: its loss and sums (the gradients stay on the
  // device).
  std::vector<double> results(1 + numParams);
  check(cuda->copyToHost(results.data(), deviceResults,
                         squaresEntry ? resultBytes : sizeof(double), error));
  zbrt::NpyArray *loss = callArgs[numParams + numData];
  std::memcpy(loss->data.data(), results.data(), loss->data.size());
  if (squaresEntry)
    buffers.gradSquares.assign(results.begin() + 1, results.end());
}

std::vector<zbrt::NpyArray> PipelineRankProgram::gradsFromDevice() {
  std::vector<zbrt::NpyArray> grads;
  std::string error;
  for (size_t i = 0; i < params.size(); ++i) {
    const zbrt::NpyArray &param = data.values()[params[i]->position];
    grads.push_back(zbrt::NpyArray{param.dtype, param.shape,
                                   std::vector<char>(param.data.size())});
    if (!cuda->copyToHost(grads.back().data.data(), buffers.grads[i],
                          param.data.size(), error))
      world.abort("--backend nccl: " + error);
  }
  return grads;
}

double PipelineRankProgram::run(int64_t step,
                                std::vector<zbrt::NpyArray> &grads) {
  // The rank's records are timed from the step's start and placed in the
  // trace on the rank's own clock, which starts at the first step (after
  // the loop's barrier).
  double origin = zbrt::traceClock();
  if (!started)
    firstOrigin = origin;
  started = true;
  zbrt::takeActionRecords();
  zbrt::takeReductionWaitSeconds();
  zbrt::takeLendingCounts();
  run::RankStep mine;
  mine.baseBytes = zbrt::liveBytes();
  zbrt::resetPeakLiveBytes();
  // On the device a prefetched step's inputs are there already; their
  // host arrays give the shapes.
  std::vector<zbrt::NpyArray> stepData = cuda && prefetchedStep == step
                                             ? std::move(prefetchedInputs)
                                             : stepInputs(step);
  std::vector<zbrt::NpyArray *> callArgs;
  for (const ModelArg *arg : params)
    callArgs.push_back(&data.values()[arg->position]);
  for (zbrt::NpyArray &d : stepData)
    callArgs.push_back(&d);
  zbrt::NpyArray loss = lossArray(data);
  callArgs.push_back(&loss);
  grads.clear();
  if (!cuda)
    for (const ModelArg *arg : params)
      grads.push_back(zbrt::NpyArray{
          data.values()[arg->position].dtype, arg->shape(),
          std::vector<char>(data.values()[arg->position].data.size())});
  if (cuda) {
    runOnDevice(step, callArgs, stepData.size());
  } else {
    std::vector<void *> host;
    for (zbrt::NpyArray &g : grads) {
      callArgs.push_back(&g);
      host.push_back(g.data.data());
    }
    zbrt::PackedWeights packed(paramMemory(data, params));
    zbrt::callEntry(entry, callArgs);
    zbrt_step_end();
    if (squaresEntry) {
      buffers.gradSquares.assign(params.size(), 0.0);
      callGradSquares(host, buffers.gradSquares.data());
    }
  }
  mine.actions = zbrt::takeActionRecords();
  for (zbrt::ActionRecord &a : mine.actions) {
    a.start -= origin;
    a.end -= origin;
  }
  mine.peakBytes = zbrt::peakLiveBytes();
  mine.reductionWait = zbrt::takeReductionWaitSeconds();
  mine.lending = zbrt::takeLendingCounts();
  // On this rank's own clock, so that its actions never overlap in the
  // trace.
  mine.offset = origin - firstOrigin;
  if (recordActions) {
    // A step run again replaces its records.
    if (!localSteps.empty() && localSteps.back().first == step)
      localSteps.pop_back();
    localSteps.emplace_back(step, run::serialize(mine));
  }
  return loadScalar(loss, 0);
}

void PipelineRankProgram::endRun() {
  if (!recordActions)
    return;
  // Every rank ran the same steps: the records travel once, at the end, so
  // that no rank waits for another between steps.
  std::string mineAll;
  for (const auto &[step, bytes] : localSteps) {
    uint64_t size = bytes.size();
    mineAll.append(reinterpret_cast<const char *>(&size), sizeof(size));
    mineAll += bytes;
  }
  localSteps.clear();
  std::vector<std::string> parts;
  world.gather(mineAll, parts, 0);
  if (world.rank() != 0)
    return;
  std::vector<size_t> offsets(world.size(), 0);
  for (;;) {
    std::vector<run::RankStep> all(world.size());
    size_t done = 0;
    for (int r = 0; r < world.size(); ++r) {
      const std::string &part = parts[r];
      size_t &at = offsets[r];
      if (at == part.size()) {
        ++done;
        continue;
      }
      uint64_t size = 0;
      if (part.size() - at < sizeof(size))
        world.abort("rank " + std::to_string(r) +
                    " sent malformed action records");
      std::memcpy(&size, part.data() + at, sizeof(size));
      at += sizeof(size);
      if (part.size() - at < size ||
          !run::deserialize(part.substr(at, size), all[r]))
        world.abort("rank " + std::to_string(r) +
                    " sent malformed action records");
      at += size;
    }
    if (done == all.size())
      break;
    if (done != 0)
      world.abort("the ranks sent the action records of different numbers "
                  "of steps");
    steps.push_back(std::move(all));
  }
}
