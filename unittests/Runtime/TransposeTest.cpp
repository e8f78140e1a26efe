//===- TransposeTest.cpp - The runtime's transposes against indexing ------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/zbrt.h"

#include "Sgemm.h"

#include "gtest/gtest.h"

#include <vector>

namespace {

using zbrt::SgemmIsa;

/// A distinct value per element, so that a misplaced one shows.
std::vector<float> numbered(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(i) + 0.5f;
  return v;
}

class TransposeIsaTest : public testing::TestWithParam<SgemmIsa> {};

TEST_P(TransposeIsaTest, EveryShapeAroundTheBlocks) {
  SgemmIsa isa = GetParam();
  if (isa != SgemmIsa::None && !zbrt::sgemmIsaSupported(isa))
    GTEST_SKIP() << zbrt::sgemmIsaName(isa) << " is not on this CPU";
  // Sizes below, at and past the 8 x 8 blocks, with padded rows on both
  // sides; the padding must stay as it was.
  for (int64_t rows : {1, 7, 8, 9, 16, 19})
    for (int64_t cols : {1, 5, 8, 13, 24}) {
      int64_t ldIn = cols + 3, ldOut = rows + 2;
      std::vector<float> in = numbered(rows * ldIn);
      std::vector<float> out(cols * ldOut, -1.0f);
      zbrt::transposeF32(rows, cols, in.data(), ldIn, out.data(), ldOut, isa);
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t i = 0; i < ldOut; ++i)
          ASSERT_EQ(out[j * ldOut + i], i < rows ? in[i * ldIn + j] : -1.0f)
              << rows << "x" << cols << " at (" << j << ", " << i << ")";
    }
}

INSTANTIATE_TEST_SUITE_P(Isas, TransposeIsaTest,
                         testing::Values(SgemmIsa::None, SgemmIsa::Avx2,
                                         SgemmIsa::Avx512),
                         [](const testing::TestParamInfo<SgemmIsa> &info) {
                           return std::string(zbrt::sgemmIsaName(info.param));
                         });

TEST(Transpose, BatchesOfAttentionsKeys) {
  // K^T of attention: (batch, token, head, feature) -> (batch, head,
  // feature, token), as --zb-lower-transposes-to-runtime calls it.
  const int64_t b = 2, t = 12, h = 3, d = 10;
  std::vector<float> k = numbered(b * t * h * d);
  std::vector<float> kt(b * h * d * t, -1.0f);
  zbrt_transpose_f32(b, h, t, d, k.data(), t * h * d, d, h * d, kt.data(),
                     h * d * t, d * t, t);
  for (int64_t i0 = 0; i0 < b; ++i0)
    for (int64_t i1 = 0; i1 < h; ++i1)
      for (int64_t i2 = 0; i2 < d; ++i2)
        for (int64_t i3 = 0; i3 < t; ++i3)
          ASSERT_EQ(kt[((i0 * h + i1) * d + i2) * t + i3],
                    k[((i0 * t + i3) * h + i1) * d + i2])
              << i0 << " " << i1 << " " << i2 << " " << i3;
}

TEST(Transpose, NothingToDo) {
  // Empty batches or matrices write nothing.
  float in = 1.0f, out = -1.0f;
  zbrt_transpose_f32(0, 1, 1, 1, &in, 0, 0, 1, &out, 0, 0, 1);
  zbrt_transpose_f32(1, 1, 0, 1, &in, 0, 0, 1, &out, 0, 0, 1);
  EXPECT_EQ(out, -1.0f);
}

} // namespace
