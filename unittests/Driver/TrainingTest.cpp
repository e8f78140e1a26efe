//===- TrainingTest.cpp - A run's data and the training loop --------------===//
//
// Part of ZeroBubble MLIR.
//
// The loop runs a step program whose loss and gradients are known in closed
// form (a quadratic), so that updates, clipping, skipped steps and resuming
// are checked against hand-computed values, not against a second caller of
// the same code.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/Training.h"
#include "zb/Driver/ModelData.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"

#include <cmath>
#include <gtest/gtest.h>
#include <map>

using namespace zb;

namespace {

/// A signature with one f32 parameter "w" of `n` elements and one f32 data
/// argument "x" of shape [2, 3].
struct TinyModel {
  explicit TinyModel(int64_t n = 4) {
    auto f32 = mlir::Float32Type::get(&context);
    signature.args.push_back(
        {ModelArg::Kind::Param, "w", 0, mlir::RankedTensorType::get({n}, f32)});
    signature.args.push_back({ModelArg::Kind::Data, "x", 1,
                              mlir::RankedTensorType::get({2, 3}, f32)});
  }
  mlir::MLIRContext context;
  ModelSignature signature;
};

zbrt::NpyArray f32Array(std::vector<int64_t> shape, std::vector<float> values) {
  zbrt::NpyArray a{zbrt::DType::F32, std::move(shape), {}};
  a.data.resize(values.size() * sizeof(float));
  std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

std::vector<float> floats(const zbrt::NpyArray &a) {
  std::vector<float> out(a.numElements());
  std::memcpy(out.data(), a.data.data(), out.size() * sizeof(float));
  return out;
}

TEST(ModelData, ConvertsWithinFloatsAndWithinIntegers) {
  zbrt::NpyArray a{zbrt::DType::F64, {2}, std::vector<char>(16)};
  a.as<double>()[0] = 1.5;
  a.as<double>()[1] = -2.25;
  ASSERT_TRUE(convertArray(a, zbrt::DType::F32));
  EXPECT_EQ(a.dtype, zbrt::DType::F32);
  EXPECT_EQ(floats(a), (std::vector<float>{1.5f, -2.25f}));
  zbrt::NpyArray i{zbrt::DType::I32, {1}, std::vector<char>(4)};
  i.as<int32_t>()[0] = -7;
  ASSERT_TRUE(convertArray(i, zbrt::DType::I64));
  EXPECT_EQ(i.as<int64_t>()[0], -7);
  EXPECT_FALSE(convertArray(i, zbrt::DType::F32));
  EXPECT_EQ(i.dtype, zbrt::DType::I64);
}

// Replica r of D takes microbatches r*M .. r*M+M-1 of the step's D*M: its
// synthetic data is the one-replica run's over D*M microbatches.
TEST(ModelData, ReplicasSliceTheStepsMicrobatches) {
  TinyModel model;
  const ModelArg &x = model.signature.args[1];
  DataOptions all;
  all.seed = 3;
  all.microbatches = 4;
  all.steps = 2;
  ModelData whole(model.signature, all);
  ASSERT_EQ(whole.prepare(), "");
  for (int64_t replica = 0; replica < 2; ++replica) {
    DataOptions mine = all;
    mine.microbatches = 2;
    mine.replicas = 2;
    mine.replica = replica;
    ModelData part(model.signature, mine);
    ASSERT_EQ(part.prepare(), "");
    for (int64_t step = 0; step < 2; ++step) {
      std::vector<float> expected = floats(whole.stepData(x, step));
      std::vector<float> got = floats(part.stepData(x, step));
      ASSERT_EQ(got.size() * 2, expected.size());
      EXPECT_TRUE(std::equal(got.begin(), got.end(),
                             expected.begin() + replica * got.size()));
      part.bindMicrobatch(step, 1);
      std::vector<float> one = floats(part.values()[1]);
      EXPECT_TRUE(std::equal(one.begin(), one.end(), got.begin() + one.size()));
    }
  }
}

class ModelDataFiles : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> path;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("zb-data-test", path));
    dir = std::string(path);
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }
  std::string write(const std::string &name, const zbrt::NpzArchive &a) {
    std::string path = dir + "/" + name, error;
    EXPECT_TRUE(zbrt::writeNpz(path, a, error)) << error;
    return path;
  }
  std::string dir;
};

// --inputs [K][D*M][shape]: replica 1 of 2, M = 1, takes element [k][1].
TEST_F(ModelDataFiles, InputsHoldEveryStepAndReplica) {
  TinyModel model;
  std::vector<float> values(2 * 2 * 6);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = float(i);
  DataOptions options;
  options.inputsPath = write("in.npz", {{"x", f32Array({2, 2, 2, 3}, values)}});
  options.steps = 2;
  options.replicas = 2;
  options.replica = 1;
  ModelData data(model.signature, options);
  ASSERT_EQ(data.prepare(), "");
  for (int64_t step = 0; step < 2; ++step) {
    std::vector<float> got =
        floats(data.stepData(model.signature.args[1], step));
    std::vector<float> expected(values.begin() + (step * 2 + 1) * 6,
                                values.begin() + (step * 2 + 2) * 6);
    EXPECT_EQ(got, expected);
  }
}

TEST_F(ModelDataFiles, BadFilesAreNamed) {
  TinyModel model;
  DataOptions options;
  options.inputsPath =
      write("in.npz", {{"x", f32Array({3, 2, 3}, std::vector<float>(18))}});
  options.microbatches = 2;
  std::string error = ModelData(model.signature, options).prepare();
  EXPECT_NE(error.find("data array 'x'"), std::string::npos) << error;
  EXPECT_NE(error.find("[3, 2, 3]"), std::string::npos) << error;
  EXPECT_NE(error.find("[2, 2, 3]"), std::string::npos) << error;

  options = DataOptions();
  options.paramsPath =
      write("p.npz", {{"v", f32Array({4}, std::vector<float>(4))}});
  error = ModelData(model.signature, options).prepare();
  EXPECT_NE(error.find("parameter 'w' is missing"), std::string::npos) << error;
  options.paramsPath =
      write("q.npz", {{"w", f32Array({5}, std::vector<float>(5))}});
  error = ModelData(model.signature, options).prepare();
  EXPECT_NE(error.find("has shape [5], but the model expects [4]"),
            std::string::npos)
      << error;
}

/// loss = 0.5 * |w - t|^2, gradient w - t; a NaN gradient at step
/// `nanStep`.
class Quadratic : public StepProgram {
public:
  Quadratic(ModelData &data, std::vector<float> target, int64_t nanStep = -1)
      : data(data), target(std::move(target)), nanStep(nanStep) {}
  double run(int64_t step, std::vector<zbrt::NpyArray> &grads) override {
    std::vector<float> w = floats(data.values()[0]);
    std::vector<float> g(w.size());
    double loss = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      g[i] = w[i] - target[i];
      loss += 0.5 * double(g[i]) * g[i];
    }
    if (step == nanStep)
      g[1] = std::nanf("");
    grads = {f32Array({int64_t(w.size())}, g)};
    return loss;
  }

private:
  ModelData &data;
  std::vector<float> target;
  int64_t nanStep;
};

struct TrainingRun {
  explicit TrainingRun(TinyModel &model, zbrt::Optimizer optimizer)
      : data(model.signature, DataOptions()), optimizer(optimizer),
        comm(zbrt::createLocalComm()) {
    EXPECT_EQ(data.prepare(), "");
    data.values()[0] = f32Array({4}, {1, 2, 3, 4});
    params = {&model.signature.args[0]};
  }
  /// Trains on `over` (default: this process alone).
  bool train(StepProgram &program, const TrainingOptions &options,
             TrainingResult &result, zbrt::Comm *over = nullptr) {
    zbrt::Comm &c = over ? *over : *comm;
    TrainingContext context{c, c, 1, 0, data, params, counted, optimizer};
    std::string error;
    bool ok = zb::train(program, context, options, result, error);
    EXPECT_TRUE(ok) << error;
    return ok;
  }
  std::vector<float> w() { return floats(data.values()[0]); }

  ModelData data;
  zbrt::Optimizer optimizer;
  std::unique_ptr<zbrt::Comm> comm;
  std::vector<const ModelArg *> params;
  llvm::SmallVector<bool> counted{true};
};

// SGD on the quadratic: w_k - t = (1 - lr)^k (w_0 - t).
TEST(Training, SGDFollowsTheClosedForm) {
  TinyModel model;
  TrainingRun run(model, zbrt::Optimizer::sgd(0.25));
  std::vector<float> t = {0, 0, 1, 1};
  Quadratic program(run.data, t);
  TrainingOptions options;
  options.steps = 5;
  TrainingResult result;
  ASSERT_TRUE(run.train(program, options, result));
  ASSERT_EQ(result.losses.size(), 5u);
  std::vector<float> w0 = {1, 2, 3, 4};
  double loss0 = 0;
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(run.w()[i], t[i] + std::pow(0.75, 5) * (w0[i] - t[i]), 1e-6);
    loss0 += 0.5 * (w0[i] - t[i]) * (w0[i] - t[i]);
  }
  EXPECT_NEAR(result.losses[0], loss0, 1e-6);
  EXPECT_NEAR(result.losses[2], loss0 * std::pow(0.75, 4), 1e-5);
  for (const StepCheck &check : result.checks) {
    EXPECT_FALSE(check.clipped);
    EXPECT_FALSE(check.skipped);
  }
}

// Clipping to X scales the gradient by X / (norm + 1e-6).
TEST(Training, ClipsTheGlobalNorm) {
  TinyModel model;
  TrainingRun run(model, zbrt::Optimizer::sgd(1.0));
  Quadratic program(run.data, {0, 0, 0, 0});
  TrainingOptions options;
  options.check.clipGradNorm = 1.0;
  TrainingResult result;
  ASSERT_TRUE(run.train(program, options, result));
  double norm = std::sqrt(1 + 4 + 9 + 16);
  ASSERT_EQ(result.checks.size(), 1u);
  EXPECT_TRUE(result.checks[0].clipped);
  EXPECT_NEAR(result.checks[0].norm, norm, 1e-9);
  std::vector<float> w0 = {1, 2, 3, 4};
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(run.w()[i], w0[i] * (1 - 1.0 / (norm + 1e-6)), 1e-6);
  // The result keeps the gradient as the step computed it.
  EXPECT_EQ(floats(result.lastGrads.at("w")), w0);
}

// A non-finite gradient skips the step: parameters and AdamW state as if
// the step had not run.
TEST(Training, SkipsANonFiniteStepWithItsOptimizerState) {
  TinyModel model;
  std::vector<float> t = {0.5f, -1, 2, 0};
  TrainingRun skipping(model, zbrt::Optimizer::adamw(0.1));
  Quadratic withNaN(skipping.data, t, /*nanStep=*/1);
  TrainingOptions options;
  options.steps = 3;
  TrainingResult result;
  ASSERT_TRUE(skipping.train(withNaN, options, result));
  ASSERT_EQ(result.checks.size(), 3u);
  EXPECT_TRUE(result.checks[1].skipped);
  EXPECT_TRUE(std::isnan(result.checks[1].norm));

  TrainingRun reference(model, zbrt::Optimizer::adamw(0.1));
  Quadratic clean(reference.data, t);
  TrainingOptions twoSteps;
  twoSteps.steps = 2;
  TrainingResult unused;
  ASSERT_TRUE(reference.train(clean, twoSteps, unused));
  EXPECT_EQ(skipping.w(), reference.w());
}

/// Rank 0 of two, whose peer's share of each step's check is scripted:
/// finite squares of 1, except a non-finite gradient in check
/// `peerNaNCheck` (counted from 0). Point-to-point messages abort.
class ScriptedPeerComm : public zbrt::Comm {
public:
  explicit ScriptedPeerComm(int peerNaNCheck) : peerNaNCheck(peerNaNCheck) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void sendBuffer(std::vector<char>, int, int) override { abort("send"); }
  void recv(void *, size_t, int, int) override { abort("recv"); }
  void waitSends() override {}
  void barrier() override {}
  void allreduceSum(double *, size_t) override {}
  void allreduceSum(float *, size_t) override {}
  void allreduceMax(double *, size_t) override {}
  void broadcast(void *, size_t, int) override {}
  void gather(const std::string &mine, std::vector<std::string> &all,
              int) override {
    all = {mine, mine};
  }
  void startAllgather(const double *mine, size_t n, double *all) override {
    ASSERT_FALSE(inFlight) << "an allgather started before the last ended";
    inFlight = true;
    std::copy(mine, mine + n, all);
    std::fill(all + n, all + 2 * n, 0.0);
    all[n] = 1.0;
    if (checks++ == peerNaNCheck)
      all[n + 1] = 1.0;
  }
  void waitAllgather() override { inFlight = false; }
  [[noreturn]] void abort(const std::string &message) override {
    ADD_FAILURE() << message;
    std::abort();
  }

  int peerNaNCheck;
  int checks = 0;
  bool inFlight = false;
};

/// Quadratic, counting the runs of each step.
class CountingQuadratic : public Quadratic {
public:
  using Quadratic::Quadratic;
  double run(int64_t step, std::vector<zbrt::NpyArray> &grads) override {
    ++runs[step];
    return Quadratic::run(step, grads);
  }
  std::map<int64_t, int> runs;
};

// With two ranks and no clipping, a step's check is read after the next
// step has run. When a gradient was not finite (on the other rank, or on
// this one, which then did not update), the optimistic update is undone
// where it was made, the step skipped, and the step after it runs again on
// both ranks (the other rank updated and runs it again, so this one must
// too): the run equals the run without the skipped step, as does the run
// that reads each check before the next step (the synchronous reference;
// the clipped update too), which runs every step once.
TEST(Training, RunsAStepAgainAfterAVoidOptimisticUpdate) {
  TinyModel model;
  std::vector<float> t = {0.5f, -1, 2, 0};
  TrainingRun reference(model, zbrt::Optimizer::adamw(0.1));
  Quadratic clean(reference.data, t);
  TrainingOptions threeSteps;
  threeSteps.steps = 3;
  TrainingResult expected;
  ASSERT_TRUE(reference.train(clean, threeSteps, expected));

  for (bool here : {false, true})
    for (bool synchronous : {false, true}) {
      SCOPED_TRACE(std::string(here ? "this rank's" : "the peer's") +
                   " gradient, " + (synchronous ? "synchronous" : "deferred"));
      TrainingRun skipping(model, zbrt::Optimizer::adamw(0.1));
      ScriptedPeerComm peer(/*peerNaNCheck=*/here ? -1 : 1);
      CountingQuadratic program(skipping.data, t, /*nanStep=*/here ? 1 : -1);
      TrainingOptions options;
      options.steps = 4;
      options.check.synchronous = synchronous;
      TrainingResult result;
      ASSERT_TRUE(skipping.train(program, options, result, &peer));
      ASSERT_EQ(result.checks.size(), 4u);
      EXPECT_FALSE(result.checks[0].skipped);
      EXPECT_TRUE(result.checks[1].skipped);
      EXPECT_FALSE(result.checks[2].skipped);
      EXPECT_EQ(program.runs,
                (std::map<int64_t, int>{
                    {0, 1}, {1, 1}, {2, synchronous ? 1 : 2}, {3, 1}}));
      EXPECT_EQ(skipping.w(), reference.w());
      // Step 2's loss is on the parameters after step 0 alone.
      EXPECT_EQ(result.losses[2], expected.losses[1]);
      EXPECT_EQ(result.losses[3], expected.losses[2]);
    }
}

/// An update whose gradients' squares are given, recording what the check
/// asks of it.
class ScriptedUpdate : public ParamUpdate {
public:
  explicit ScriptedUpdate(double squares) : squares(squares) {}
  bool addSquares(const zbrt::NpzArchive &, double &total, double &,
                  std::string &) override {
    total += squares;
    return true;
  }
  bool save(std::string &) override { return true; }
  bool update(const zbrt::NpzArchive &, double clipScale,
              std::string &) override {
    scales.push_back(clipScale);
    return true;
  }
  bool restore(std::string &) override { return true; }
  bool syncToHost(std::string &) override { return true; }

  double squares;
  std::vector<double> scales;
};

// Finite gradients whose sum of squares overflows (f64 gradients beyond
// ~1e154) skip the step like a non-finite one, instead of an infinite
// norm clipping every gradient to 0; a finite sum updates once, clipped.
TEST(Training, SkipsAStepWhoseSquaresOverflow) {
  std::unique_ptr<zbrt::Comm> comm = zbrt::createLocalComm();
  UpdateOptions options;
  options.clipGradNorm = 1.0;
  std::string error;
  ScriptedUpdate overflowing(INFINITY);
  StepCheck check;
  ASSERT_TRUE(checkedUpdate(*comm, overflowing, {}, options, check, error));
  EXPECT_TRUE(check.skipped);
  EXPECT_TRUE(std::isnan(check.norm));
  EXPECT_TRUE(overflowing.scales.empty());

  ScriptedUpdate large(16.0);
  ASSERT_TRUE(checkedUpdate(*comm, large, {}, options, check, error));
  EXPECT_FALSE(check.skipped);
  EXPECT_TRUE(check.clipped);
  EXPECT_EQ(check.norm, 4.0);
  ASSERT_EQ(large.scales.size(), 1u);
  EXPECT_DOUBLE_EQ(large.scales[0], 1.0 / (4.0 + 1e-6));
}

// A run resumed from its step-2 checkpoint ends bitwise where the
// uninterrupted run ends.
TEST_F(ModelDataFiles, ResumingContinuesTheRun) {
  TinyModel model;
  std::vector<float> t = {0, 1, 0, 1};
  TrainingOptions options;
  options.steps = 4;
  options.checkpointConfig = checkpointConfig("model", "adamw");

  TrainingRun straight(model, zbrt::Optimizer::adamw(0.05));
  Quadratic p1(straight.data, t);
  TrainingResult r1;
  ASSERT_TRUE(straight.train(p1, options, r1));

  TrainingOptions firstHalf = options;
  firstHalf.steps = 2;
  firstHalf.checkpointDir = dir + "/ckpt";
  TrainingRun before(model, zbrt::Optimizer::adamw(0.05));
  Quadratic p2(before.data, t);
  TrainingResult r2;
  ASSERT_TRUE(before.train(p2, firstHalf, r2));

  TrainingRun after(model, zbrt::Optimizer::adamw(0.05));
  std::string error;
  int64_t first =
      resumeTraining(dir + "/ckpt", options.checkpointConfig, 4, after.data,
                     after.params, after.optimizer, error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(first, 2);
  TrainingOptions secondHalf = options;
  secondHalf.firstStep = first;
  Quadratic p3(after.data, t);
  TrainingResult r3;
  ASSERT_TRUE(after.train(p3, secondHalf, r3));
  EXPECT_EQ(after.w(), straight.w());
  EXPECT_EQ(r3.losses.back(), r1.losses.back());

  // Another optimizer's run cannot resume from it.
  TrainingRun other(model, zbrt::Optimizer::sgd(0.05));
  resumeTraining(dir + "/ckpt", checkpointConfig("model", "sgd"), 4, other.data,
                 other.params, other.optimizer, error);
  EXPECT_NE(error.find("written for another model or optimizer"),
            std::string::npos)
      << error;
}

} // namespace
