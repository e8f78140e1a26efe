//===- LendingTest.cpp - Products shared with a borrowed core -------------===//
//
// Part of ZeroBubble MLIR.
//
// One process plays a node of two ranks: words it owns stand for the
// node's shared memory, and the test sets the peer's word as a waiting
// rank would. A product that borrows the peer's core must give the bits of
// the kernel's product in one call (a batch: of its items one by one), hand
// the core back, and leave a withdrawn core alone.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Lending.h"
#include "zbrt/Gemm.h"
#include "zbrt/zbrt.h"

#include "Sgemm.h"

#include "gtest/gtest.h"

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" void openblas_set_num_threads(int threads);

using namespace zbrt;

namespace {

constexpr int32_t kBusy = 0, kIdle = 1, kLentToRank0 = 2;

std::vector<float> randomFloats(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> values(n);
  for (float &v : values)
    v = dist(rng);
  return values;
}

bool sameBits(const std::vector<float> &x, const std::vector<float> &y) {
  return x.size() == y.size() &&
         std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

/// This process as local rank 0 of two, the peer's word set by the test.
class LendingTest : public ::testing::Test {
protected:
  void SetUp() override {
    // As in a rank: one OpenBLAS thread, so the kernel takes its products.
    openblas_set_num_threads(1);
    words[0] = kBusy;
    words[1] = kBusy;
    takeLendingCounts();
  }
  void TearDown() override { setLendingWords(nullptr, 0, 0); }
  void install() { setLendingWords(words, 0, 2); }

  /// Runs `product` with the peer offering its core until the helper
  /// thread has run some of the work (at most 2000 tries: the helper needs
  /// a free core in time), each result compared bit for bit with
  /// `expected`.
  template <typename Product>
  void sharesBitForBit(const std::vector<float> &expected, Product product) {
    install();
    ASSERT_TRUE(lendingEnabled());
    LendingCounts total;
    for (int attempt = 0; attempt < 2000 && total.helperItems == 0; ++attempt) {
      words[1] = kIdle;
      std::vector<float> shared = product();
      ASSERT_TRUE(sameBits(expected, shared)) << "attempt " << attempt;
      // Handed back, still offered.
      EXPECT_EQ(words[1].load(), kIdle);
      LendingCounts counts = takeLendingCounts();
      total.shared += counts.shared;
      total.items += counts.items;
      total.helperItems += counts.helperItems;
    }
    EXPECT_GT(total.shared, 0);
    EXPECT_GT(total.helperItems, 0);
  }

  std::atomic<int32_t> words[2];
};

TEST_F(LendingTest, SharedProductEqualsOneKernelCall) {
  // 517 x 300 x 100: above the 2^23 multiply-adds that borrow, below the
  // 2^24 at which an AVX2 host sends a transposed A to OpenBLAS, so the
  // kernel serves all four transposes; 517 rows leave a ragged last block.
  // Expected: the kernel's whole product in one call.
  if (std::string(sgemmKernelName()) == "openblas")
    GTEST_SKIP() << "the kernel does not serve here (no AVX2 or AVX-512, or "
                    "ZB_SGEMM=openblas)";
  const int64_t m = 517, n = 300, k = 100;
  std::mt19937 rng(7);
  std::vector<float> a = randomFloats(m * k, rng), b = randomFloats(k * n, rng);
  std::vector<float> c0 = randomFloats(m * n, rng);
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << "transA " << transA << " transB " << transB);
      int64_t lda = transA ? m : k, ldb = transB ? k : n;
      std::vector<float> expected = c0;
      ASSERT_TRUE(sgemm(transA, transB, m, n, k, 0.5f, a.data(), lda, b.data(),
                        ldb, 0.25f, expected.data(), n));
      sharesBitForBit(expected, [&] {
        std::vector<float> c = c0;
        zbrt_sgemm(transA, transB, m, n, k, 0.5f, a.data(), lda, b.data(), ldb,
                   0.25f, c.data(), n);
        return c;
      });
    }
}

TEST_F(LendingTest, SharedProductEqualsOneCallOfWhatServes) {
  // Weight gradients' X^T dY of 1000 and 385 rows (the last block of 97),
  // 200 columns, k = 700 (over 2^24, which an AVX2 host gives to OpenBLAS
  // on one thread; an AVX-512 host to the kernel): row blocks from both
  // threads, against the same call with nothing lent (one call over every
  // row, its k deeper than either library's block).
  const int64_t n = 200, k = 700;
  std::mt19937 rng(5);
  for (int64_t m : {1000, 385}) {
    std::vector<float> a = randomFloats(k * m, rng);
    std::vector<float> b = randomFloats(k * n, rng);
    std::vector<float> c0 = randomFloats(m * n, rng);
    for (bool transB : {false, true}) {
      SCOPED_TRACE(testing::Message() << "m " << m << " transB " << transB);
      int64_t ldb = transB ? k : n;
      auto product = [&] {
        std::vector<float> c = c0;
        zbrt_sgemm(1, transB, m, n, k, 1.0f, a.data(), m, b.data(), ldb, 1.0f,
                   c.data(), n);
        return c;
      };
      setLendingWords(nullptr, 0, 0);
      std::vector<float> expected = product();
      sharesBitForBit(expected, product);
    }
  }
}

TEST_F(LendingTest, SharedBatchEqualsItsProductsOneByOne) {
  // 64 products of 64 x 64 x 48 (2^23 multiply-adds in all), every term,
  // then with the terms of causal attention's scores only. Expected: each
  // item by its own call, nothing lent.
  const int64_t batch = 64, m = 64, n = 64, k = 48;
  std::mt19937 rng(11);
  std::vector<float> a = randomFloats(batch * m * k, rng);
  std::vector<float> b = randomFloats(batch * n * k, rng);
  std::vector<float> c0 = randomFloats(batch * m * n, rng);
  std::vector<float> expected = c0, expectedTerms = c0;
  for (int64_t i = 0; i < batch; ++i) {
    zbrt_sgemm(0, 1, m, n, k, 1.0f, a.data() + i * m * k, k,
               b.data() + i * n * k, k, 0.0f, expected.data() + i * m * n, n);
    zbrt_sgemm_batched_terms(ZBRT_TERMS_N_UPTO_M, 0, 1, 1, m, n, k, 1.0f,
                             a.data() + i * m * k, k, 0, b.data() + i * n * k,
                             k, 0, 1.0f, expectedTerms.data() + i * m * n, n,
                             0);
  }
  sharesBitForBit(expected, [&] {
    std::vector<float> c = c0;
    zbrt_sgemm_batched(0, 1, batch, m, n, k, 1.0f, a.data(), k, m * k, b.data(),
                       k, n * k, 0.0f, c.data(), n, m * n);
    return c;
  });
  sharesBitForBit(expectedTerms, [&] {
    std::vector<float> c = c0;
    zbrt_sgemm_batched_terms(ZBRT_TERMS_N_UPTO_M, 0, 1, batch, m, n, k, 1.0f,
                             a.data(), k, m * k, b.data(), k, n * k, 1.0f,
                             c.data(), n, m * n);
    return c;
  });
}

TEST_F(LendingTest, BorrowsOnlyAnOfferedCoreOfALargeProduct) {
  const int64_t m = 517, n = 300, k = 100;
  std::mt19937 rng(3);
  std::vector<float> a = randomFloats(m * k, rng), b = randomFloats(k * n, rng);
  std::vector<float> c(m * n);
  install();
  // The peer computes (or withdrew its core): nothing is borrowed.
  zbrt_sgemm(0, 0, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  EXPECT_EQ(words[1].load(), kBusy);
  EXPECT_EQ(takeLendingCounts().shared, 0);
  // Lent to another rank already.
  words[1] = kLentToRank0 + 5;
  zbrt_sgemm(0, 0, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  EXPECT_EQ(words[1].load(), kLentToRank0 + 5);
  EXPECT_EQ(takeLendingCounts().shared, 0);
  // Offered, but the product is below 2^23 multiply-adds.
  words[1] = kIdle;
  zbrt_sgemm(0, 0, 100, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(),
             n);
  EXPECT_EQ(takeLendingCounts().shared, 0);
  // Offered and large: borrowed, and handed back.
  zbrt_sgemm(0, 0, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  EXPECT_EQ(takeLendingCounts().shared, 1);
  EXPECT_EQ(words[1].load(), kIdle);
  // OpenBLAS's other products stay whole: a C of 16 columns (too narrow
  // for the kernel) over 2^23 multiply-adds, and f64 batches.
  std::vector<float> wide(4096 * 256), narrow(256 * 16), out(4096 * 16);
  zbrt_sgemm(0, 0, 4096, 16, 256, 1.0f, wide.data(), 256, narrow.data(), 16,
             0.0f, out.data(), 16);
  std::vector<double> da(64 * 64 * 64, 1.0), db(64 * 64 * 64, 1.0),
      dc(64 * 64 * 64);
  zbrt_dgemm_batched(0, 0, 64, 64, 64, 64, 1.0, da.data(), 64, 64 * 64,
                     db.data(), 64, 64 * 64, 0.0, dc.data(), 64, 64 * 64);
  EXPECT_EQ(takeLendingCounts().shared, 0);
  EXPECT_EQ(words[1].load(), kIdle);
  // A node of one rank never lends.
  setLendingWords(words, 0, 1);
  EXPECT_FALSE(lendingEnabled());
  zbrt_sgemm(0, 0, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  EXPECT_EQ(takeLendingCounts().shared, 0);
}

TEST_F(LendingTest, WaitOffersAndWithdraws) {
  install();
  {
    IdleWait wait;
    EXPECT_EQ(words[0].load(), kBusy); // Not offered until it says so.
    wait.offer();
    EXPECT_EQ(words[0].load(), kIdle);
    EXPECT_FALSE(wait.lent());
    words[0] = kLentToRank0 + 1; // The peer borrows it.
    EXPECT_TRUE(wait.lent());
    wait.offer(); // Offered already: stays lent.
    EXPECT_EQ(words[0].load(), kLentToRank0 + 1);
  }
  EXPECT_EQ(words[0].load(), kBusy);
  // Without lending, nothing is offered.
  setLendingWords(nullptr, 0, 0);
  IdleWait wait;
  wait.offer();
  EXPECT_FALSE(wait.lent());
  EXPECT_EQ(words[0].load(), kBusy);
}

} // namespace
