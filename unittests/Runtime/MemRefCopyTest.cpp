//===- MemRefCopyTest.cpp - memrefCopy against index arithmetic -----------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/zbrt.h"

#include "gtest/gtest.h"

#include <numeric>
#include <vector>

namespace {

/// A ranked descriptor as compiled code lays it out.
template <int Rank> struct Descriptor {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];
};

template <int Rank>
zbrt_unranked_memref unranked(Descriptor<Rank> &d) {
  return {Rank, &d};
}

TEST(MemRefCopy, TransposedView) {
  // src: a 3x4 row-major buffer read as its 4x3 transpose, from offset 2 of
  // a larger allocation; dst: a contiguous 4x3 buffer.
  std::vector<float> srcData(2 + 12);
  std::iota(srcData.begin(), srcData.end(), 0.0f);
  std::vector<float> dstData(12, -1.0f);
  Descriptor<2> src{srcData.data(), srcData.data(), 2, {4, 3}, {1, 4}};
  Descriptor<2> dst{dstData.data(), dstData.data(), 0, {4, 3}, {3, 1}};
  zbrt_unranked_memref s = unranked(src), d = unranked(dst);
  memrefCopy(sizeof(float), &s, &d);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(dstData[i * 3 + j], srcData[2 + j * 4 + i]) << i << "," << j;
}

TEST(MemRefCopy, RowsOfAPaddedBuffer) {
  // Contiguous rows, strided between rows: a 2x3x2 window of a 2x4x5 buffer.
  std::vector<float> srcData(40);
  std::iota(srcData.begin(), srcData.end(), 0.0f);
  std::vector<float> dstData(2 * 3 * 5, -1.0f);
  Descriptor<3> src{srcData.data(), srcData.data(), 6, {2, 3, 2}, {20, 5, 1}};
  Descriptor<3> dst{dstData.data(), dstData.data(), 1, {2, 3, 2}, {15, 5, 1}};
  zbrt_unranked_memref s = unranked(src), d = unranked(dst);
  memrefCopy(sizeof(float), &s, &d);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 5; ++c) {
        float want = c >= 1 && c < 3 ? srcData[6 + a * 20 + b * 5 + (c - 1)]
                                     : -1.0f;
        EXPECT_EQ(dstData[a * 15 + b * 5 + c], want) << a << b << c;
      }
}

TEST(MemRefCopy, ScalarAndEmpty) {
  float x = 3.5f, y = 0.0f;
  struct {
    float *allocated, *aligned;
    int64_t offset;
  } src{&x, &x, 0}, dst{&y, &y, 0};
  zbrt_unranked_memref s{0, &src}, d{0, &dst};
  memrefCopy(sizeof(float), &s, &d);
  EXPECT_EQ(y, 3.5f);

  // An empty shape copies nothing (and reads no element).
  float z = 7.0f;
  Descriptor<1> empty{nullptr, nullptr, 0, {0}, {1}};
  Descriptor<1> out{&z, &z, 0, {0}, {1}};
  zbrt_unranked_memref e = unranked(empty), o = unranked(out);
  memrefCopy(sizeof(float), &e, &o);
  EXPECT_EQ(z, 7.0f);
}

} // namespace
