//===- OptimizerTest.cpp - SGD and AdamW against hand computations --------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Optimizer.h"

#include "gtest/gtest.h"

#include <limits>

#include <cmath>

#include <cstring>
#include <vector>

using namespace zbrt;

namespace {

template <typename T>
NpyArray makeArray(DType dtype, std::vector<int64_t> shape,
                   std::vector<T> values) {
  NpyArray array;
  array.dtype = dtype;
  array.shape = std::move(shape);
  array.data.resize(values.size() * sizeof(T));
  std::memcpy(array.data.data(), values.data(), array.data.size());
  return array;
}

NpyArray f32(std::vector<float> values) {
  int64_t n = static_cast<int64_t>(values.size());
  return makeArray<float>(DType::F32, {n}, std::move(values));
}

NpyArray f64(std::vector<double> values) {
  int64_t n = static_cast<int64_t>(values.size());
  return makeArray<double>(DType::F64, {n}, std::move(values));
}

TEST(OptimizerTest, SGDStepIsExact) {
  NpzArchive params = {{"w", f32({1.0f, -2.0f, 0.5f})},
                       {"b", f64({0.25, 3.0})}};
  NpzArchive grads = {{"w", f32({0.5f, 0.25f, -1.0f})},
                      {"b", f64({-0.5, 1.0})},
                      {"unused", f32({7.0f})}};
  Optimizer sgd = Optimizer::sgd(0.1);
  std::string error;
  ASSERT_TRUE(sgd.apply(params, grads, error)) << error;
  const float *w = params["w"].as<float>();
  EXPECT_EQ(w[0], static_cast<float>(1.0 - 0.1 * 0.5));
  EXPECT_EQ(w[1], static_cast<float>(-2.0 - 0.1 * 0.25));
  EXPECT_EQ(w[2], static_cast<float>(0.5 + 0.1 * 1.0));
  const double *b = params["b"].as<double>();
  EXPECT_EQ(b[0], 0.25 + 0.1 * 0.5);
  EXPECT_EQ(b[1], 3.0 - 0.1 * 1.0);
  EXPECT_EQ(sgd.getStep(), 1);
}

TEST(OptimizerTest, SGDMomentum) {
  NpzArchive params = {{"w", f64({1.0})}};
  NpzArchive grads = {{"w", f64({0.5})}};
  Optimizer sgd = Optimizer::sgd(0.1, 0.9);
  std::string error;
  // Step 1: buf = g; step 2: buf = 0.9 * g + g.
  ASSERT_TRUE(sgd.apply(params, grads, error)) << error;
  EXPECT_EQ(params["w"].as<double>()[0], 1.0 - 0.1 * 0.5);
  ASSERT_TRUE(sgd.apply(params, grads, error)) << error;
  EXPECT_DOUBLE_EQ(params["w"].as<double>()[0],
                   1.0 - 0.1 * 0.5 - 0.1 * (0.9 * 0.5 + 0.5));
}

TEST(OptimizerTest, AdamWTwoStepsByHand) {
  // lr 0.1, beta1 0.9, beta2 0.999, eps 1e-8, weight decay 0.01.
  // Element 0: p = 1, g = 0.5 then -0.25.
  //   t=1: p = 0.999; m = 0.05; v = 0.00025; m^ = 0.5; v^ = 0.25
  //        p = 0.999 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.899000002
  //   t=2: p = 0.899000002 * 0.999 = 0.898101002; m = 0.02;
  //        v = 0.00031225; m^ = 0.02 / 0.19; v^ = 0.00031225 / 0.001999
  //        p = 0.898101002 - 0.1 * m^ / (sqrt(v^) + 1e-8) = 0.8714672987
  // Element 1: p = -2, g = -1 then 3.
  //   t=1: p = -1.998 + 0.1 * 1 / (1 + 1e-8) = -1.898000001
  //   t=2: m = 0.21; v = 0.009999; p = -1.945520984
  for (DType dtype : {DType::F64, DType::F32}) {
    NpzArchive params, grads1, grads2;
    if (dtype == DType::F64) {
      params["w"] = f64({1.0, -2.0});
      grads1["w"] = f64({0.5, -1.0});
      grads2["w"] = f64({-0.25, 3.0});
    } else {
      params["w"] = f32({1.0f, -2.0f});
      grads1["w"] = f32({0.5f, -1.0f});
      grads2["w"] = f32({-0.25f, 3.0f});
    }
    double tolerance = dtype == DType::F64 ? 1e-12 : 1e-6;
    auto value = [&](int i) {
      const NpyArray &w = params["w"];
      return w.dtype == DType::F64 ? w.as<double>()[i]
                                   : static_cast<double>(w.as<float>()[i]);
    };
    Optimizer adam = Optimizer::adamw(0.1);
    std::string error;
    ASSERT_TRUE(adam.apply(params, grads1, error)) << error;
    EXPECT_NEAR(value(0), 0.899000002, tolerance);
    EXPECT_NEAR(value(1), -1.898000001, tolerance);
    ASSERT_TRUE(adam.apply(params, grads2, error)) << error;
    EXPECT_NEAR(value(0), 0.8714672987058463, tolerance);
    EXPECT_NEAR(value(1), -1.945520984107744, tolerance);
  }
}

TEST(OptimizerTest, StateRoundTripContinuesExactly) {
  NpzArchive start = {{"a", f32({0.3f, -0.7f, 1.1f})}, {"b", f64({2.0})}};
  NpzArchive grads[3] = {{{"a", f32({0.1f, 0.2f, -0.3f})}, {"b", f64({0.5})}},
                         {{"a", f32({-0.4f, 0.0f, 0.6f})}, {"b", f64({-1.5})}},
                         {{"a", f32({0.2f, -0.2f, 0.9f})}, {"b", f64({0.25})}}};
  for (bool adam : {true, false}) {
    auto make = [&] {
      return adam ? Optimizer::adamw(0.01) : Optimizer::sgd(0.01, 0.9);
    };
    std::string error;
    // Three steps straight.
    NpzArchive straight = start;
    Optimizer first = make();
    for (const NpzArchive &g : grads)
      ASSERT_TRUE(first.apply(straight, g, error)) << error;

    // One step, export, import into a fresh optimizer, two more.
    NpzArchive resumed = start;
    Optimizer before = make();
    ASSERT_TRUE(before.apply(resumed, grads[0], error)) << error;
    NpzArchive state = before.exportState();
    if (adam) {
      EXPECT_EQ(state.count("adam.t"), 1u);
      EXPECT_EQ(state.count("adam.m.a"), 1u);
      EXPECT_EQ(state.count("adam.v.b"), 1u);
    } else {
      EXPECT_EQ(state.count("sgd.t"), 1u);
      EXPECT_EQ(state.count("sgd.momentum.a"), 1u);
    }
    // Another rank's state in the same archive is skipped with `params`.
    NpzArchive merged = state;
    merged[adam ? "adam.m.other" : "sgd.momentum.other"] = f32({1.0f});
    merged[adam ? "adam.v.other" : "sgd.momentum.other"] = f32({1.0f});
    Optimizer after = make();
    ASSERT_TRUE(after.importState(merged, error, &resumed)) << error;
    EXPECT_EQ(after.getStep(), 1);
    EXPECT_EQ(after.exportState().size(), state.size());
    for (int i = 1; i < 3; ++i)
      ASSERT_TRUE(after.apply(resumed, grads[i], error)) << error;

    for (const auto &[name, array] : straight)
      EXPECT_EQ(array.data, resumed.at(name).data) << name << " adam=" << adam;
  }
}

TEST(OptimizerTest, ErrorsNameTheParameter) {
  std::string error;
  NpzArchive params = {{"w", f32({1.0f, 2.0f})}};
  Optimizer adam = Optimizer::adamw(0.1);
  NpzArchive none;
  EXPECT_FALSE(adam.apply(params, none, error));
  EXPECT_EQ(error, "no gradient for parameter 'w'");
  NpzArchive wrong = {{"w", f64({1.0, 2.0})}};
  EXPECT_FALSE(adam.apply(params, wrong, error));
  EXPECT_NE(error.find("gradient of parameter 'w'"), std::string::npos);
  EXPECT_EQ(adam.getStep(), 0);
  EXPECT_EQ(params["w"].as<float>()[0], 1.0f);

  // SGD state does not import into AdamW; missing moments are named.
  NpzArchive sgdState = Optimizer::sgd(0.1).exportState();
  EXPECT_FALSE(adam.importState(sgdState, error));
  EXPECT_NE(error.find("'adam.t'"), std::string::npos) << error;
  NpzArchive grads = {{"w", f32({0.5f, 0.5f})}};
  ASSERT_TRUE(adam.apply(params, grads, error)) << error;
  NpzArchive state = adam.exportState();
  state.erase("adam.v.w");
  Optimizer fresh = Optimizer::adamw(0.1);
  EXPECT_FALSE(fresh.importState(state, error, &params));
  EXPECT_EQ(error, "optimizer state has no 'adam.v.w'");
}

/// State that an update would turn into NaN (a value that is not finite, a
/// negative second moment) or whose step would not count on is refused,
/// named.
TEST(OptimizerTest, ImportedStateIsChecked) {
  std::string error;
  NpzArchive params = {{"w", f32({1.0f, 2.0f})}};
  NpzArchive grads = {{"w", f32({0.5f, -0.5f})}};
  Optimizer adam = Optimizer::adamw(0.1);
  ASSERT_TRUE(adam.apply(params, grads, error)) << error;
  NpzArchive good = adam.exportState();
  auto refused = [&](NpzArchive state) {
    Optimizer fresh = Optimizer::adamw(0.1);
    EXPECT_FALSE(fresh.importState(state, error, &params));
    return error;
  };
  NpzArchive state = good;
  state["adam.v.w"].as<float>()[1] = -1.0f;
  EXPECT_EQ(refused(state), "optimizer state 'adam.v.w' holds a negative "
                            "value (-1.000000 at element 1)");
  state = good;
  state["adam.m.w"].as<float>()[0] = NAN;
  EXPECT_NE(refused(state).find("optimizer state 'adam.m.w' holds a value "
                                "that is not finite"),
            std::string::npos)
      << error;
  state = good;
  *state["adam.t"].as<int64_t>() = std::numeric_limits<int64_t>::max();
  EXPECT_NE(refused(state).find("past 2^53 steps"), std::string::npos) << error;
  // A negative first moment is a moment like any other.
  state = good;
  state["adam.m.w"].as<float>()[0] = -3.0f;
  Optimizer fresh = Optimizer::adamw(0.1);
  EXPECT_TRUE(fresh.importState(state, error, &params)) << error;
}

} // namespace
