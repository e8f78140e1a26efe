//===- CompiledOptimizerTest.cpp - Compiled updates vs the runtime's
//-------===//
//
// Part of ZeroBubble MLIR.
//
// --zb-emit-optimizer's update, compiled for the CPU and called through its
// entry point, against zbrt::Optimizer (an independent loop in C++) on the
// same parameters and gradients: SGD with weight decay, SGD with momentum,
// AdamW; f32 and f64 parameters of several ranks (0-d included); a clipped
// step in the middle. The parameters and the state must agree bit for bit
// after every step.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/CompiledOptimizer.h"
#include "zb/Target/CPUCompiler.h"

#include "zbrt/Executable.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstring>
#include <gtest/gtest.h>
#include <random>

using namespace zb;

namespace {

/// A step function whose parameters the update takes: f32 [3, 5] and [5],
/// f64 [4], f32 scalar.
constexpr const char *kModule = R"mlir(
func.func @zb_rank0_step(%w: tensor<3x5xf32>, %b: tensor<5xf32>,
                         %d: tensor<4xf64>, %s: tensor<f32>) -> tensor<f32>
    attributes {zb.rank = 0 : i64, zb.params = ["w", "b", "d", "s"]} {
  return %s : tensor<f32>
}
)mlir";

struct Param {
  const char *name;
  zbrt::DType dtype;
  std::vector<int64_t> shape;
};
const Param kParams[] = {{"w", zbrt::DType::F32, {3, 5}},
                         {"b", zbrt::DType::F32, {5}},
                         {"d", zbrt::DType::F64, {4}},
                         {"s", zbrt::DType::F32, {}}};

zbrt::NpyArray randomArray(const Param &p, std::mt19937 &gen) {
  zbrt::NpyArray a;
  a.dtype = p.dtype;
  a.shape = p.shape;
  int64_t n = 1;
  for (int64_t d : p.shape)
    n *= d;
  a.data.resize(n * zbrt::dtypeSize(p.dtype));
  std::normal_distribution<double> normal;
  for (int64_t i = 0; i < n; ++i) {
    if (p.dtype == zbrt::DType::F32)
      a.as<float>()[i] = static_cast<float>(normal(gen));
    else
      a.as<double>()[i] = normal(gen);
  }
  return a;
}

/// zb-run's clipping: f32 gradients times the factor rounded to f32.
zbrt::NpyArray scaled(const zbrt::NpyArray &g, double coef) {
  zbrt::NpyArray out = g;
  for (int64_t i = 0, e = g.numElements(); i < e; ++i) {
    if (g.dtype == zbrt::DType::F32)
      out.as<float>()[i] = g.as<float>()[i] * static_cast<float>(coef);
    else
      out.as<double>()[i] = g.as<double>()[i] * coef;
  }
  return out;
}

/// Compiles the module's update for `kind` into `dir` and returns its
/// entry point (the object stays open in `object`).
zbrt::EntryFn compileUpdate(optimizer::Kind kind, const std::string &dir,
                            std::unique_ptr<zbrt::SharedObject> &object) {
  std::string path = dir + "/" + optimizer::kindName(kind).str() + ".so";
  std::string error;
  EXPECT_TRUE(
      compileOptimizerUpdates(kModule, kind, CPUCompileOptions(), path, error))
      << error;
  object = zbrt::SharedObject::open(path, error);
  EXPECT_TRUE(object) << error;
  if (!object)
    return nullptr;
  zbrt::EntryFn entry =
      object->lookup(kEntryPrefix.str() + optimizer::updateFunction(0), error);
  EXPECT_TRUE(entry) << error;
  return entry;
}

bool sameBits(const zbrt::NpyArray &a, const zbrt::NpyArray &b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.data == b.data;
}

void checkAgainstRuntime(const zbrt::OptimizerConfig &config) {
  optimizer::Kind kind = compiledOptimizerKind(config);
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("zb-compiled-opt", dir));
  std::unique_ptr<zbrt::SharedObject> object;
  zbrt::EntryFn update = compileUpdate(kind, dir.str().str(), object);
  ASSERT_TRUE(update);

  std::mt19937 gen(7);
  zbrt::NpzArchive hostParams;
  std::vector<zbrt::NpyArray> params, states;
  for (const Param &p : kParams) {
    params.push_back(randomArray(p, gen));
    hostParams[p.name] = params.back();
  }
  int64_t numStates = optimizer::numStates(kind);
  for (int64_t s = 0; s < numStates; ++s)
    for (const zbrt::NpyArray &p : params) {
      zbrt::NpyArray zero = p;
      std::fill(zero.data.begin(), zero.data.end(), 0);
      states.push_back(zero);
    }
  zbrt::Optimizer host(config);
  const double coefs[] = {1.0, 0.37, 1.0, 2.5};
  for (int64_t step = 1; step <= 4; ++step) {
    double coef = coefs[step - 1];
    std::vector<zbrt::NpyArray> grads;
    zbrt::NpzArchive hostGrads;
    for (const Param &p : kParams) {
      grads.push_back(randomArray(p, gen));
      hostGrads[p.name] = scaled(grads.back(), coef);
    }
    std::string error;
    ASSERT_TRUE(host.apply(hostParams, hostGrads, error)) << error;

    std::array<double, optimizer::kNumHyper> values =
        compiledOptimizerHyper(config, step, coef);
    zbrt::NpyArray hyper{zbrt::DType::F64,
                         {optimizer::kNumHyper},
                         std::vector<char>(sizeof(values))};
    std::memcpy(hyper.data.data(), values.data(), sizeof(values));
    std::vector<zbrt::NpyArray *> args;
    for (zbrt::NpyArray &p : params)
      args.push_back(&p);
    for (zbrt::NpyArray &g : grads)
      args.push_back(&g);
    for (zbrt::NpyArray &s : states)
      args.push_back(&s);
    args.push_back(&hyper);
    zbrt::callEntry(update, args);

    zbrt::NpzArchive hostState = host.exportState();
    const char *prefixes[2] = {kind == optimizer::Kind::AdamW ? "adam.m."
                                                              : "sgd.momentum.",
                               "adam.v."};
    for (size_t i = 0; i < std::size(kParams); ++i) {
      const char *name = kParams[i].name;
      EXPECT_TRUE(sameBits(params[i], hostParams.at(name)))
          << optimizer::kindName(kind).str() << " step " << step
          << ": parameter " << name;
      for (int64_t s = 0; s < numStates; ++s)
        EXPECT_TRUE(sameBits(states[s * params.size() + i],
                             hostState.at(prefixes[s] + std::string(name))))
            << optimizer::kindName(kind).str() << " step " << step << ": state "
            << s << " of " << name;
    }
  }
  llvm::sys::fs::remove_directories(dir);
}

TEST(CompiledOptimizerTest, SGDWithWeightDecayMatchesTheRuntime) {
  checkAgainstRuntime(zbrt::Optimizer::sgd(0.1, 0.0, 0.01).getConfig());
}

TEST(CompiledOptimizerTest, SGDWithMomentumMatchesTheRuntime) {
  checkAgainstRuntime(zbrt::Optimizer::sgd(0.05, 0.9, 0.02).getConfig());
}

TEST(CompiledOptimizerTest, AdamWMatchesTheRuntime) {
  checkAgainstRuntime(
      zbrt::Optimizer::adamw(1e-2, 0.9, 0.95, 1e-6, 0.1).getConfig());
}

TEST(CompiledOptimizerTest, HyperParametersFollowTheStep) {
  zbrt::OptimizerConfig config =
      zbrt::Optimizer::adamw(0.5, 0.5, 0.75, 1e-8, 0.2).getConfig();
  auto first = compiledOptimizerHyper(config, 1, 1.0);
  auto second = compiledOptimizerHyper(config, 2, 0.5);
  EXPECT_EQ(first[optimizer::kFirstStep], 1.0);
  EXPECT_EQ(second[optimizer::kFirstStep], 0.0);
  EXPECT_EQ(first[optimizer::kCorrection1], 0.5);   // 1 - 0.5
  EXPECT_EQ(second[optimizer::kCorrection1], 0.75); // 1 - 0.25
  EXPECT_EQ(second[optimizer::kCorrection2], 1.0 - 0.5625);
  EXPECT_EQ(second[optimizer::kDecay], 0.9); // 1 - 0.5 * 0.2
  EXPECT_EQ(second[optimizer::kClipScale], 0.5);
  EXPECT_EQ(compiledOptimizerKind(config), optimizer::Kind::AdamW);
  EXPECT_EQ(compiledOptimizerKind(zbrt::Optimizer::sgd(0.1).getConfig()),
            optimizer::Kind::SGD);
  EXPECT_EQ(compiledOptimizerKind(zbrt::Optimizer::sgd(0.1, 0.9).getConfig()),
            optimizer::Kind::SGDMomentum);
}

} // namespace
