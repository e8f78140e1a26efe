//===- GradCheckTest.cpp - Gradients against finite differences -----------===//
//
// Part of ZeroBubble MLIR.
//
// The loss is a closed form of the parameter, with kinks (ReLUs) where the
// test puts them, so that what the check compares, passes over and rejects
// is known without a model.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/GradCheck.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

using namespace zb;

namespace {

constexpr int64_t kSize = 16;

/// Parameterised by whether the parameter is f64 (f32 otherwise).
class GradCheckTest : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override {
    mlir::Type type = GetParam() ? mlir::Type(mlir::Float64Type::get(&context))
                                 : mlir::Float32Type::get(&context);
    signature.args.push_back({ModelArg::Kind::Param, "w", 0,
                              mlir::RankedTensorType::get({kSize}, type)});
    DataOptions options;
    options.seed = 1;
    data = std::make_unique<ModelData>(signature, options);
    ASSERT_EQ(data->prepare(), "");
    // Entry i at 0.3 + 0.1 i, away from the kink at 0 of each ReLU.
    for (int64_t i = 0; i < kSize; ++i)
      set(i, 0.3f + 0.1f * i);
  }

  double get(int64_t i) const { return loadScalar(data->values()[0], i); }
  void set(int64_t i, double v) { storeScalar(data->values()[0], i, v); }

  /// sum_i (i + 1) relu(w_i) + w_i^2 / 2, in the parameter's type as a
  /// model computes it.
  template <typename T> T lossIn() const {
    T total = 0;
    for (int64_t i = 0; i < kSize; ++i) {
      T w = get(i);
      total += T(i + 1) * std::max(w, T(0)) + T(0.5) * w * w;
    }
    return total;
  }
  double loss() const {
    return GetParam() ? lossIn<double>() : lossIn<float>();
  }
  /// A quarter of the finite-difference step from 0.
  double nearKink() const { return GetParam() ? 2.5e-7 : 1e-3; }

  /// The loss's gradient, times `scale` at entry `wrong`.
  zbrt::NpzArchive gradients(int64_t wrong = -1, double scale = 1) const {
    zbrt::NpyArray grad = data->values()[0];
    for (int64_t i = 0; i < kSize; ++i) {
      double g = (get(i) > 0 ? i + 1 : 0) + get(i);
      storeScalar(grad, i, i == wrong ? g * scale : g);
    }
    zbrt::NpzArchive out;
    out["w"] = grad;
    return out;
  }

  GradCheckResult check(const zbrt::NpzArchive &grads, int samples) {
    GradCheckOptions options;
    options.samples = samples;
    return checkGradients(
        *data, {&signature.args[0]}, grads, [&] { return loss(); }, options);
  }

  mlir::MLIRContext context;
  ModelSignature signature;
  std::unique_ptr<ModelData> data;
};

TEST_P(GradCheckTest, RightGradientsPass) {
  GradCheckResult r = check(gradients(), kSize);
  EXPECT_TRUE(r.passed()) << r.worst << " at " << r.at;
  EXPECT_EQ(r.checked, kSize);
  EXPECT_EQ(r.kinked, 0);
}

TEST_P(GradCheckTest, AWrongEntryFails) {
  GradCheckResult r = check(gradients(5, 1.1), kSize);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.at, "w[5]");
  EXPECT_NEAR(r.worst, 0.1 / 1.1, 1e-3);
}

// Entries within the step of a kink: their central difference straddles
// it (0.75 of the slope for an entry a quarter step from it) and is not
// the derivative on either side; they are passed over, not failed, and the
// next entries are compared instead.
TEST_P(GradCheckTest, EntriesAtKinksArePassedOver) {
  for (int64_t i : {3, 4, 9})
    set(i, nearKink());
  GradCheckResult r = check(gradients(), kSize);
  EXPECT_TRUE(r.passed()) << r.worst << " at " << r.at;
  // Sample 3 passes over entries 3 and 4 (comparing 5), samples 4 and 9
  // over their own.
  EXPECT_EQ(r.kinked, 4);
  EXPECT_EQ(r.checked, kSize);
  // A wrong entry next to them is still found.
  r = check(gradients(10, 0.9), kSize);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.at, "w[10]");
}

TEST_P(GradCheckTest, NothingComparedIsNotAPass) {
  for (int64_t i = 0; i < kSize; ++i)
    set(i, nearKink());
  GradCheckResult r = check(gradients(), 2);
  EXPECT_EQ(r.checked, 0);
  EXPECT_EQ(r.kinked, 16);
  EXPECT_FALSE(r.passed());
}

INSTANTIATE_TEST_SUITE_P(F32AndF64, GradCheckTest, ::testing::Bool());

} // namespace
