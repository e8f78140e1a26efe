//===- GroupedGemmTest.cpp - Grouped products against reference loops -----===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/zbrt.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace {

/// Row r of each test's group index (read with stride 2, the odd entries
/// are not read): groups in no order, rows in no group (-1, 4), group 2
/// without rows, group 1 on consecutive rows, group 0 on a single row.
const std::vector<int64_t> kGroup = {3, 9, 0, 9, 3,  9, 1, 9, 1, 9,
                                     1, 9, 3, 9, -1, 9, 4, 9, 3, 9};
constexpr int64_t kRows = 10, kGroups = 4, kGroupStride = 2;

int64_t groupOf(int64_t r) { return kGroup[r * kGroupStride]; }

template <typename T> std::vector<T> randomValues(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<T> dist(-1, 1);
  std::vector<T> values(n);
  for (T &v : values)
    v = dist(rng);
  return values;
}

void groupedRows(int32_t transB, int64_t n, int64_t k, const float *a,
                 int64_t lda, const float *b, int64_t ldb, int64_t strideB,
                 float beta, float *c, int64_t ldc) {
  zbrt_sgemm_grouped_rows(transB, kRows, n, k, kGroups, a, lda, b, ldb, strideB,
                          beta, c, ldc, kGroup.data(), kGroupStride);
}
void groupedRows(int32_t transB, int64_t n, int64_t k, const double *a,
                 int64_t lda, const double *b, int64_t ldb, int64_t strideB,
                 double beta, double *c, int64_t ldc) {
  zbrt_dgemm_grouped_rows(transB, kRows, n, k, kGroups, a, lda, b, ldb, strideB,
                          beta, c, ldc, kGroup.data(), kGroupStride);
}
void groupedReduce(int64_t m, int64_t n, const float *a, int64_t lda,
                   const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc, int64_t strideC) {
  zbrt_sgemm_grouped_reduce(kRows, m, n, kGroups, a, lda, b, ldb, beta, c, ldc,
                            strideC, kGroup.data(), kGroupStride);
}
void groupedReduce(int64_t m, int64_t n, const double *a, int64_t lda,
                   const double *b, int64_t ldb, double beta, double *c,
                   int64_t ldc, int64_t strideC) {
  zbrt_dgemm_grouped_reduce(kRows, m, n, kGroups, a, lda, b, ldb, beta, c, ldc,
                            strideC, kGroup.data(), kGroupStride);
}

template <typename T> T tolerance() {
  return sizeof(T) == 4 ? T(2e-6) : T(1e-14);
}

template <typename T> void checkRows(bool transB, T beta) {
  const int64_t n = 5, k = 7, lda = 9, ldc = 6;
  const int64_t ldb = transB ? k + 1 : n + 2;
  const int64_t strideB = (transB ? n : k) * ldb + 3;
  std::vector<T> a = randomValues<T>(kRows * lda, 1);
  std::vector<T> b = randomValues<T>(kGroups * strideB, 2);
  std::vector<T> c = randomValues<T>(kRows * ldc, 3);
  // beta 0 overwrites C, NaN included.
  if (beta == T(0))
    std::fill(c.begin(), c.end(), std::numeric_limits<T>::quiet_NaN());
  std::vector<T> expected = c;
  for (int64_t r = 0; r < kRows; ++r) {
    int64_t g = groupOf(r);
    bool inGroup = g >= 0 && g < kGroups;
    for (int64_t j = 0; j < n; ++j) {
      long double sum = 0;
      for (int64_t p = 0; inGroup && p < k; ++p)
        sum += static_cast<long double>(a[r * lda + p]) *
               b[g * strideB + (transB ? j * ldb + p : p * ldb + j)];
      T old = beta == T(0) ? T(0) : beta * c[r * ldc + j];
      expected[r * ldc + j] = static_cast<T>(sum + old);
    }
  }
  const std::vector<T> before = c;
  groupedRows(transB, n, k, a.data(), lda, b.data(), ldb, strideB, beta,
              c.data(), ldc);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < ldc; ++j) {
      if (j >= n) { // Padding stays as it was.
        T was = before[r * ldc + j], is = c[r * ldc + j];
        EXPECT_TRUE(is == was || (std::isnan(is) && std::isnan(was)))
            << "row " << r << " padding " << j;
        continue;
      }
      EXPECT_NEAR(c[r * ldc + j], expected[r * ldc + j], tolerance<T>())
          << "row " << r << " column " << j;
    }
}

template <typename T> void checkReduce(T beta) {
  const int64_t m = 6, n = 4, lda = 8, ldb = 5, ldc = 7;
  const int64_t strideC = m * ldc + 2;
  std::vector<T> a = randomValues<T>(kRows * lda, 4);
  std::vector<T> b = randomValues<T>(kRows * ldb, 5);
  std::vector<T> c = randomValues<T>(kGroups * strideC, 6);
  if (beta == T(0))
    std::fill(c.begin(), c.end(), std::numeric_limits<T>::quiet_NaN());
  std::vector<T> expected = c;
  for (int64_t g = 0; g < kGroups; ++g)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        long double sum = 0;
        for (int64_t r = 0; r < kRows; ++r)
          if (groupOf(r) == g)
            sum += static_cast<long double>(a[r * lda + i]) * b[r * ldb + j];
        T &out = expected[g * strideC + i * ldc + j];
        out = static_cast<T>(sum + (beta == T(0) ? T(0) : beta * out));
      }
  groupedReduce(m, n, a.data(), lda, b.data(), ldb, beta, c.data(), ldc,
                strideC);
  for (int64_t g = 0; g < kGroups; ++g)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        EXPECT_NEAR(c[g * strideC + i * ldc + j],
                    expected[g * strideC + i * ldc + j], tolerance<T>())
            << "group " << g << " (" << i << ", " << j << ")";
}

TEST(GroupedGemm, RowsTimesTheirGroupsMatrix) {
  for (bool transB : {false, true})
    for (float beta : {0.0f, 1.0f, 0.5f}) {
      SCOPED_TRACE(testing::Message()
                   << "transB " << transB << " beta " << beta);
      checkRows<float>(transB, beta);
      checkRows<double>(transB, beta);
    }
}

TEST(GroupedGemm, EachGroupSumsItsRows) {
  for (float beta : {0.0f, 1.0f, 0.5f}) {
    SCOPED_TRACE(testing::Message() << "beta " << beta);
    checkReduce<float>(beta);
    checkReduce<double>(beta);
  }
}

} // namespace
