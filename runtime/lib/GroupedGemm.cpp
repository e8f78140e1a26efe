//===- GroupedGemm.cpp - Products of rows routed to groups ----------------===//
//
// Part of ZeroBubble MLIR.
//
// A group's rows are gathered into contiguous scratch rows (unless they are
// contiguous already), multiplied in one gemm of the runtime's, and the
// results scattered back: the packing costs a copy of the rows, the gemm
// the group's FLOPs alone.
//
//===----------------------------------------------------------------------===//

#include "zbrt/zbrt.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const T *a,
          int64_t lda, const T *b, int64_t ldb, T beta, T *c, int64_t ldc);

template <>
void gemm<float>(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 const float *a, int64_t lda, const float *b, int64_t ldb,
                 float beta, float *c, int64_t ldc) {
  zbrt_sgemm(transA, transB, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

template <>
void gemm<double>(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  const double *a, int64_t lda, const double *b, int64_t ldb,
                  double beta, double *c, int64_t ldc) {
  zbrt_dgemm(transA, transB, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

/// The rows of each group in [0, groups), in row order: group g's are
/// rows[start[g] .. start[g + 1]).
struct Groups {
  std::vector<int64_t> start, rows;

  Groups(int64_t numRows, int64_t groups, const int64_t *group, int64_t stride)
      : start(groups + 1, 0) {
    auto groupOf = [&](int64_t r) { return group[r * stride]; };
    for (int64_t r = 0; r < numRows; ++r)
      if (int64_t g = groupOf(r); g >= 0 && g < groups)
        ++start[g + 1];
    for (int64_t g = 0; g < groups; ++g)
      start[g + 1] += start[g];
    rows.resize(start[groups]);
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t r = 0; r < numRows; ++r)
      if (int64_t g = groupOf(r); g >= 0 && g < groups)
        rows[next[g]++] = r;
  }

  int64_t size(int64_t g) const { return start[g + 1] - start[g]; }
  const int64_t *begin(int64_t g) const { return rows.data() + start[g]; }
  /// Whether group g's rows are consecutive (a slice of the matrix).
  bool contiguous(int64_t g) const {
    int64_t count = size(g);
    return count == 0 || begin(g)[count - 1] - begin(g)[0] == count - 1;
  }
};

/// Copies `count` rows of `width` elements, row rows[i] of `from` (row
/// stride `ld`) into row i of `to` (contiguous).
template <typename T>
void gatherRows(const T *from, int64_t ld, const int64_t *rows, int64_t count,
                int64_t width, T *to) {
  for (int64_t i = 0; i < count; ++i)
    std::copy_n(from + rows[i] * ld, width, to + i * width);
}

/// `row` = beta * `row` (beta 0: zeros, whatever it held).
template <typename T> void scaleRow(T *row, int64_t width, T beta) {
  if (beta == T(0))
    std::fill_n(row, width, T(0));
  else if (beta != T(1))
    for (int64_t j = 0; j < width; ++j)
      row[j] *= beta;
}

template <typename T> std::vector<T> &scratch(int which) {
  thread_local std::vector<T> buffers[2];
  return buffers[which];
}

template <typename T>
void groupedRows(bool transB, int64_t numRows, int64_t n, int64_t k,
                 int64_t groups, const T *a, int64_t lda, const T *b,
                 int64_t ldb, int64_t strideB, T beta, T *c, int64_t ldc,
                 const int64_t *group, int64_t groupStride) {
  Groups byGroup(numRows, groups, group, groupStride);
  if (int64_t(byGroup.rows.size()) < numRows) {
    std::vector<bool> grouped(numRows, false);
    for (int64_t r : byGroup.rows)
      grouped[r] = true;
    for (int64_t r = 0; r < numRows; ++r)
      if (!grouped[r])
        scaleRow(c + r * ldc, n, beta);
  }
  std::vector<T> &rowsA = scratch<T>(0), &rowsC = scratch<T>(1);
  for (int64_t g = 0; g < groups; ++g) {
    int64_t count = byGroup.size(g);
    if (count == 0)
      continue;
    const T *bg = b + g * strideB;
    const int64_t *rows = byGroup.begin(g);
    if (byGroup.contiguous(g)) {
      gemm<T>(false, transB, count, n, k, a + rows[0] * lda, lda, bg, ldb, beta,
              c + rows[0] * ldc, ldc);
      continue;
    }
    rowsA.resize(count * k);
    rowsC.resize(count * n);
    gatherRows(a, lda, rows, count, k, rowsA.data());
    gemm<T>(false, transB, count, n, k, rowsA.data(), k, bg, ldb, T(0),
            rowsC.data(), n);
    for (int64_t i = 0; i < count; ++i) {
      T *row = c + rows[i] * ldc;
      const T *product = rowsC.data() + i * n;
      if (beta == T(0))
        std::copy_n(product, n, row);
      else
        for (int64_t j = 0; j < n; ++j)
          row[j] = beta * row[j] + product[j];
    }
  }
}

template <typename T>
void groupedReduce(int64_t numRows, int64_t m, int64_t n, int64_t groups,
                   const T *a, int64_t lda, const T *b, int64_t ldb, T beta,
                   T *c, int64_t ldc, int64_t strideC, const int64_t *group,
                   int64_t groupStride) {
  Groups byGroup(numRows, groups, group, groupStride);
  std::vector<T> &rowsA = scratch<T>(0), &rowsB = scratch<T>(1);
  for (int64_t g = 0; g < groups; ++g) {
    T *cg = c + g * strideC;
    int64_t count = byGroup.size(g);
    const int64_t *rows = byGroup.begin(g);
    if (count == 0) {
      for (int64_t i = 0; i < m; ++i)
        scaleRow(cg + i * ldc, n, beta);
    } else if (byGroup.contiguous(g)) {
      gemm<T>(true, false, m, n, count, a + rows[0] * lda, lda,
              b + rows[0] * ldb, ldb, beta, cg, ldc);
    } else {
      rowsA.resize(count * m);
      rowsB.resize(count * n);
      gatherRows(a, lda, rows, count, m, rowsA.data());
      gatherRows(b, ldb, rows, count, n, rowsB.data());
      gemm<T>(true, false, m, n, count, rowsA.data(), m, rowsB.data(), n, beta,
              cg, ldc);
    }
  }
}

} // namespace

extern "C" {

void zbrt_sgemm_grouped_rows(int32_t transB, int64_t rows, int64_t n, int64_t k,
                             int64_t groups, const float *a, int64_t lda,
                             const float *b, int64_t ldb, int64_t strideB,
                             float beta, float *c, int64_t ldc,
                             const int64_t *group, int64_t groupStride) {
  groupedRows<float>(transB, rows, n, k, groups, a, lda, b, ldb, strideB, beta,
                     c, ldc, group, groupStride);
}

void zbrt_sgemm_grouped_reduce(int64_t rows, int64_t m, int64_t n,
                               int64_t groups, const float *a, int64_t lda,
                               const float *b, int64_t ldb, float beta,
                               float *c, int64_t ldc, int64_t strideC,
                               const int64_t *group, int64_t groupStride) {
  groupedReduce<float>(rows, m, n, groups, a, lda, b, ldb, beta, c, ldc,
                       strideC, group, groupStride);
}

void zbrt_dgemm_grouped_rows(int32_t transB, int64_t rows, int64_t n, int64_t k,
                             int64_t groups, const double *a, int64_t lda,
                             const double *b, int64_t ldb, int64_t strideB,
                             double beta, double *c, int64_t ldc,
                             const int64_t *group, int64_t groupStride) {
  groupedRows<double>(transB, rows, n, k, groups, a, lda, b, ldb, strideB, beta,
                      c, ldc, group, groupStride);
}

void zbrt_dgemm_grouped_reduce(int64_t rows, int64_t m, int64_t n,
                               int64_t groups, const double *a, int64_t lda,
                               const double *b, int64_t ldb, double beta,
                               double *c, int64_t ldc, int64_t strideC,
                               const int64_t *group, int64_t groupStride) {
  groupedReduce<double>(rows, m, n, groups, a, lda, b, ldb, beta, c, ldc,
                        strideC, group, groupStride);
}

} // extern "C"
