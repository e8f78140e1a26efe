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

/// Reference row-major C = alpha*op(A)*op(B) + beta*C by three loops (in
/// long double).
template <typename T>
void referenceGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                   T alpha, const std::vector<T> &a, int64_t lda,
                   const std::vector<T> &b, int64_t ldb, T beta,
                   std::vector<T> &c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      long double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        T av = transA ? a[p * lda + i] : a[i * lda + p];
        T bv = transB ? b[j * ldb + p] : b[p * ldb + j];
        acc += static_cast<long double>(av) * bv;
      }
      c[i * ldc + j] = static_cast<T>(
          alpha * acc + static_cast<long double>(beta) * c[i * ldc + j]);
    }
}

/// `n` values drawn uniformly from [-1, 1) by `rng`.
template <typename T> std::vector<T> randomValues(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<T> dist(-1, 1);
  std::vector<T> values(n);
  for (T &v : values)
    v = dist(rng);
  return values;
}

class GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(GemmTest, MatchesReference) {
  auto [transA, transB] = GetParam();
  const int64_t m = 7, n = 5, k = 9;
  std::mt19937 rng(42);
  int64_t lda = transA ? m : k, ldb = transB ? k : n, ldc = n;
  std::vector<float> a = randomValues<float>(m * k, rng);
  std::vector<float> b = randomValues<float>(k * n, rng);
  std::vector<float> c = randomValues<float>(m * n, rng), expected = c;

  zbrt_sgemm(transA, transB, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f,
             c.data(), ldc);
  referenceGemm(transA, transB, m, n, k, 0.5f, a, lda, b, ldb, 2.0f, expected,
                ldc);
  for (size_t i = 0; i < c.size(); ++i)
    EXPECT_NEAR(c[i], expected[i], 1e-5f * (1 + std::fabs(expected[i])))
        << "at " << i;
}

/// The f64 gemm, batched: two products at once, each against the reference
/// to f64 rounding (an f32 computation would be off by ~1e-7).
TEST_P(GemmTest, DoublePrecisionBatched) {
  auto [transA, transB] = GetParam();
  const int64_t m = 6, n = 4, k = 11, batch = 2;
  std::mt19937 rng(7);
  int64_t lda = transA ? m : k, ldb = transB ? k : n, ldc = n;
  std::vector<double> a = randomValues<double>(batch * m * k, rng);
  std::vector<double> b = randomValues<double>(batch * k * n, rng);
  std::vector<double> c = randomValues<double>(batch * m * n, rng);
  std::vector<double> expected = c;

  zbrt_dgemm_batched(transA, transB, batch, m, n, k, 0.5, a.data(), lda, m * k,
                     b.data(), ldb, k * n, 2.0, c.data(), ldc, m * n);
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<double> ai(a.begin() + i * m * k, a.begin() + (i + 1) * m * k);
    std::vector<double> bi(b.begin() + i * k * n, b.begin() + (i + 1) * k * n);
    std::vector<double> ci(expected.begin() + i * m * n,
                           expected.begin() + (i + 1) * m * n);
    referenceGemm(transA, transB, m, n, k, 0.5, ai, lda, bi, ldb, 2.0, ci, ldc);
    for (int64_t j = 0; j < m * n; ++j)
      EXPECT_NEAR(c[i * m * n + j], ci[j], 1e-14 * (1 + std::fabs(ci[j])))
          << "batch " << i << " at " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Bool()));

TEST(RuntimeTest, HasVersion) { EXPECT_STRNE(zbrt_version(), ""); }

} // namespace
