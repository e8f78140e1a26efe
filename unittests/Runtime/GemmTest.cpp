//===- GemmTest.cpp - The runtime's gemm against a reference loop ---------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Gemm.h"
#include "zbrt/zbrt.h"

#include "Sgemm.h"

#include "gtest/gtest.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" void openblas_set_num_threads(int threads);

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

/// `x` rounded to the nearest bf16 by comparing the two bf16 values around
/// it (ties to the one whose last mantissa bit is 0): the reference for the
/// runtime's bit trick.
float nearestBF16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  uint32_t low = bits & 0xffff0000u, high = low + 0x10000u;
  float down, up;
  std::memcpy(&down, &low, sizeof(low));
  std::memcpy(&up, &high, sizeof(high));
  double toDown = std::fabs(double(x) - down), toUp = std::fabs(double(up) - x);
  if (toDown < toUp || (toDown == toUp && !(low & 0x10000u)))
    return down;
  return up;
}

/// The bf16 gemm (the host counterpart of the device's): the reference on
/// inputs rounded to bf16, with batch strides and leading dimensions past
/// the matrices' widths; halfway values round to even.
TEST_P(GemmTest, BF16ProductsOfRoundedInputs) {
  auto [transA, transB] = GetParam();
  const int64_t m = 5, n = 6, k = 7, batch = 3, pad = 3;
  std::mt19937 rng(11);
  int64_t lda = (transA ? m : k) + pad, ldb = (transB ? k : n) + pad, ldc = n;
  int64_t strideA = (transA ? k : m) * lda + 2,
          strideB = (transB ? n : k) * ldb;
  std::vector<float> a = randomValues<float>(batch * strideA, rng);
  std::vector<float> b = randomValues<float>(batch * strideB, rng);
  // Halfway between two bf16 values: 1 + 2^-8 rounds down to 1 (even),
  // 1 + 3 * 2^-8 up to 1 + 2^-6.
  a[0] = 1.0f + std::ldexp(1.0f, -8);
  b[0] = 1.0f + 3 * std::ldexp(1.0f, -8);
  ASSERT_EQ(nearestBF16(a[0]), 1.0f);
  ASSERT_EQ(nearestBF16(b[0]), 1.0f + std::ldexp(1.0f, -6));
  std::vector<float> c = randomValues<float>(batch * m * n, rng);
  std::vector<float> exact = c, rounded = c;

  zbrt_sgemm_batched_bf16(transA, transB, batch, m, n, k, 0.5f, a.data(), lda,
                          strideA, b.data(), ldb, strideB, 2.0f, c.data(), ldc,
                          m * n);
  std::vector<float> a16(a.size()), b16(b.size());
  std::transform(a.begin(), a.end(), a16.begin(), nearestBF16);
  std::transform(b.begin(), b.end(), b16.begin(), nearestBF16);
  double worstToExact = 0;
  for (int64_t i = 0; i < batch; ++i) {
    auto slice = [](const std::vector<float> &v, int64_t from, int64_t size) {
      return std::vector<float>(v.begin() + from, v.begin() + from + size);
    };
    std::vector<float> want = slice(rounded, i * m * n, m * n);
    std::vector<float> full = slice(exact, i * m * n, m * n);
    referenceGemm(transA, transB, m, n, k, 0.5f,
                  slice(a16, i * strideA, strideA), lda,
                  slice(b16, i * strideB, strideB), ldb, 2.0f, want, ldc);
    referenceGemm(transA, transB, m, n, k, 0.5f, slice(a, i * strideA, strideA),
                  lda, slice(b, i * strideB, strideB), ldb, 2.0f, full, ldc);
    for (int64_t j = 0; j < m * n; ++j) {
      EXPECT_NEAR(c[i * m * n + j], want[j], 1e-5f * (1 + std::fabs(want[j])))
          << "batch " << i << " at " << j;
      worstToExact =
          std::max(worstToExact, std::fabs(double(c[i * m * n + j]) - full[j]));
    }
  }
  // bf16 keeps 8 bits: the products differ from f32's by ~1e-3.
  EXPECT_GT(worstToExact, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Bool()));

/// Every instruction set this CPU runs the runtime's kernel with: AVX-512F
/// and AVX2 on a CPU with both (each tested; a CPU without AVX-512F skips
/// its rows).
const zbrt::SgemmIsa kIsas[] = {zbrt::SgemmIsa::Avx512, zbrt::SgemmIsa::Avx2};

/// The runtime's kernel, with each instruction set, against the reference,
/// on shapes that straddle its blocks: rows around its register blocks (8
/// rows with AVX-512, 6 with AVX2) and cache blocks (256 and 144 rows),
/// columns around its 32-column panels and 16-wide halves, depths around
/// its 16 x 16 and 8 x 8 transposes and 512-step blocks; row strides wider
/// than the matrices; with transA, A's blocks read in place and (C of 256
/// columns or more) copied; alpha and beta 0, 1 and others.
class SgemmIsaTest
    : public ::testing::TestWithParam<std::tuple<bool, bool, zbrt::SgemmIsa>> {
protected:
  void SetUp() override {
    zbrt::SgemmIsa isa = std::get<2>(GetParam());
    if (!zbrt::sgemmIsaSupported(isa))
      GTEST_SKIP() << "this CPU has no " << zbrt::sgemmIsaName(isa);
  }
};

/// zbrt_sgemm's kernel where the CPU has one (the PackedWeights tests).
class SgemmKernelTest
    : public ::testing::TestWithParam<std::tuple<bool, bool>> {
protected:
  void SetUp() override {
    if (!zbrt::sgemmKernelAvailable())
      GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU: "
                      "zbrt_sgemm uses OpenBLAS";
  }
};

TEST_P(SgemmIsaTest, MatchesReference) {
  auto [transA, transB, isa] = GetParam();
  struct Case {
    int64_t m, n, k, pad;
    float alpha, beta;
  };
  const Case cases[] = {
      {1, 1, 1, 0, 1.f, 0.f},       {7, 5, 9, 0, 0.5f, 2.f},
      {8, 32, 16, 0, 1.f, 1.f},     {9, 33, 17, 3, 1.f, 0.f},
      {17, 15, 31, 1, -1.f, 0.5f},  {3, 70, 513, 5, 1.f, 1.f},
      {300, 48, 40, 0, 2.f, 0.f},   {64, 64, 1030, 7, 1.f, -1.f},
      {12, 31, 0, 0, 1.f, 0.5f},    {259, 97, 64, 2, 0.f, 1.f},
      {145, 16, 100, 3, 1.f, 1.f},  {6, 8, 520, 0, 0.5f, 0.f},
      {150, 260, 70, 5, 1.f, 0.5f}, {20, 256, 600, 0, 2.f, 1.f},
  };
  std::mt19937 rng(11);
  for (const Case &t : cases) {
    int64_t lda = (transA ? t.m : t.k) + t.pad;
    int64_t ldb = (transB ? t.k : t.n) + t.pad, ldc = t.n + t.pad;
    std::vector<float> a = randomValues<float>((transA ? t.k : t.m) * lda, rng);
    std::vector<float> b = randomValues<float>((transB ? t.n : t.k) * ldb, rng);
    std::vector<float> c = randomValues<float>(t.m * ldc, rng);
    std::vector<float> expected = c;
    ASSERT_TRUE(zbrt::sgemm(transA, transB, t.m, t.n, t.k, t.alpha, a.data(),
                            lda, b.data(), ldb, t.beta, c.data(), ldc, isa));
    referenceGemm(transA, transB, t.m, t.n, t.k, t.alpha, a, lda, b, ldb,
                  t.beta, expected, ldc);
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        // Beyond column n, C's padding stays as it was.
        float want = j < t.n ? expected[i * ldc + j] : c[i * ldc + j];
        ASSERT_NEAR(c[i * ldc + j], want,
                    2e-6f * (1 + std::sqrt(float(t.k))) * (1 + std::fabs(want)))
            << t.m << "x" << t.n << "x" << t.k << " at (" << i << ", " << j
            << ")";
      }
  }
}

/// With beta = 0, C is written without being read: NaNs in it vanish.
TEST_P(SgemmIsaTest, BetaZeroIgnoresC) {
  auto [transA, transB, isa] = GetParam();
  const int64_t m = 10, n = 20, k = 30;
  std::mt19937 rng(3);
  std::vector<float> a = randomValues<float>(m * k, rng);
  std::vector<float> b = randomValues<float>(k * n, rng);
  std::vector<float> c(m * n, std::nanf("")), expected(m * n, 0.f);
  ASSERT_TRUE(zbrt::sgemm(transA, transB, m, n, k, 1.f, a.data(),
                          transA ? m : k, b.data(), transB ? k : n, 0.f,
                          c.data(), n, isa));
  referenceGemm(transA, transB, m, n, k, 1.f, a, transA ? m : k, b,
                transB ? k : n, 0.f, expected, n);
  for (int64_t i = 0; i < m * n; ++i)
    ASSERT_NEAR(c[i], expected[i], 1e-5f) << "at " << i;
}

/// A B packed once serves several products, each equal to the unpacked
/// call bit for bit (the packing is the only difference).
TEST_P(SgemmIsaTest, PackedOnceEqualsPerCall) {
  auto [transA, transB, isa] = GetParam();
  const int64_t m = 40, n = 45, k = 70;
  std::mt19937 rng(5);
  std::vector<float> b = randomValues<float>(k * n, rng);
  std::vector<float> packed(zbrt::sgemmPackedSize(k, n) + 16);
  // 64-byte aligned start inside the vector.
  float *p = packed.data();
  while (reinterpret_cast<uintptr_t>(p) % 64)
    ++p;
  zbrt::sgemmPackB(transB, k, n, b.data(), transB ? k : n, p, isa);
  for (int round = 0; round < 3; ++round) {
    std::vector<float> a = randomValues<float>(m * k, rng);
    std::vector<float> c1(m * n, 0.f), c2(m * n, 0.f);
    zbrt::sgemmPacked(transA, m, n, k, 1.f, a.data(), transA ? m : k, p, 0.f,
                      c1.data(), n, isa);
    ASSERT_TRUE(zbrt::sgemm(transA, transB, m, n, k, 1.f, a.data(),
                            transA ? m : k, b.data(), transB ? k : n, 0.f,
                            c2.data(), n, isa));
    EXPECT_EQ(c1, c2) << "round " << round;
  }
}

/// Whether the term (i, p, j) of C(i, j) is one `terms` asks for.
bool keeps(zbrt::SgemmTerms terms, int64_t i, int64_t p, int64_t j) {
  switch (terms) {
  case zbrt::SgemmTerms::All:
    return true;
  case zbrt::SgemmTerms::KUpToM:
    return p <= i;
  case zbrt::SgemmTerms::KFromM:
    return p >= i;
  case zbrt::SgemmTerms::NUpToM:
    return j <= i;
  case zbrt::SgemmTerms::KUpToN:
    return p <= j;
  case zbrt::SgemmTerms::KFromN:
    return p >= j;
  case zbrt::SgemmTerms::MUpToN:
    return i <= j;
  }
  return true;
}

/// Products over some of their terms (causal attention's): where the
/// terms left out are zeros in an operand, the result equals the whole
/// product bit for bit; where they land in elements not asked for, the
/// others equal it and those hold the product or beta * C. And terms are
/// left out: with NaNs instead of the zeros, or C unchanged where whole
/// blocks are skipped, more elements come out finite or untouched than
/// with every term. Shapes around the register and cache blocks, a second
/// k block, A copied (AVX2, transA, 256 columns or more), ragged blocks
/// that touch the diagonal.
TEST_P(SgemmIsaTest, LeavesOutTermsNotNeeded) {
  auto [transA, transB, isa] = GetParam();
  using zbrt::SgemmTerms;
  std::mt19937 rng(23);
  for (SgemmTerms terms :
       {SgemmTerms::KUpToM, SgemmTerms::KFromM, SgemmTerms::NUpToM,
        SgemmTerms::KUpToN, SgemmTerms::KFromN, SgemmTerms::MUpToN})
    for (auto [m, n, k, corner] :
         {std::tuple<int64_t, int64_t, int64_t, bool>{50, 50, 50, false},
          {130, 70, 130, false},
          {70, 130, 130, false},
          {600, 40, 600, false},
          {40, 600, 600, false},
          {300, 300, 64, false},
          // A ragged last block whose corner is on the diagonal: rows 30-32
          // meet columns 32-39; columns 32-36 meet row 36. With k = 20
          // below a 32-column panel (AVX-512), K_UPTO_N has no whole block
          // to leave out there: its result is checked, not the saving.
          {33, 40, 20, true},
          {40, 37, 20, true}})
      for (float beta : {0.f, 1.f}) {
        bool inResult =
            terms == SgemmTerms::NUpToM || terms == SgemmTerms::MUpToN;
        int64_t lda = transA ? m : k, ldb = transB ? k : n;
        std::vector<float> a = randomValues<float>(m * k, rng);
        std::vector<float> b = randomValues<float>(k * n, rng);
        auto aAt = [&](int64_t i, int64_t p) -> float & {
          return transA ? a[p * lda + i] : a[i * lda + p];
        };
        auto bAt = [&](int64_t p, int64_t j) -> float & {
          return transB ? b[j * ldb + p] : b[p * ldb + j];
        };
        // Zero the operand's entries that only feed terms left out.
        auto fillLeftOut = [&](float value) {
          bool inA = terms == SgemmTerms::KUpToM || terms == SgemmTerms::KFromM;
          for (int64_t p = 0; p < k; ++p)
            for (int64_t x = 0; x < (inA ? m : n); ++x)
              if (!keeps(terms, inA ? x : 0, p, inA ? 0 : x))
                (inA ? aAt(x, p) : bAt(p, x)) = value;
        };
        if (!inResult)
          fillLeftOut(0.f);
        std::vector<float> c0 = beta == 0.f
                                    ? std::vector<float>(m * n, std::nanf(""))
                                    : randomValues<float>(m * n, rng);
        std::vector<float> all = c0, some = c0;
        ASSERT_TRUE(zbrt::sgemm(transA, transB, m, n, k, 0.5f, a.data(), lda,
                                b.data(), ldb, beta, all.data(), n, isa));
        ASSERT_TRUE(zbrt::sgemm(transA, transB, m, n, k, 0.5f, a.data(), lda,
                                b.data(), ldb, beta, some.data(), n, isa,
                                terms));
        std::string what = std::to_string(int(terms)) + " on " +
                           std::to_string(m) + "x" + std::to_string(n) + "x" +
                           std::to_string(k) + " beta " + std::to_string(beta);
        int64_t untouched = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            float want = all[i * n + j], got = some[i * n + j];
            float kept = beta == 0.f ? 0.f : c0[i * n + j];
            if (inResult && !keeps(terms, i, 0, j)) {
              ASSERT_TRUE(got == want || got == kept)
                  << what << " at (" << i << ", " << j << ")";
              untouched += got == kept && got != want;
              continue;
            }
            ASSERT_EQ(got, want) << what << " at (" << i << ", " << j << ")";
          }
        if (corner && terms == SgemmTerms::KUpToN)
          continue;
        if (inResult) {
          EXPECT_GT(untouched, 0) << what;
          continue;
        }
        // NaNs in place of the zeros: the terms left out do not see them.
        fillLeftOut(std::nanf(""));
        all = c0;
        some = c0;
        ASSERT_TRUE(zbrt::sgemm(transA, transB, m, n, k, 0.5f, a.data(), lda,
                                b.data(), ldb, beta, all.data(), n, isa));
        ASSERT_TRUE(zbrt::sgemm(transA, transB, m, n, k, 0.5f, a.data(), lda,
                                b.data(), ldb, beta, some.data(), n, isa,
                                terms));
        auto finite = [](const std::vector<float> &c) {
          return std::count_if(c.begin(), c.end(),
                               [](float x) { return std::isfinite(x); });
        };
        EXPECT_GT(finite(some), finite(all)) << what;
      }
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, SgemmIsaTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Bool(),
                                            ::testing::ValuesIn(kIsas)),
                         [](const auto &info) {
                           return std::string(std::get<0>(info.param) ? "T"
                                                                      : "N") +
                                  (std::get<1>(info.param) ? "T" : "N") + "_" +
                                  zbrt::sgemmIsaName(std::get<2>(info.param));
                         });

/// The two kernels give the same bits: each element sums its k terms in
/// the same order with fused multiply-adds, whatever the register block (A
/// read in place or copied; beta 1 or 0 over a C of NaNs).
TEST(SgemmKernelIsas, SameBits) {
  for (zbrt::SgemmIsa isa : kIsas)
    if (!zbrt::sgemmIsaSupported(isa))
      GTEST_SKIP() << "this CPU has no " << zbrt::sgemmIsaName(isa)
                   << ": one instruction set, nothing to compare";
  std::mt19937 rng(17);
  // The last two copy A when transposed (n >= 256, A's columns spanning
  // more than 32 KB), with a ragged last group of rows for either kernel.
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 45, 1100},
                         {150, 70, 96},
                         {9, 300, 33},
                         {23, 260, 600},
                         {150, 260, 70}})
    for (bool transA : {false, true})
      for (bool transB : {false, true})
        for (float beta : {1.f, 0.f}) {
          std::vector<float> a = randomValues<float>(m * k, rng);
          std::vector<float> b = randomValues<float>(k * n, rng);
          std::vector<float> c0 = beta == 0.f
                                      ? std::vector<float>(m * n, std::nanf(""))
                                      : randomValues<float>(m * n, rng);
          std::vector<float> c512 = c0, c2 = c0;
          ASSERT_TRUE(zbrt::sgemm(transA, transB, m, n, k, 0.5f, a.data(),
                                  transA ? m : k, b.data(), transB ? k : n,
                                  beta, c512.data(), n,
                                  zbrt::SgemmIsa::Avx512));
          ASSERT_TRUE(zbrt::sgemm(transA, transB, m, n, k, 0.5f, a.data(),
                                  transA ? m : k, b.data(), transB ? k : n,
                                  beta, c2.data(), n, zbrt::SgemmIsa::Avx2));
          EXPECT_EQ(c512, c2) << m << "x" << n << "x" << k << " transA "
                              << transA << " transB " << transB << " beta "
                              << beta;
        }
}

/// zbrt_sgemm products A * op(B) of one shape above the kernel's smallest
/// volume, on one OpenBLAS thread (where the kernel serves), with A fixed.
struct WeightProducts {
  static constexpr int64_t m = 128, n = 96, k = 96;
  bool transA, transB;
  int64_t lda = transA ? m : k, ldb = transB ? k : n;
  std::mt19937 rng{9};
  std::vector<float> a = randomValues<float>(m * k, rng);

  WeightProducts(bool transA, bool transB) : transA(transA), transB(transB) {
    openblas_set_num_threads(1);
  }
  std::vector<float> weight() { return randomValues<float>(k * n, rng); }
  std::vector<float> product(const std::vector<float> &b) const {
    std::vector<float> c(m * n, 0.f);
    zbrt_sgemm(transA, transB, m, n, k, 1.f, a.data(), lda, b.data(), ldb, 0.f,
               c.data(), n);
    return c;
  }
};

/// zbrt_sgemm in a PackedWeights scope: a B inside the scope's ranges is
/// packed once and reused, with the same bits as without the scope; a new
/// scope packs it again, so a weight changed between scopes is seen; a B
/// outside the ranges is not kept.
TEST_P(SgemmKernelTest, PackedWeightsScope) {
  auto [transA, transB] = GetParam();
  WeightProducts p(transA, transB);
  const int64_t m = p.m, n = p.n, k = p.k, lda = p.lda, ldb = p.ldb;
  std::vector<float> &a = p.a;
  std::vector<float> weight = p.weight(), other = p.weight();
  auto product = [&](const std::vector<float> &b) { return p.product(b); };
  auto expect = [&](const std::vector<float> &b) {
    std::vector<float> c(m * n, 0.f);
    referenceGemm(transA, transB, m, n, k, 1.f, a, lda, b, ldb, 0.f, c, n);
    return c;
  };
  std::vector<float> unscoped = product(weight);
  EXPECT_EQ(zbrt::packedWeightBytes(), 0u);
  {
    zbrt::PackedWeights scope({{weight.data(), weight.size() * 4}});
    EXPECT_EQ(product(weight), unscoped);
    size_t bytes = zbrt::packedWeightBytes();
    EXPECT_GE(bytes, k * n * sizeof(float));
    // Used again: the same copy, the same bits.
    EXPECT_EQ(product(weight), unscoped);
    EXPECT_EQ(zbrt::packedWeightBytes(), bytes);
    // Outside the ranges: packed per call, nothing kept.
    std::vector<float> outside = product(other);
    EXPECT_EQ(zbrt::packedWeightBytes(), bytes);
    std::vector<float> want = expect(other);
    for (int64_t i = 0; i < m * n; ++i)
      ASSERT_NEAR(outside[i], want[i], 1e-4f) << "at " << i;
  }
  // Between scopes the weight changes (an optimizer step); the next scope
  // packs it again.
  for (float &w : weight)
    w *= -0.5f;
  {
    zbrt::PackedWeights scope({{weight.data(), weight.size() * 4}});
    std::vector<float> got = product(weight), want = expect(weight);
    for (int64_t i = 0; i < m * n; ++i)
      ASSERT_NEAR(got[i], want[i], 1e-4f) << "at " << i;
  }
  // A scope that does not use a copy drops it.
  { zbrt::PackedWeights scope({}); }
  EXPECT_EQ(zbrt::packedWeightBytes(), 0u);
}

/// packWeightWhileIdle repacks the previous scope's copies for the open
/// scope, in the order of their first use there, each once; the products
/// then use them with the bits of per-call packing.
TEST_P(SgemmKernelTest, PackedWeightsIdle) {
  auto [transA, transB] = GetParam();
  WeightProducts p(transA, transB);
  std::vector<float> w1 = p.weight(), w2 = p.weight();
  auto product = [&](const std::vector<float> &b) { return p.product(b); };
  EXPECT_FALSE(zbrt::packWeightWhileIdle()) << "no scope open";
  std::vector<zbrt::MemoryRange> ranges{{w1.data(), w1.size() * 4},
                                        {w2.data(), w2.size() * 4}};
  {
    zbrt::PackedWeights scope(ranges);
    EXPECT_FALSE(zbrt::packWeightWhileIdle()) << "nothing kept yet";
    product(w2);
    product(w1);
  }
  size_t bytes = zbrt::packedWeightBytes();
  // An optimizer step between the scopes.
  for (float &w : w1)
    w *= -0.5f;
  for (float &w : w2)
    w += 0.25f;
  std::vector<float> want1 = product(w1), want2 = product(w2);
  {
    zbrt::PackedWeights scope(ranges);
    // w2 was used first: it is packed first. Its copy now holds the
    // values of this scope, which the product uses (w2 changed behind the
    // scope's back shows it: the product does not see the change).
    ASSERT_TRUE(zbrt::packWeightWhileIdle());
    std::vector<float> saved = w2;
    for (float &w : w2)
      w = 7.0f;
    EXPECT_EQ(product(w2), want2);
    w2 = saved;
    ASSERT_TRUE(zbrt::packWeightWhileIdle());
    EXPECT_FALSE(zbrt::packWeightWhileIdle()) << "each copy once";
    EXPECT_EQ(product(w1), want1);
    EXPECT_EQ(zbrt::packedWeightBytes(), bytes);
  }
  {
    // A scope over other memory repacks nothing.
    std::vector<float> elsewhere = p.weight();
    zbrt::PackedWeights scope({{elsewhere.data(), elsewhere.size() * 4}});
    EXPECT_FALSE(zbrt::packWeightWhileIdle());
  }
  EXPECT_EQ(zbrt::packedWeightBytes(), 0u);
}

/// A scope's packed copies stay within its budget: a weight beyond it is
/// packed per call, with the same bits.
TEST_P(SgemmKernelTest, PackedWeightsBudget) {
  auto [transA, transB] = GetParam();
  WeightProducts p(transA, transB);
  std::vector<float> w1 = p.weight(), w2 = p.weight();
  auto product = [&](const std::vector<float> &b) { return p.product(b); };
  std::vector<float> want1 = product(w1), want2 = product(w2);
  size_t one = zbrt::sgemmPackedSize(p.k, p.n) * sizeof(float);
  {
    // Room for one copy: the first weight is kept, the second is not.
    zbrt::PackedWeights scope(
        {{w1.data(), w1.size() * 4}, {w2.data(), w2.size() * 4}}, one);
    EXPECT_EQ(product(w1), want1);
    EXPECT_EQ(zbrt::packedWeightBytes(), one);
    EXPECT_EQ(product(w2), want2);
    EXPECT_EQ(zbrt::packedWeightBytes(), one);
    EXPECT_EQ(product(w2), want2);
  }
  {
    // No room at all: nothing kept.
    zbrt::PackedWeights scope({{w2.data(), w2.size() * 4}}, 0);
    EXPECT_EQ(product(w2), want2);
  }
  EXPECT_EQ(zbrt::packedWeightBytes(), 0u);
}

/// zbrt_sgemm's choice between the kernel and OpenBLAS, told apart by their
/// bits (k beyond both's blocks, so they sum differently): the kernel above
/// its smallest volume, except that with AVX2 a product with A transposed of
/// 2^24 or more (a weight gradient's X^T dY) goes to OpenBLAS, its B a
/// packed weight or not.
TEST_P(SgemmKernelTest, ChoosesByShapeAndTransposes) {
  auto [transA, transB] = GetParam();
  openblas_set_num_threads(1);
  std::string serving = zbrt::sgemmKernelName();
  std::mt19937 rng(11);
  // 2^21 and 2^24 multiply-adds.
  for (int64_t size : {64, 128}) {
    const int64_t m = size, n = size, k = 8 * size;
    const int64_t lda = transA ? m : k, ldb = transB ? k : n;
    std::vector<float> a = randomValues<float>(m * k, rng);
    std::vector<float> b = randomValues<float>(k * n, rng);
    std::vector<float> got(m * n), scoped(m * n), kernel(m * n), blas(m * n);
    zbrt_sgemm(transA, transB, m, n, k, 1.f, a.data(), lda, b.data(), ldb, 0.f,
               got.data(), n);
    {
      zbrt::PackedWeights scope({{b.data(), b.size() * 4}});
      zbrt_sgemm(transA, transB, m, n, k, 1.f, a.data(), lda, b.data(), ldb,
                 0.f, scoped.data(), n);
    }
    ASSERT_TRUE(zbrt::sgemm(transA, transB, m, n, k, 1.f, a.data(), lda,
                            b.data(), ldb, 0.f, kernel.data(), n));
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, m, n, k, 1.f, a.data(), lda,
                b.data(), ldb, 0.f, blas.data(), n);
    ASSERT_NE(kernel, blas) << "the two sum in the same order: untestable";
    bool toBlas =
        serving == "openblas" || (serving == "avx2" && transA && size == 128);
    EXPECT_EQ(got, toBlas ? blas : kernel)
        << m << " x " << n << " x " << k << ", transA " << transA << ", transB "
        << transB;
    EXPECT_EQ(scoped, got) << "a packed weight chooses as any B does";
  }
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, SgemmKernelTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Bool()));

TEST(RuntimeTest, HasVersion) { EXPECT_STRNE(zbrt_version(), ""); }

} // namespace
