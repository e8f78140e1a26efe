//===- Update.cpp - Where a process's optimizer step runs -----------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/Update.h"

#include "zb/Driver/CompiledOptimizer.h"

#include <array>
#include <cmath>
#include <cstring>
#include <optional>

using namespace zb;

ParamUpdate::~ParamUpdate() = default;

//===----------------------------------------------------------------------===//
// On the host
//===----------------------------------------------------------------------===//

/// Adds the square of each finite element `at(j)`, j < n, to `squares`
/// and counts the others in `nonFinite`.
template <typename At>
static void addSquaresOneByOne(int64_t n, At at, double &squares,
                               double &nonFinite) {
  for (int64_t j = 0; j < n; ++j) {
    double v = at(j);
    if (std::isfinite(v))
      squares += v * v;
    else
      nonFinite += 1;
  }
}

/// The same for the n elements of `g`, in four partial sums, so that the
/// loop vectorises; a non-finite element makes the sum non-finite, and
/// only then are they counted one by one.
template <typename T>
static void addSquares(const T *g, int64_t n, double &squares,
                       double &nonFinite) {
  double partial[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int k = 0; k < 4; ++k)
      partial[k] += static_cast<double>(g[j + k]) * g[j + k];
  for (; j < n; ++j)
    partial[0] += static_cast<double>(g[j]) * g[j];
  double sum = (partial[0] + partial[1]) + (partial[2] + partial[3]);
  if (std::isfinite(sum))
    squares += sum;
  else
    addSquaresOneByOne(
        n, [&](int64_t i) { return static_cast<double>(g[i]); }, squares,
        nonFinite);
}

static void addSquares(const zbrt::NpyArray &g, double &squares,
                       double &nonFinite) {
  if (g.dtype == zbrt::DType::F32)
    return addSquares(g.as<float>(), g.numElements(), squares, nonFinite);
  if (g.dtype == zbrt::DType::F64)
    return addSquares(g.as<double>(), g.numElements(), squares, nonFinite);
  addSquaresOneByOne(
      g.numElements(), [&](int64_t i) { return loadScalar(g, i); }, squares,
      nonFinite);
}

namespace {

class HostUpdate : public ParamUpdate {
public:
  HostUpdate(ModelData &data, llvm::ArrayRef<const ModelArg *> params,
             llvm::ArrayRef<bool> counted, zbrt::Optimizer &optimizer)
      : data(data), params(params.begin(), params.end()),
        counted(counted.begin(), counted.end()), optimizer(optimizer) {}

  bool addSquares(const zbrt::NpzArchive &grads, double &squares,
                  double &nonFinite, std::string &) override {
    for (size_t i = 0; i < params.size(); ++i)
      if (counted[i])
        ::addSquares(grads.at(params[i]->name), squares, nonFinite);
    return true;
  }

  bool save(std::string &) override {
    // Copy assignments reuse the buffers the last step's save held.
    savedParams.resize(params.size());
    for (size_t i = 0; i < params.size(); ++i)
      savedParams[i] = data.values()[params[i]->position];
    savedOptimizer = optimizer;
    return true;
  }

  bool update(const zbrt::NpzArchive &grads, double clipScale,
              std::string &error) override {
    if (clipScale == 1.0)
      return apply(grads, error);
    zbrt::NpzArchive scaled = grads;
    auto scale = static_cast<float>(clipScale);
    for (auto &entry : scaled) {
      zbrt::NpyArray &g = entry.second;
      for (int64_t j = 0, e = g.numElements(); j < e; ++j)
        storeScalar(g, j,
                    g.dtype == zbrt::DType::F32
                        ? static_cast<double>(
                              static_cast<float>(loadScalar(g, j)) * scale)
                        : loadScalar(g, j) * clipScale);
    }
    return apply(scaled, error);
  }

  bool restore(std::string &) override {
    // What the update wrote goes to the saved buffers, which the next
    // save overwrites.
    for (size_t i = 0; i < params.size(); ++i)
      std::swap(data.values()[params[i]->position], savedParams[i]);
    std::swap(optimizer, *savedOptimizer);
    return true;
  }

  bool syncToHost(std::string &) override { return true; }

private:
  bool apply(const zbrt::NpzArchive &grads, std::string &error) {
    zbrt::NpzArchive values = data.takeParams(params);
    bool applied = optimizer.apply(values, grads, error);
    data.setParams(params, std::move(values));
    return applied;
  }

  ModelData &data;
  std::vector<const ModelArg *> params;
  std::vector<bool> counted;
  zbrt::Optimizer &optimizer;
  std::vector<zbrt::NpyArray> savedParams;
  std::optional<zbrt::Optimizer> savedOptimizer;
};

} // namespace

std::unique_ptr<ParamUpdate>
zb::makeHostUpdate(ModelData &data, llvm::ArrayRef<const ModelArg *> params,
                   llvm::ArrayRef<bool> counted, zbrt::Optimizer &optimizer) {
  return std::make_unique<HostUpdate>(data, params, counted, optimizer);
}

//===----------------------------------------------------------------------===//
// Compiled
//===----------------------------------------------------------------------===//

namespace {

/// Memory a compiled update works in: the host's, or the device's (every
/// operation ordered on the compute stream; only download() waits).
class Memory {
public:
  explicit Memory(const zbrt::CUDARuntime *cuda) : cuda(cuda) {}
  Memory(const Memory &) = delete;
  Memory &operator=(const Memory &) = delete;
  ~Memory() {
    for (void *p : owned) {
      if (cuda)
        cuda->free(p);
      else
        std::free(p);
    }
  }

  /// `bytes` bytes (zeroed), freed with the memory.
  void *alloc(size_t bytes, std::string &error) {
    void *p = nullptr;
    if (cuda) {
      p = cuda->alloc(bytes, error);
    } else {
      p = std::calloc(bytes ? bytes : 1, 1);
      if (!p)
        error = "cannot allocate " + std::to_string(bytes) + " bytes";
    }
    if (!p)
      return nullptr;
    owned.push_back(p);
    if (cuda && !cuda->zero(p, bytes, error))
      return nullptr;
    return p;
  }
  bool copy(void *dst, const void *src, size_t bytes, std::string &error) {
    if (cuda)
      return cuda->copyOnDevice(dst, src, bytes, error);
    std::memcpy(dst, src, bytes);
    return true;
  }
  bool upload(void *dst, const void *host, size_t bytes, std::string &error) {
    if (cuda)
      return cuda->copyToDeviceAsync(dst, host, bytes, error);
    std::memcpy(dst, host, bytes);
    return true;
  }
  bool download(void *host, const void *src, size_t bytes, std::string &error) {
    if (cuda)
      return cuda->copyToHost(host, src, bytes, error);
    std::memcpy(host, src, bytes);
    return true;
  }
  bool onDevice() const { return cuda; }

private:
  const zbrt::CUDARuntime *cuda;
  std::vector<void *> owned;
};

class CompiledUpdate : public ParamUpdate {
public:
  CompiledUpdate(zbrt::EntryFn entry, ModelData &data,
                 llvm::ArrayRef<const ModelArg *> params,
                 llvm::ArrayRef<bool> counted, zbrt::Optimizer &optimizer,
                 const RankBuffers &buffers)
      : entry(entry), data(data), params(params.begin(), params.end()),
        counted(counted.begin(), counted.end()), optimizer(optimizer),
        buffers(buffers), memory(buffers.cuda),
        kind(compiledOptimizerKind(optimizer.getConfig())),
        step(optimizer.getStep()) {}

  /// The state from the host optimizer, and the buffer of the hyper-
  /// parameters.
  bool init(std::string &error) {
    int64_t states = optimizer::numStates(kind);
    for (int64_t s = 0; s < states; ++s) {
      const zbrt::NpzArchive &host = optimizer.stateArrays(s);
      for (const ModelArg *p : params) {
        size_t bytes = hostParam(p).data.size();
        void *buffer = memory.alloc(bytes, error);
        if (!buffer)
          return false;
        state[s].push_back(buffer);
        auto it = host.find(p->name);
        if (it == host.end())
          continue;
        if (it->second.data.size() != bytes) {
          error = "the optimizer state of '" + p->name +
                  "' does not match the parameter";
          return false;
        }
        if (!memory.upload(buffer, it->second.data.data(), bytes, error))
          return false;
      }
    }
    hyper = memory.alloc(optimizer::kNumHyper * sizeof(double), error);
    return hyper;
  }

  bool addSquares(const zbrt::NpzArchive &, double &squares, double &nonFinite,
                  std::string &error) override {
    if (buffers.gradSquares.size() != params.size()) {
      error = "the step computed no sums of squares of its gradients";
      return false;
    }
    uploads = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!counted[i])
        continue;
      double sum = buffers.gradSquares[i];
      if (std::isfinite(sum))
        squares += sum;
      else
        nonFinite += 1;
    }
    return true;
  }

  bool save(std::string &error) override {
    if (saved.empty())
      for (size_t i = 0; i < written().size(); ++i) {
        saved.push_back(memory.alloc(bytesOf(i), error));
        if (!saved.back())
          return false;
      }
    std::vector<void *> live = written();
    for (size_t i = 0; i < live.size(); ++i)
      if (!memory.copy(saved[i], live[i], bytesOf(i), error))
        return false;
    savedStep = step;
    return true;
  }

  bool update(const zbrt::NpzArchive &grads, double clipScale,
              std::string &error) override {
    // The source of an upload must outlive it: a step updates at most
    // twice (optimistically, then redone) between two waits (the step's
    // read-back, after which addSquares() starts the count again).
    if (uploads == 2) {
      error = "more than two compiled updates in one step";
      return false;
    }
    std::array<double, optimizer::kNumHyper> &values = hyperValues[uploads++];
    values = compiledOptimizerHyper(optimizer.getConfig(), step + 1, clipScale);
    if (!memory.upload(hyper, values.data(), sizeof(values), error))
      return false;
    size_t n = params.size();
    std::vector<zbrt::NpyArray *> arrays;
    std::vector<void *> pointers;
    for (size_t i = 0; i < n; ++i) {
      arrays.push_back(&hostParam(params[i]));
      pointers.push_back(paramPointer(i));
    }
    for (size_t i = 0; i < n; ++i) {
      arrays.push_back(&hostParam(params[i]));
      pointers.push_back(gradPointer(grads, i));
    }
    for (int64_t s = 0, e = optimizer::numStates(kind); s < e; ++s)
      for (size_t i = 0; i < n; ++i) {
        arrays.push_back(&hostParam(params[i]));
        pointers.push_back(state[s][i]);
      }
    zbrt::NpyArray hyperShape{zbrt::DType::F64, {optimizer::kNumHyper}, {}};
    arrays.push_back(&hyperShape);
    pointers.push_back(hyper);
    zbrt::callEntry(entry, arrays, &pointers);
    ++step;
    return true;
  }

  bool restore(std::string &error) override {
    std::vector<void *> live = written();
    for (size_t i = 0; i < live.size(); ++i)
      if (!memory.copy(live[i], saved[i], bytesOf(i), error))
        return false;
    step = savedStep;
    return true;
  }

  bool syncToHost(std::string &error) override {
    if (memory.onDevice())
      for (size_t i = 0; i < params.size(); ++i) {
        zbrt::NpyArray &p = hostParam(params[i]);
        if (!memory.download(p.data.data(), paramPointer(i), p.data.size(),
                             error))
          return false;
      }
    // The state as zbrt::Optimizer keeps it: none before the first step.
    zbrt::NpzArchive host[2];
    if (step > 0)
      for (int64_t s = 0, e = optimizer::numStates(kind); s < e; ++s)
        for (size_t i = 0; i < params.size(); ++i) {
          zbrt::NpyArray array = hostParam(params[i]);
          if (!memory.download(array.data.data(), state[s][i],
                               array.data.size(), error))
            return false;
          host[s][params[i]->name] = std::move(array);
        }
    optimizer.setState(step, std::move(host[0]), std::move(host[1]));
    return true;
  }

private:
  zbrt::NpyArray &hostParam(const ModelArg *p) {
    return data.values()[p->position];
  }
  void *paramPointer(size_t i) {
    return buffers.cuda ? buffers.params[i] : hostParam(params[i]).data.data();
  }
  void *gradPointer(const zbrt::NpzArchive &grads, size_t i) {
    if (buffers.cuda)
      return buffers.grads[i];
    // The entry only reads it.
    return const_cast<char *>(grads.at(params[i]->name).data.data());
  }
  /// What an update writes: the parameters, then the state.
  std::vector<void *> written() {
    std::vector<void *> all;
    for (size_t i = 0; i < params.size(); ++i)
      all.push_back(paramPointer(i));
    for (int64_t s = 0, e = optimizer::numStates(kind); s < e; ++s)
      all.insert(all.end(), state[s].begin(), state[s].end());
    return all;
  }
  size_t bytesOf(size_t buffer) {
    return hostParam(params[buffer % params.size()]).data.size();
  }

  zbrt::EntryFn entry;
  ModelData &data;
  std::vector<const ModelArg *> params;
  std::vector<bool> counted;
  zbrt::Optimizer &optimizer;
  const RankBuffers &buffers;
  Memory memory;
  optimizer::Kind kind;
  /// Steps taken, and as save() found it.
  int64_t step, savedStep = 0;
  std::vector<void *> state[2];
  void *hyper = nullptr;
  /// The host copies of the hyper-parameters uploaded since the step's
  /// read-back.
  std::array<double, optimizer::kNumHyper> hyperValues[2];
  int uploads = 0;
  std::vector<void *> saved;
};

} // namespace

std::unique_ptr<ParamUpdate>
zb::makeCompiledUpdate(zbrt::EntryFn update, ModelData &data,
                       llvm::ArrayRef<const ModelArg *> params,
                       llvm::ArrayRef<bool> counted, zbrt::Optimizer &optimizer,
                       const RankBuffers &buffers, std::string &error) {
  auto compiled = std::make_unique<CompiledUpdate>(update, data, params,
                                                   counted, optimizer, buffers);
  if (!compiled->init(error))
    return nullptr;
  return compiled;
}
