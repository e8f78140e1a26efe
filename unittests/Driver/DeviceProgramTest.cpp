//===- DeviceProgramTest.cpp - The device path of a rank program ----------===//
//
// Part of ZeroBubble MLIR.
//
// PipelineRankProgram's device path (`--backend nccl`: parameters,
// gradients, optimizer state and the steps' inputs in device buffers, the
// next step's inputs prefetched while a step runs, one read-back per step)
// run against a CUDARuntime whose "device memory" is host memory, with
// the rank program compiled for the CPU. Its training must equal the host
// path's (host arrays, zbrt::Optimizer) bit for bit. With the rank program
// compiled by the GPU lowering run on the host (EmulatedGPU), it must
// train like the CPU lowering, to rounding. The fake lands a
// prefetch only at the next await and zeroes its destination until then,
// so a step that reads its data before awaiting them, or a buffer freed
// under a pending prefetch, shows; the two input sets must alternate, and
// nothing is prefetched past the training loop's last step. The streams'
// real concurrency needs a GPU (bench/gpu_check.sh).
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/Compile.h"
#include "zb/Driver/CompiledOptimizer.h"
#include "zb/Driver/ModelFile.h"
#include "zb/Driver/Pipeline.h"
#include "zb/Driver/Programs.h"
#include "zb/Driver/Update.h"

#include "zbrt/Comm.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <set>

using namespace zb;

namespace {

/// What the host-memory device was asked to do. Prefetches are held back
/// until the next await (their destinations zeroed meanwhile), as a copy
/// stream could land them as late as that.
struct Calls {
  int prefetches = 0;
  int awaits = 0;
  int live = 0;
  /// Per batch of prefetches (those between two awaits): the first
  /// destination.
  std::vector<void *> batches;
  bool batchOpen = false;
  std::vector<std::pair<void *, std::vector<char>>> pending;
  std::set<void *> uploaded;
  /// A buffer freed while a prefetch into it was pending.
  bool freedPending = false;
};
Calls calls;

bool fakeInit(int, std::string &) { return true; }
int fakeCount() { return 1; }
std::string fakeName() { return "host memory"; }
std::unique_ptr<zbrt::Comm> fakeNCCL(std::unique_ptr<zbrt::Comm> host,
                                     std::string &) {
  return host;
}
void *fakeAlloc(size_t bytes, std::string &) {
  ++calls.live;
  // Garbage, as device memory would hold: nothing may rely on zeros.
  void *p = std::malloc(bytes ? bytes : 1);
  std::memset(p, 0x7f, bytes);
  return p;
}
void fakeFree(void *p) {
  if (!p)
    return;
  --calls.live;
  for (auto &[dst, bytes] : calls.pending)
    calls.freedPending |= dst == p;
  std::free(p);
}
bool fakeCopy(void *dst, const void *src, size_t bytes, std::string &) {
  std::memcpy(dst, src, bytes);
  return true;
}
bool fakeUpload(void *dst, const void *src, size_t bytes, std::string &) {
  calls.uploaded.insert(dst);
  std::memcpy(dst, src, bytes);
  return true;
}
bool fakeSync(std::string &) { return true; }
bool fakeZero(void *dst, size_t bytes, std::string &) {
  std::memset(dst, 0, bytes);
  return true;
}
bool fakePrefetch(void *dst, const void *src, size_t bytes, std::string &) {
  ++calls.prefetches;
  if (!calls.batchOpen)
    calls.batches.push_back(dst);
  calls.batchOpen = true;
  const char *from = static_cast<const char *>(src);
  calls.pending.emplace_back(dst, std::vector<char>(from, from + bytes));
  std::memset(dst, 0, bytes);
  return true;
}
bool fakeAwait(std::string &) {
  ++calls.awaits;
  calls.batchOpen = false;
  for (auto &[dst, bytes] : calls.pending)
    std::memcpy(dst, bytes.data(), bytes.size());
  calls.pending.clear();
  return true;
}

const zbrt::CUDARuntime kHostDevice = {
    fakeInit, fakeCount, fakeName,     fakeNCCL, fakeAlloc,
    fakeFree, fakeCopy,  fakeCopy,     fakeSync, fakeUpload,
    fakeCopy, fakeZero,  fakePrefetch, fakeAwait};

struct Trained {
  std::vector<double> losses;
  int clipped = 0;
  zbrt::NpzArchive params;
};

/// A rank program's entry points in one compiled object.
struct Entries {
  std::unique_ptr<LoadedProgram> object;
  zbrt::EntryFn step = nullptr, update = nullptr, squares = nullptr;
};

class DeviceProgram : public ::testing::Test {
protected:
  void SetUp() override { prepare(ZB_EXAMPLES_DIR "/mlp.mlir", "cpu"); }

  /// Lowers the model at `path` (one stage, AdamW) and compiles its rank
  /// program for the CPU (the host path's) and for `deviceTarget` (the
  /// device path's; the same object when that is "cpu"), each through the
  /// pipeline of its target, as zb-run does (`--zb-pipeline` target=gpu
  /// for a device target).
  void prepare(const std::string &path, const std::string &deviceTarget,
               const std::string &deviceDtype = "f32") {
    mlir::DialectRegistry registry;
    ModelFile::registerDialects(registry);
    context = std::make_unique<mlir::MLIRContext>(registry);
    std::string error;
    model = ModelFile::open(path, *context, error);
    ASSERT_TRUE(model) << error;
    llvm::SmallString<128> dir;
    ASSERT_FALSE(
        llvm::sys::fs::createUniqueDirectory("zb-device-program", dir));
    cacheDir = dir.str().str();

    ZBPipelineOptions pipeline;
    pipeline.stages = 1;
    pipeline.microbatches = kMicrobatches;
    pipeline.schedule = "1f1b";
    pipeline.lowerToCPU = false;
    pipeline.optimizer = "adamw";
    lowered = LoweredPipeline::lower(model->module(), pipeline, error);
    ASSERT_TRUE(lowered) << error;
    ASSERT_TRUE(lowered->rankProgram(0, info, error)) << error;
    ASSERT_NO_FATAL_FAILURE(compile(*lowered, "cpu", host));
    if (deviceTarget == "cpu")
      return;
    pipeline.target = "gpu";
    pipeline.dtype = deviceDtype;
    std::unique_ptr<LoweredPipeline> forDevice =
        LoweredPipeline::lower(model->module(), pipeline, error);
    ASSERT_TRUE(forDevice) << error;
    RankProgramInfo deviceInfo;
    ASSERT_TRUE(forDevice->rankProgram(0, deviceInfo, error)) << error;
    ASSERT_EQ(deviceInfo.stepFunction, info.stepFunction);
    ASSERT_EQ(deviceInfo.params, info.params);
    ASSERT_EQ(deviceInfo.countsInNorm, info.countsInNorm);
    ASSERT_NO_FATAL_FAILURE(
        compile(*forDevice, deviceTarget, device, deviceDtype));
  }

  /// Rank 0's program of `from` compiled for `target`, and its entry
  /// points.
  void compile(LoweredPipeline &from, const std::string &target, Entries &out,
               const std::string &dtype = "f32") {
    std::string error;
    mlir::OwningOpRef<mlir::ModuleOp> rank = from.keepRank(0, error);
    ASSERT_TRUE(rank) << error;
    CompileSettings settings;
    settings.cacheDir = cacheDir;
    settings.identity = "DeviceProgramTest";
    settings.target.target = target;
    settings.target.gpuDtype = dtype;
    llvm::Expected<CompileCache> cache = openCache(settings);
    ASSERT_TRUE(bool(cache)) << llvm::toString(cache.takeError());
    auto warn = [](const llvm::Twine &) {};
    llvm::Expected<std::unique_ptr<CacheEntry>> entry = compileCached(
        *rank, "device-program-test-" + target, settings, *cache, warn);
    ASSERT_TRUE(bool(entry)) << llvm::toString(entry.takeError());
    llvm::Expected<LoadedProgram> loaded = LoadedProgram::load(**entry);
    ASSERT_TRUE(bool(loaded)) << llvm::toString(loaded.takeError());
    out.object = std::make_unique<LoadedProgram>(std::move(*loaded));
    for (auto [fn, name] :
         {std::pair{&out.step, info.stepFunction},
          std::pair{&out.update, optimizer::updateFunction(0)},
          std::pair{&out.squares, optimizer::gradSquaresFunction(0)}}) {
      llvm::Expected<zbrt::EntryFn> found = out.object->entryPoint(name);
      ASSERT_TRUE(bool(found)) << llvm::toString(found.takeError());
      *fn = *found;
    }
  }

  /// The device path's entry points.
  const Entries &onDevice() const { return device.object ? device : host; }

  void TearDown() override { llvm::sys::fs::remove_directories(cacheDir); }

  ModelData makeData() {
    DataOptions options;
    options.seed = 3;
    options.microbatches = kMicrobatches;
    options.steps = dataSteps;
    return ModelData(model->signature(), options);
  }

  /// `steps` steps (of the data's dataSteps) of AdamW with every step
  /// clipped,
  /// on the host path or on the host-memory device with the compiled
  /// update.
  Trained train(const zbrt::CUDARuntime *cuda, int64_t steps = kSteps) {
    ModelData data = makeData();
    std::string error = data.prepare();
    EXPECT_TRUE(error.empty()) << error;
    std::vector<const ModelArg *> params = info.paramArgs(model->signature());
    zbrt::Optimizer optimizer = zbrt::Optimizer::adamw(1e-2);
    llvm::SmallVector<bool> counted(info.countsInNorm.begin(),
                                    info.countsInNorm.end());
    std::unique_ptr<zbrt::Comm> comm = zbrt::createLocalComm();
    Trained out;
    const Entries &code = cuda ? onDevice() : host;
    {
      PipelineRankProgram program(data, params, code.step, *comm, cuda,
                                  /*recordActions=*/false);
      TrainingContext run{*comm, *comm, 1, 0, data, params, counted, optimizer};
      std::unique_ptr<ParamUpdate> compiled;
      if (cuda) {
        program.computeGradSquares(code.squares);
        compiled = makeCompiledUpdate(code.update, data, params, counted,
                                      optimizer, program.rankBuffers(), error);
        EXPECT_TRUE(compiled) << error;
        run.update = compiled.get();
      }
      TrainingOptions loop;
      loop.steps = steps;
      // Every step clipped: the optimistic update is rolled back and redone.
      loop.check.clipGradNorm = 1e-3;
      TrainingResult result;
      EXPECT_TRUE(zb::train(program, run, loop, result, error)) << error;
      out.losses = result.losses;
      for (const StepCheck &check : result.checks)
        out.clipped += check.clipped;
    }
    out.params = data.paramArchive(params);
    return out;
  }

  static constexpr int64_t kMicrobatches = 2;
  static constexpr int64_t kSteps = 5;
  int64_t dataSteps = kSteps;
  std::unique_ptr<mlir::MLIRContext> context;
  std::unique_ptr<ModelFile> model;
  std::string cacheDir;
  std::unique_ptr<LoweredPipeline> lowered;
  RankProgramInfo info;
  Entries host, device;
};

/// Equal losses and parameters.
void expectEqual(const Trained &host, const Trained &device, int64_t steps) {
  ASSERT_EQ(host.losses.size(), size_t(steps));
  ASSERT_EQ(device.losses.size(), size_t(steps));
  for (int64_t s = 0; s < steps; ++s)
    EXPECT_EQ(host.losses[s], device.losses[s]) << "step " << s;
  EXPECT_EQ(host.clipped, int(steps));
  EXPECT_EQ(device.clipped, int(steps));
  ASSERT_EQ(host.params.size(), device.params.size());
  for (const auto &[name, value] : host.params) {
    auto it = device.params.find(name);
    ASSERT_NE(it, device.params.end()) << name;
    EXPECT_EQ(value.data, it->second.data) << name;
  }
}

TEST_F(DeviceProgram, TrainsLikeTheHostPath) {
  Trained host = train(nullptr);
  calls = Calls();
  Trained device = train(&kHostDevice);
  expectEqual(host, device, kSteps);
  // The steps saw different data, so a stale input would show.
  EXPECT_NE(host.losses[1], host.losses[2]);
  // Two data arguments (x, labels): the first step uploads them, each
  // later step's are prefetched during the step before, into the set the
  // step before last used.
  size_t numData = model->signature().args.size() - host.params.size();
  EXPECT_EQ(calls.prefetches, int((kSteps - 1) * numData));
  EXPECT_EQ(calls.awaits, int(kSteps - 1));
  ASSERT_EQ(calls.batches.size(), size_t(kSteps - 1));
  EXPECT_FALSE(calls.uploaded.count(calls.batches[0]))
      << "step 1's data went to step 0's set";
  EXPECT_TRUE(calls.uploaded.count(calls.batches[1]))
      << "step 2's data did not go to step 0's set";
  for (size_t i = 0; i + 1 < calls.batches.size(); ++i)
    EXPECT_NE(calls.batches[i], calls.batches[i + 1]) << "batch " << i;
  for (size_t i = 0; i + 2 < calls.batches.size(); ++i)
    EXPECT_EQ(calls.batches[i], calls.batches[i + 2]) << "batch " << i;
  EXPECT_EQ(calls.live, 0) << "device buffers leaked";
}

TEST_F(DeviceProgram, PrefetchesNoStepPastTheLoop) {
  // The loop runs 3 of the data's 5 steps: nothing is prefetched for step
  // 3.
  Trained host = train(nullptr, 3);
  calls = Calls();
  Trained device = train(&kHostDevice, 3);
  expectEqual(host, device, 3);
  size_t numData = model->signature().args.size() - host.params.size();
  EXPECT_EQ(calls.prefetches, int(2 * numData));
  EXPECT_EQ(calls.live, 0) << "device buffers leaked";
}

/// The GPU lowering run on the host (--zb-lower-to-gpu="emulate=true": its
/// kernels as loops, blocks and threads in order) on the device path
/// against the CPU lowering on the host path, for a GPT of context 64: its
/// attention softmax, LayerNorms and loss are row kernels, forward and
/// backward, its bias gradients (256 rows) two-kernel column reductions,
/// its optimizer update and gradient norm compiled for the device. The
/// sums run in other orders (a block's tree against the CPU's vector
/// lanes), so losses and parameters agree to rounding, not bit for bit.
class EmulatedGPU : public DeviceProgram {
protected:
  void SetUp() override {
    prepare(ZB_TEST_INPUTS_DIR "/gpt_context64.mlir", "gpu-emulated");
  }
};

/// Losses within 1e-5 relative and parameters within 1e-4: the sums run in
/// other orders.
void expectClose(const Trained &cpu, const Trained &gpu, int64_t steps) {
  ASSERT_EQ(cpu.losses.size(), size_t(steps));
  ASSERT_EQ(gpu.losses.size(), size_t(steps));
  for (int64_t s = 0; s < steps; ++s)
    EXPECT_NEAR(cpu.losses[s], gpu.losses[s], 1e-5 * std::abs(cpu.losses[s]))
        << "step " << s;
  EXPECT_NE(cpu.losses[0], cpu.losses[steps - 1]);
  EXPECT_EQ(cpu.clipped, int(steps));
  EXPECT_EQ(gpu.clipped, int(steps));
  ASSERT_EQ(cpu.params.size(), gpu.params.size());
  // NaN counts as the worst.
  double worst = 0;
  std::string worstName;
  for (const auto &[name, value] : cpu.params) {
    auto it = gpu.params.find(name);
    ASSERT_NE(it, gpu.params.end()) << name;
    ASSERT_EQ(value.dtype, zbrt::DType::F32) << name;
    ASSERT_EQ(value.numElements(), it->second.numElements()) << name;
    const float *a = value.as<float>(), *b = it->second.as<float>();
    for (int64_t i = 0; i < value.numElements(); ++i) {
      double diff = std::abs(double(a[i]) - double(b[i]));
      if (!(diff <= worst)) {
        worst = diff;
        worstName = name;
      }
    }
  }
  // AdamW's update is steep in gradients near its epsilon, so a rounding
  // difference there moves a parameter by more than elsewhere.
  EXPECT_LT(worst, 1e-4) << "in " << worstName;
}

TEST_F(EmulatedGPU, TrainsLikeTheCPULowering) {
  // Two programs loaded at once stay two (the loader takes an object whose
  // path names a loaded one for that one).
  EXPECT_NE(host.step, device.step);
  Trained cpu = train(nullptr);
  calls = Calls();
  Trained gpu = train(&kHostDevice);
  expectClose(cpu, gpu, kSteps);
  EXPECT_EQ(calls.live, 0) << "device buffers leaked";
}

/// More models through the emulated GPU lowering against the CPU's:
/// examples/moe.mlir, whose experts are grouped products, which the GPU
/// lowering expands to every expert's batched gemm (the CPU's multiplies
/// each expert's rows), its router an integer row reduction; an MLP
/// with training-mode dropout, whose mask (an integer hash of the
/// microbatch's {zb.rng} key and each element's position) a device kernel
/// computes; and an MLP with other draws from the key (randn's Box-Muller
/// log and cos, a drop path's floor, uniform_, normal_).
class EmulatedGPUModel : public DeviceProgram,
                         public ::testing::WithParamInterface<const char *> {
protected:
  void SetUp() override { prepare(GetParam(), "gpu-emulated"); }
};

TEST_P(EmulatedGPUModel, TrainsLikeTheCPULowering) {
  Trained cpu = train(nullptr);
  calls = Calls();
  Trained gpu = train(&kHostDevice);
  expectClose(cpu, gpu, kSteps);
  EXPECT_EQ(calls.live, 0) << "device buffers leaked";
}

INSTANTIATE_TEST_SUITE_P(ExpertsAndDraws, EmulatedGPUModel,
                         ::testing::Values(ZB_EXAMPLES_DIR "/moe.mlir",
                                           ZB_TEST_INPUTS_DIR
                                           "/dropout_mlp.mlir",
                                           ZB_TEST_INPUTS_DIR
                                           "/noise_mlp.mlir"));

/// Mixed precision on the device (`dtype=bf16`): the gemms multiply bf16
/// inputs (emulated: rounded, then the host's f32 gemm) and the stashes are
/// bf16, with f32 parameters, optimizer state and sums. Over 20 steps the
/// losses stay within 1e-2 relative of the CPU's f32 and the run learns.
class EmulatedGPUBF16 : public DeviceProgram {
protected:
  void SetUp() override {
    dataSteps = 20;
    prepare(ZB_TEST_INPUTS_DIR "/gpt_context64.mlir", "gpu-emulated", "bf16");
  }
};

TEST_F(EmulatedGPUBF16, TrainsWithinOnePercentOfF32) {
  Trained f32 = train(nullptr, dataSteps);
  calls = Calls();
  Trained bf16 = train(&kHostDevice, dataSteps);
  ASSERT_EQ(f32.losses.size(), size_t(dataSteps));
  ASSERT_EQ(bf16.losses.size(), size_t(dataSteps));
  double worst = 0;
  for (int64_t s = 0; s < dataSteps; ++s) {
    double relative =
        std::abs(bf16.losses[s] - f32.losses[s]) / std::abs(f32.losses[s]);
    EXPECT_LT(relative, 1e-2) << "step " << s;
    worst = std::max(worst, relative);
  }
  // bf16 changes the numbers (else nothing was narrowed), and the run
  // learns.
  EXPECT_GT(worst, 1e-6);
  EXPECT_LT(bf16.losses.back(), bf16.losses.front());
  EXPECT_EQ(calls.live, 0) << "device buffers leaked";
}

TEST_F(DeviceProgram, WaitsForAPrefetchBeforeFreeing) {
  // Steps run without train(): the program prefetches the next step's data
  // after each, so one prefetch is pending when it goes.
  ModelData data = makeData();
  ASSERT_EQ(data.prepare(), "");
  std::vector<const ModelArg *> params = info.paramArgs(model->signature());
  std::unique_ptr<zbrt::Comm> comm = zbrt::createLocalComm();
  calls = Calls();
  {
    PipelineRankProgram program(data, params, host.step, *comm, &kHostDevice,
                                /*recordActions=*/false);
    std::vector<zbrt::NpyArray> grads;
    program.run(0, grads);
    program.run(1, grads);
    EXPECT_EQ(calls.pending.size(), calls.uploaded.size() - params.size());
  }
  EXPECT_FALSE(calls.freedPending) << "freed under a pending prefetch";
  EXPECT_TRUE(calls.pending.empty());
  EXPECT_EQ(calls.live, 0) << "device buffers leaked";
}

} // namespace
