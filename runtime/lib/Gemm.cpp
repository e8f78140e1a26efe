//===- Gemm.cpp - Matrix products on the host BLAS ------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/zbrt.h"

#include <cblas.h>

extern "C" void zbrt_sgemm(int32_t transA, int32_t transB, int64_t m, int64_t n,
                           int64_t k, float alpha, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float beta, float *c,
                           int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

extern "C" void zbrt_dgemm(int32_t transA, int32_t transB, int64_t m, int64_t n,
                           int64_t k, double alpha, const double *a,
                           int64_t lda, const double *b, int64_t ldb,
                           double beta, double *c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

/// A batch of `gemm` calls, the matrices `stride*` elements apart.
template <typename T, typename Gemm>
static void batched(Gemm gemm, int32_t transA, int32_t transB, int64_t batch,
                    int64_t m, int64_t n, int64_t k, T alpha, const T *a,
                    int64_t lda, int64_t strideA, const T *b, int64_t ldb,
                    int64_t strideB, T beta, T *c, int64_t ldc,
                    int64_t strideC) {
  for (int64_t i = 0; i < batch; ++i)
    gemm(transA, transB, m, n, k, alpha, a + i * strideA, lda, b + i * strideB,
         ldb, beta, c + i * strideC, ldc);
}

extern "C" void zbrt_sgemm_batched(int32_t transA, int32_t transB,
                                   int64_t batch, int64_t m, int64_t n,
                                   int64_t k, float alpha, const float *a,
                                   int64_t lda, int64_t strideA,
                                   const float *b, int64_t ldb,
                                   int64_t strideB, float beta, float *c,
                                   int64_t ldc, int64_t strideC) {
  batched(zbrt_sgemm, transA, transB, batch, m, n, k, alpha, a, lda, strideA, b,
          ldb, strideB, beta, c, ldc, strideC);
}

extern "C" void zbrt_dgemm_batched(int32_t transA, int32_t transB,
                                   int64_t batch, int64_t m, int64_t n,
                                   int64_t k, double alpha, const double *a,
                                   int64_t lda, int64_t strideA,
                                   const double *b, int64_t ldb,
                                   int64_t strideB, double beta, double *c,
                                   int64_t ldc, int64_t strideC) {
  batched(zbrt_dgemm, transA, transB, batch, m, n, k, alpha, a, lda, strideA, b,
          ldb, strideB, beta, c, ldc, strideC);
}
