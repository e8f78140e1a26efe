//===- GemmTest.cpp - The runtime's gemm against a reference loop ---------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/zbrt.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>
#include <vector>

namespace {

/// Reference row-major C = alpha*op(A)*op(B) + beta*C by three loops.
void referenceGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                   float alpha, const std::vector<float> &a, int64_t lda,
                   const std::vector<float> &b, int64_t ldb, float beta,
                   std::vector<float> &c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        float av = transA ? a[p * lda + i] : a[i * lda + p];
        float bv = transB ? b[j * ldb + p] : b[p * ldb + j];
        acc += static_cast<double>(av) * bv;
      }
      c[i * ldc + j] = alpha * static_cast<float>(acc) + beta * c[i * ldc + j];
    }
}

class GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(GemmTest, MatchesReference) {
  auto [transA, transB] = GetParam();
  const int64_t m = 7, n = 5, k = 9;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1, 1);
  int64_t lda = transA ? m : k, ldb = transB ? k : n, ldc = n;
  std::vector<float> a(m * k), b(k * n), c(m * n), expected(m * n);
  for (float &v : a)
    v = dist(rng);
  for (float &v : b)
    v = dist(rng);
  for (size_t i = 0; i < c.size(); ++i)
    c[i] = expected[i] = dist(rng);

  zbrt_sgemm(transA, transB, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f,
             c.data(), ldc);
  referenceGemm(transA, transB, m, n, k, 0.5f, a, lda, b, ldb, 2.0f, expected,
                ldc);
  for (size_t i = 0; i < c.size(); ++i)
    EXPECT_NEAR(c[i], expected[i], 1e-5f * (1 + std::fabs(expected[i])))
        << "at " << i;
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Bool()));

TEST(RuntimeTest, HasVersion) { EXPECT_STRNE(zbrt_version(), ""); }

} // namespace
