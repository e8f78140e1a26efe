/*===- zbrt.h - The ZeroBubble runtime C ABI ---------------------*- C -*-===*\
|*                                                                            *|
|* Part of ZeroBubble MLIR.                                                   *|
|*                                                                            *|
|* The functions compiled rank programs call. Plain C, no MLIR dependency.   *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ZBRT_ZBRT_H
#define ZBRT_ZBRT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The runtime's version, "MAJOR.MINOR.PATCH". */
const char *zbrt_version(void);

/* Single-precision row-major GEMM: C = alpha * op(A) * op(B) + beta * C,
 * with op(X) = X or X^T as transA / transB say. op(A) is m x k, op(B) is
 * k x n, C is m x n; lda, ldb, ldc are the row strides of A, B, C as stored.
 * Computed with the host BLAS (OpenBLAS). */
void zbrt_sgemm(int32_t transA, int32_t transB, int64_t m, int64_t n, int64_t k,
                float alpha, const float *a, int64_t lda, const float *b,
                int64_t ldb, float beta, float *c, int64_t ldc);

/* A batch of the same GEMM: for i in [0, batch), the matrices start at
 * a + i*strideA, b + i*strideB, c + i*strideC. This is what compiled code
 * calls for linalg matmul-family ops. */
void zbrt_sgemm_batched(int32_t transA, int32_t transB, int64_t batch,
                        int64_t m, int64_t n, int64_t k, float alpha,
                        const float *a, int64_t lda, int64_t strideA,
                        const float *b, int64_t ldb, int64_t strideB,
                        float beta, float *c, int64_t ldc, int64_t strideC);

#ifdef __cplusplus
}
#endif

#endif /* ZBRT_ZBRT_H */
