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
 * Computed by the runtime's kernel (AVX-512 or AVX2) or OpenBLAS
 * (docs/Runtime.md). */
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

/* zbrt_sgemm_batched of A and B rounded to bf16 (to nearest, ties to even)
 * first: products of bf16 inputs accumulated in f32, as the device's
 * zbrt_gpu_sgemm_batched_bf16 (cuBLAS's 32F_FAST_16BF) computes them; its
 * host counterpart for --zb-emulate-gpu. */
void zbrt_sgemm_batched_bf16(int32_t transA, int32_t transB, int64_t batch,
                             int64_t m, int64_t n, int64_t k, float alpha,
                             const float *a, int64_t lda, int64_t strideA,
                             const float *b, int64_t ldb, int64_t strideB,
                             float beta, float *c, int64_t ldc,
                             int64_t strideC);

/* zbrt_sgemm_batched over some of the terms of each product, where the
 * others are known to be zero or to land in elements nothing reads (the
 * products of causal attention, --zb-mark-triangular-products). With
 * C(i, j) = sum over p of op(A)(i, p) op(B)(p, j), `terms` keeps:
 *   ZBRT_TERMS_ALL      every term (zbrt_sgemm_batched);
 *   ZBRT_TERMS_K_UPTO_M the terms with p <= i;
 *   ZBRT_TERMS_K_FROM_M the terms with p >= i;
 *   ZBRT_TERMS_N_UPTO_M the terms of the elements with j <= i;
 *   ZBRT_TERMS_K_UPTO_N the terms with p <= j;
 *   ZBRT_TERMS_K_FROM_N the terms with p >= j;
 *   ZBRT_TERMS_M_UPTO_N the terms of the elements with i <= j.
 * The kernel leaves out whole register blocks of terms, so some of the
 * others may still be computed: with K_* the terms left out must be zero
 * (an operand's entries there are), and then the result is the kernel's
 * over every term, bit for bit up to the sign of a zero (each element sums
 * its terms in order); with N_UPTO_M / M_UPTO_N the elements beyond the
 * diagonal are not defined (each holds the product or beta * C): for
 * elements nothing reads. These products take the kernel whatever their
 * size; where it does not serve f32 products (no AVX2, ZB_SGEMM=openblas,
 * OpenBLAS on several threads), or its packing buffer cannot be allocated,
 * every term is computed as zbrt_sgemm_batched computes it. */
enum {
  ZBRT_TERMS_ALL = 0,
  ZBRT_TERMS_K_UPTO_M = 1,
  ZBRT_TERMS_K_FROM_M = 2,
  ZBRT_TERMS_N_UPTO_M = 3,
  ZBRT_TERMS_K_UPTO_N = 4,
  ZBRT_TERMS_K_FROM_N = 5,
  ZBRT_TERMS_M_UPTO_N = 6
};
void zbrt_sgemm_batched_terms(int32_t terms, int32_t transA, int32_t transB,
                              int64_t batch, int64_t m, int64_t n, int64_t k,
                              float alpha, const float *a, int64_t lda,
                              int64_t strideA, const float *b, int64_t ldb,
                              int64_t strideB, float beta, float *c,
                              int64_t ldc, int64_t strideC);

/* Transposing copies: for every b0 < batch0 and b1 < batch1, the rows x
 * cols matrix at in + b0*inStride0 + b1*inStride1 (rows ldIn apart, columns
 * contiguous) is written transposed, cols x rows, at out + b0*outStride0 +
 * b1*outStride1 (rows ldOut apart, columns contiguous); the two must not
 * overlap. What compiled code calls for an f32 permutation copy that moves
 * the innermost dimension (--zb-lower-transposes-to-runtime). */
void zbrt_transpose_f32(int64_t batch0, int64_t batch1, int64_t rows,
                        int64_t cols, const float *in, int64_t inStride0,
                        int64_t inStride1, int64_t ldIn, float *out,
                        int64_t outStride0, int64_t outStride1, int64_t ldOut);

/* The same two in double precision (f64 models, such as gradient checks). */
void zbrt_dgemm(int32_t transA, int32_t transB, int64_t m, int64_t n, int64_t k,
                double alpha, const double *a, int64_t lda, const double *b,
                int64_t ldb, double beta, double *c, int64_t ldc);
void zbrt_dgemm_batched(int32_t transA, int32_t transB, int64_t batch,
                        int64_t m, int64_t n, int64_t k, double alpha,
                        const double *a, int64_t lda, int64_t strideA,
                        const double *b, int64_t ldb, int64_t strideB,
                        double beta, double *c, int64_t ldc, int64_t strideC);

/* Grouped products (a mixture of experts' layers): each row r of a
 * product belongs to group group[r * groupStride] (its expert), rows of
 * any group order; a row whose group is not in [0, groups) contributes
 * nothing. Each group's rows are computed in one gemm.
 *
 * zbrt_sgemm_grouped_rows: every row times its group's matrix,
 *   C[r, :] = A[r, :] * op(B_g) + beta * C[r, :],  g = group[r],
 * A rows x k, C rows x n, B_g = b + g * strideB k x n (n x k stored when
 * transB). A row in no group gets beta * C[r, :].
 *
 * zbrt_sgemm_grouped_reduce: each group's matrix summed over its rows,
 *   C_g = sum over rows r of group g of A[r, :]^T B[r, :] + beta * C_g,
 * A rows x m, B rows x n, C_g = c + g * strideC m x n (a group without
 * rows gets beta * C_g).
 *
 * beta 0 overwrites C whatever it held. The d variants are the same in
 * double precision. */
void zbrt_sgemm_grouped_rows(int32_t transB, int64_t rows, int64_t n, int64_t k,
                             int64_t groups, const float *a, int64_t lda,
                             const float *b, int64_t ldb, int64_t strideB,
                             float beta, float *c, int64_t ldc,
                             const int64_t *group, int64_t groupStride);
void zbrt_sgemm_grouped_reduce(int64_t rows, int64_t m, int64_t n,
                               int64_t groups, const float *a, int64_t lda,
                               const float *b, int64_t ldb, float beta,
                               float *c, int64_t ldc, int64_t strideC,
                               const int64_t *group, int64_t groupStride);
void zbrt_dgemm_grouped_rows(int32_t transB, int64_t rows, int64_t n, int64_t k,
                             int64_t groups, const double *a, int64_t lda,
                             const double *b, int64_t ldb, int64_t strideB,
                             double beta, double *c, int64_t ldc,
                             const int64_t *group, int64_t groupStride);
void zbrt_dgemm_grouped_reduce(int64_t rows, int64_t m, int64_t n,
                               int64_t groups, const double *a, int64_t lda,
                               const double *b, int64_t ldb, double beta,
                               double *c, int64_t ldc, int64_t strideC,
                               const int64_t *group, int64_t groupStride);

/*===----------------------------------------------------------------------===*\
|* Point-to-point transfers                                                   *|
\*===----------------------------------------------------------------------===*/

/* An unranked memref as MLIR passes it through a C interface: the rank and a
 * pointer to the ranked descriptor
 *   { T *allocated; T *aligned; int64_t offset;
 *     int64_t sizes[rank]; int64_t strides[rank]; }. */
typedef struct zbrt_unranked_memref {
  int64_t rank;
  void *descriptor;
} zbrt_unranked_memref;

/* memref.copy between strided buffers of elements of `elemSize` bytes (the
 * ABI of MLIR's C runner utilities, which compiled models do not link). */
void memrefCopy(int64_t elemSize, zbrt_unranked_memref *src,
                zbrt_unranked_memref *dst);

/* What compiled code calls for
 *   func.func private @zbrt_send_f32(memref<*xf32>, i64, i64)
 *       attributes {llvm.emit_c_interface}
 * (and recv, and the other element types): send the elements of `buf` (in
 * row-major order; any strides) to rank `peer` on `channel` (the MPI tag).
 * A send does not block: the data is copied and the transfer completes by
 * zbrt_step_end(). A recv blocks until the elements have arrived in `buf`;
 * its element count must equal the matching send's. The k-th send from one
 * rank to another on a channel meets the k-th recv there. They use the
 * communicator set with zbrt_set_comm() (zbrt/Comm.h); errors and timeouts
 * end the job with "zb-run: error: rank R: ...". */
void _mlir_ciface_zbrt_send_f32(zbrt_unranked_memref *buf, int64_t peer,
                                int64_t channel);
void _mlir_ciface_zbrt_recv_f32(zbrt_unranked_memref *buf, int64_t peer,
                                int64_t channel);
void _mlir_ciface_zbrt_send_f64(zbrt_unranked_memref *buf, int64_t peer,
                                int64_t channel);
void _mlir_ciface_zbrt_recv_f64(zbrt_unranked_memref *buf, int64_t peer,
                                int64_t channel);
void _mlir_ciface_zbrt_send_i32(zbrt_unranked_memref *buf, int64_t peer,
                                int64_t channel);
void _mlir_ciface_zbrt_recv_i32(zbrt_unranked_memref *buf, int64_t peer,
                                int64_t channel);
void _mlir_ciface_zbrt_send_i64(zbrt_unranked_memref *buf, int64_t peer,
                                int64_t channel);
void _mlir_ciface_zbrt_recv_i64(zbrt_unranked_memref *buf, int64_t peer,
                                int64_t channel);
void _mlir_ciface_zbrt_send_i1(zbrt_unranked_memref *buf, int64_t peer,
                               int64_t channel);
void _mlir_ciface_zbrt_recv_i1(zbrt_unranked_memref *buf, int64_t peer,
                               int64_t channel);

/* What compiled code calls for
 *   func.func private @zbrt_group_sum_f32(memref<*xf32>, memref<*xi64>)
 *       attributes {llvm.emit_c_interface}
 * (sched.allreduce): starts summing the contiguous `buf` over the ranks
 * listed in `group` (distinct, increasing, this rank among them), without
 * blocking; every rank of the group ends with the same bits. Every rank of
 * the group starts the same sums in the same order. The sums complete by
 * zbrt_wait_group_sums(), which the step function calls before it returns
 * its gradients.
 *
 * zbrt_replica_mean_f32 (sched.allreduce of a program with replicas, data
 * parallelism) is the same over the ranks of `group` in every replica of
 * the pipeline (zbrt_set_replicas, zbrt/Comm.h), divided by the number of
 * replicas once the sum completes: the mean over the replicas of the
 * group's sum, the same bits on every rank that takes part.
 *
 * The _f64 forms do the same for memref<*xf64>, the gradients of f64
 * parameters. */
void _mlir_ciface_zbrt_group_sum_f32(zbrt_unranked_memref *buf,
                                     zbrt_unranked_memref *group);
void _mlir_ciface_zbrt_replica_mean_f32(zbrt_unranked_memref *buf,
                                        zbrt_unranked_memref *group);
void _mlir_ciface_zbrt_group_sum_f64(zbrt_unranked_memref *buf,
                                     zbrt_unranked_memref *group);
void _mlir_ciface_zbrt_replica_mean_f64(zbrt_unranked_memref *buf,
                                        zbrt_unranked_memref *group);
void zbrt_wait_group_sums(void);

/* What compiled code calls for
 *   func.func private @zbrt_record_stat_f32(memref<*xf32>, memref<*xi8>)
 *       attributes {llvm.emit_c_interface}
 * (pipe.running_stat, and the f64 form): keeps a copy of `buf`'s elements
 * (row-major, any strides) under the running statistic whose name the
 * bytes of `name` spell, when the driver asks for records
 * (zbrt/RunningStats.h); otherwise does nothing. */
void _mlir_ciface_zbrt_record_stat_f32(zbrt_unranked_memref *buf,
                                       zbrt_unranked_memref *name);
void _mlir_ciface_zbrt_record_stat_f64(zbrt_unranked_memref *buf,
                                       zbrt_unranked_memref *name);

/* Waits until every send posted so far has completed (call it at the end of
 * a step, before reusing or freeing anything). Does nothing when no
 * communicator is set. */
void zbrt_step_end(void);

/*===----------------------------------------------------------------------===*\
|* Action records and memory                                                  *|
\*===----------------------------------------------------------------------===*/

/* Compiled rank programs call these around every scheduled action: `phase`
 * 0 F, 1 B, 2 W, 3 BW (fused backward), with its stage and microbatch. The
 * runtime records the start and end (steady clock) and the bytes compiled
 * code holds at the end; zb-run reads the records (zbrt/Trace.h) for the
 * trace, the profile, the bubble rate and the stash memory. */
void zbrt_action_begin(int32_t phase, int64_t stage, int64_t microbatch);
void zbrt_action_end(int32_t phase, int64_t stage, int64_t microbatch);

/* The allocator of compiled code: MLIR's generic allocation functions
 * (`finalize-memref-to-llvm{use-generic-functions=1}`), which count the
 * bytes live and their peak (zbrt/Trace.h). Blocks come from malloc. */
void *_mlir_memref_to_llvm_alloc(uint64_t size);
void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t size);
void _mlir_memref_to_llvm_free(void *ptr);

/* Adds `delta` bytes to the count of what compiled code holds (negative: a
 * free); the allocators above and the GPU runtime's device allocator
 * (mgpuMemAlloc/mgpuMemFree) report through it. */
void zbrt_count_bytes(int64_t delta);

#ifdef __cplusplus
}
#endif

#endif /* ZBRT_ZBRT_H */
