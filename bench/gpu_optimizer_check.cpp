//===- gpu_optimizer_check.cpp - The compiled update on the GPU -----------===//
//
// Part of ZeroBubble MLIR.
//
// Runs --zb-emit-optimizer's update compiled for the GPU (one kernel per
// parameter, on device buffers) for a few steps of SGD, SGD with momentum
// and AdamW, and compares the parameters and state with zbrt::Optimizer on
// the host after every step. On the CPU the two agree bit for bit
// (unittests/Driver/CompiledOptimizerTest.cpp); on the GPU the f64
// arithmetic may contract into FMAs, so each value must agree to 4 ulps
// of its type. It also checks the gradients' sums of squares (the norm
// check of a device-resident step, block reductions in f64) against the
// host's to 1e-12, and that an infinity makes its sum non-finite. Needs an
// NVIDIA GPU (bench/gpu_check.sh runs it); without one
// it says so and exits 1. `--compile-to DIR` only compiles (bench/gpu_bundle.sh
// does, for GPU hosts without a C compiler), `--objects DIR` runs those.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/CompiledOptimizer.h"
#include "zb/Target/CPUCompiler.h"

#include "zbrt/CUDA.h"
#include "zbrt/Executable.h"

#include "llvm/Support/FileSystem.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

using namespace zb;

namespace {

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "zb-gpu-optimizer-check: error: %s\n", message.c_str());
  std::exit(1);
}

/// A step function with f32 [64, 300] and [300] and f64 [17] parameters.
constexpr const char *kModule = R"mlir(
func.func @zb_rank0_step(%w: tensor<64x300xf32>, %b: tensor<300xf32>,
                         %d: tensor<17xf64>) -> tensor<f32>
    attributes {zb.rank = 0 : i64, zb.params = ["w", "b", "d"]} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}
)mlir";

zbrt::NpyArray randomArray(zbrt::DType dtype, std::vector<int64_t> shape,
                           std::mt19937 &gen) {
  zbrt::NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  int64_t n = 1;
  for (int64_t d : a.shape)
    n *= d;
  a.data.resize(n * zbrt::dtypeSize(dtype));
  std::normal_distribution<double> normal;
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == zbrt::DType::F32)
      a.as<float>()[i] = static_cast<float>(normal(gen));
    else
      a.as<double>()[i] = normal(gen);
  }
  return a;
}

/// The largest difference between `a` and `b` in units of the last place
/// of `b`'s values.
double ulpsApart(const zbrt::NpyArray &a, const zbrt::NpyArray &b) {
  double worst = 0;
  for (int64_t i = 0, e = b.numElements(); i < e; ++i) {
    double x, y, ulp;
    if (b.dtype == zbrt::DType::F32) {
      x = a.as<float>()[i];
      y = b.as<float>()[i];
      ulp = std::nextafter(std::fabs(static_cast<float>(y)), INFINITY) -
            std::fabs(static_cast<float>(y));
    } else {
      x = a.as<double>()[i];
      y = b.as<double>()[i];
      ulp = std::nextafter(std::fabs(y), INFINITY) - std::fabs(y);
    }
    worst = std::max(worst, std::fabs(x - y) / ulp);
  }
  return worst;
}

/// The object of `kind`'s update in `dir`.
std::string objectPath(optimizer::Kind kind, const std::string &dir) {
  return dir + "/" + optimizer::kindName(kind).str() + ".so";
}

/// Compiles the update of `kind` for the GPU (host code for
/// $ZB_TARGET_CPU, else this machine) into `dir`; needs no GPU.
void compileTo(optimizer::Kind kind, const std::string &dir) {
  CPUCompileOptions target;
  target.target = "gpu";
  if (const char *cpu = std::getenv("ZB_TARGET_CPU"))
    target.cpu = cpu;
  std::string error;
  if (!compileOptimizerUpdates(kModule, kind, target, objectPath(kind, dir),
                               error))
    die(error);
}

/// The entry point `function` of `kind`'s object in `dir` (`object` keeps
/// it open).
zbrt::EntryFn load(optimizer::Kind kind, const std::string &dir,
                   std::unique_ptr<zbrt::SharedObject> &object,
                   const std::string &function = optimizer::updateFunction(0)) {
  std::string error;
  object = zbrt::SharedObject::open(objectPath(kind, dir), error);
  if (!object)
    die(error);
  zbrt::EntryFn entry = object->lookup(kEntryPrefix.str() + function, error);
  if (!entry)
    die(error);
  return entry;
}

/// Four steps of `config` on the GPU and on the host; the worst distance
/// in ulps over every parameter and state array.
double check(const zbrt::CUDARuntime &rt, const zbrt::OptimizerConfig &config,
             const std::string &dir) {
  optimizer::Kind kind = compiledOptimizerKind(config);
  std::unique_ptr<zbrt::SharedObject> object;
  zbrt::EntryFn update = load(kind, dir, object);
  const char *names[] = {"w", "b", "d"};
  std::vector<std::pair<zbrt::DType, std::vector<int64_t>>> shapes = {
      {zbrt::DType::F32, {64, 300}},
      {zbrt::DType::F32, {300}},
      {zbrt::DType::F64, {17}}};
  std::mt19937 gen(11);
  std::vector<zbrt::NpyArray> arrays; // params, grads, states, hyper
  zbrt::NpzArchive hostParams;
  for (size_t i = 0; i < shapes.size(); ++i) {
    arrays.push_back(randomArray(shapes[i].first, shapes[i].second, gen));
    hostParams[names[i]] = arrays.back();
  }
  for (size_t i = 0; i < shapes.size(); ++i) // gradients, set per step
    arrays.push_back(arrays[i]);
  int64_t states = optimizer::numStates(kind);
  for (int64_t s = 0; s < states; ++s)
    for (size_t i = 0; i < shapes.size(); ++i) {
      zbrt::NpyArray zero = arrays[i];
      std::fill(zero.data.begin(), zero.data.end(), 0);
      arrays.push_back(zero);
    }
  arrays.push_back(zbrt::NpyArray{zbrt::DType::F64,
                                  {optimizer::kNumHyper},
                                  std::vector<char>(optimizer::kNumHyper * 8)});
  std::string error;
  std::vector<void *> device;
  for (zbrt::NpyArray &a : arrays) {
    device.push_back(rt.alloc(a.data.size(), error));
    if (!device.back() ||
        !rt.copyToDevice(device.back(), a.data.data(), a.data.size(), error))
      die(error);
  }
  zbrt::Optimizer host(config);
  double worst = 0;
  const double coefs[] = {1.0, 0.37, 1.0, 2.5};
  size_t n = shapes.size();
  for (int64_t step = 1; step <= 4; ++step) {
    zbrt::NpzArchive hostGrads;
    for (size_t i = 0; i < n; ++i) {
      zbrt::NpyArray g = randomArray(shapes[i].first, shapes[i].second, gen);
      arrays[n + i] = g;
      if (!rt.copyToDevice(device[n + i], g.data.data(), g.data.size(), error))
        die(error);
      // zb-run's clipping: f32 gradients times the factor rounded to f32.
      for (int64_t j = 0, e = g.numElements(); j < e; ++j) {
        if (g.dtype == zbrt::DType::F32)
          g.as<float>()[j] *= static_cast<float>(coefs[step - 1]);
        else
          g.as<double>()[j] *= coefs[step - 1];
      }
      hostGrads[names[i]] = std::move(g);
    }
    auto hyper = compiledOptimizerHyper(config, step, coefs[step - 1]);
    std::memcpy(arrays.back().data.data(), hyper.data(), sizeof(hyper));
    if (!rt.copyToDevice(device.back(), hyper.data(), sizeof(hyper), error))
      die(error);
    if (!host.apply(hostParams, hostGrads, error))
      die(error);
    std::vector<zbrt::NpyArray *> args;
    for (zbrt::NpyArray &a : arrays)
      args.push_back(&a);
    zbrt::callEntry(update, args, &device);
    if (!rt.synchronize(error))
      die(error);
    zbrt::NpzArchive hostState = host.exportState();
    const char *prefixes[2] = {kind == optimizer::Kind::AdamW ? "adam.m."
                                                              : "sgd.momentum.",
                               "adam.v."};
    for (size_t i = 0; i < n; ++i) {
      zbrt::NpyArray got = arrays[i];
      if (!rt.copyToHost(got.data.data(), device[i], got.data.size(), error))
        die(error);
      worst = std::max(worst, ulpsApart(got, hostParams.at(names[i])));
      for (int64_t s = 0; s < states; ++s) {
        zbrt::NpyArray state = arrays[(2 + s) * n + i];
        if (!rt.copyToHost(state.data.data(), device[(2 + s) * n + i],
                           state.data.size(), error))
          die(error);
        worst = std::max(worst,
                         ulpsApart(state, hostState.at(prefixes[s] +
                                                       std::string(names[i]))));
      }
    }
  }
  for (void *p : device)
    rt.free(p);
  return worst;
}

/// @zb_rank0_grad_squares on the GPU (block reductions in f64) against
/// the sums of squares on the host: the worst relative difference over
/// random gradients; -1 when a gradient with an infinity does not give a
/// non-finite sum.
double checkSquares(const zbrt::CUDARuntime &rt, const std::string &dir) {
  std::unique_ptr<zbrt::SharedObject> object;
  zbrt::EntryFn squares = load(optimizer::Kind::SGD, dir, object,
                               optimizer::gradSquaresFunction(0));
  std::vector<std::pair<zbrt::DType, std::vector<int64_t>>> shapes = {
      {zbrt::DType::F32, {64, 300}},
      {zbrt::DType::F32, {300}},
      {zbrt::DType::F64, {17}}};
  std::mt19937 gen(5);
  std::string error;
  double worst = 0;
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<zbrt::NpyArray> grads;
    for (auto &[dtype, shape] : shapes)
      grads.push_back(randomArray(dtype, shape, gen));
    // The last trial: an infinity in the first gradient.
    if (trial == 2)
      grads[0].as<float>()[1234] = INFINITY;
    size_t n = grads.size();
    std::vector<zbrt::NpyArray *> args;
    std::vector<void *> device;
    for (zbrt::NpyArray &g : grads) {
      args.push_back(&g);
      device.push_back(rt.alloc(g.data.size(), error));
      if (!device.back() ||
          !rt.copyToDevice(device.back(), g.data.data(), g.data.size(), error))
        die(error);
    }
    void *sums = rt.alloc(n * sizeof(double), error);
    if (!sums)
      die(error);
    zbrt::NpyArray scalar{zbrt::DType::F64, {}, {}};
    for (size_t i = 0; i < n; ++i) {
      args.push_back(&scalar);
      device.push_back(static_cast<double *>(sums) + i);
    }
    zbrt::callEntry(squares, args, &device);
    std::vector<double> got(n);
    if (!rt.copyToHost(got.data(), sums, n * sizeof(double), error))
      die(error);
    for (size_t i = 0; i < n; ++i) {
      double want = 0;
      for (int64_t j = 0, e = grads[i].numElements(); j < e; ++j) {
        double v = grads[i].dtype == zbrt::DType::F32
                       ? grads[i].as<float>()[j]
                       : grads[i].as<double>()[j];
        want += v * v;
      }
      if (!std::isfinite(want)) {
        if (std::isfinite(got[i]))
          return -1;
        continue;
      }
      worst = std::max(worst, std::fabs(got[i] - want) / want);
    }
    for (size_t i = 0; i < n; ++i)
      rt.free(device[i]);
    rt.free(sums);
  }
  return worst;
}

} // namespace

int main(int argc, char **argv) {
  // --compile-to DIR: only compile the updates (for a bundle whose GPU host
  // has no C compiler); --objects DIR: run the updates compiled there;
  // neither: compile into a temporary directory and run.
  std::string compileDir, objectsDir;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "--compile-to" || arg == "--objects") && i + 1 < argc)
      (arg == "--compile-to" ? compileDir : objectsDir) = argv[++i];
    else
      die("usage: zb-gpu-optimizer-check [--compile-to DIR | --objects DIR]");
  }
  const optimizer::Kind kinds[] = {optimizer::Kind::SGD,
                                   optimizer::Kind::SGDMomentum,
                                   optimizer::Kind::AdamW};
  if (!compileDir.empty()) {
    if (llvm::sys::fs::create_directories(compileDir))
      die("cannot create '" + compileDir + "'");
    for (optimizer::Kind kind : kinds)
      compileTo(kind, compileDir);
    return 0;
  }
  std::string error;
  const zbrt::CUDARuntime *rt = zbrt::loadCUDARuntime(error);
  if (!rt)
    die(error);
  if (!rt->init(zbrt::selectCUDADevice(rt->deviceCount()), error))
    die(error);
  std::printf("device: %s\n", rt->deviceName().c_str());
  llvm::SmallString<128> temp;
  if (objectsDir.empty()) {
    if (llvm::sys::fs::createUniqueDirectory("zb-gpu-optimizer", temp))
      die("cannot create a temporary directory");
    objectsDir = temp.str().str();
    for (optimizer::Kind kind : kinds)
      compileTo(kind, objectsDir);
  }
  struct Case {
    const char *name;
    zbrt::OptimizerConfig config;
  } cases[] = {
      {"sgd (wd 0.01)", zbrt::Optimizer::sgd(0.1, 0.0, 0.01).getConfig()},
      {"sgd-momentum (0.9, wd 0.02)",
       zbrt::Optimizer::sgd(0.05, 0.9, 0.02).getConfig()},
      {"adamw (wd 0.1)",
       zbrt::Optimizer::adamw(1e-2, 0.9, 0.95, 1e-6, 0.1).getConfig()}};
  bool ok = true;
  for (const Case &c : cases) {
    double ulps = check(*rt, c.config, objectsDir);
    bool pass = ulps <= 4.0;
    ok &= pass;
    std::printf("compiled update on the GPU vs zbrt::Optimizer, %-28s "
                "4 steps: worst %.1f ulp  %s\n",
                c.name, ulps, pass ? "ok" : "FAIL (> 4 ulp)");
  }
  double relative = checkSquares(*rt, objectsDir);
  bool squaresPass = relative >= 0 && relative <= 1e-12;
  ok &= squaresPass;
  if (relative < 0)
    std::printf("compiled gradient sums of squares on the GPU: an infinite "
                "gradient gave a finite sum  FAIL\n");
  else
    std::printf("compiled gradient sums of squares on the GPU vs the host: "
                "worst relative difference %.2g  %s\n",
                relative, squaresPass ? "ok" : "FAIL (> 1e-12)");
  if (!temp.empty())
    llvm::sys::fs::remove_directories(temp);
  return ok ? 0 : 1;
}
