//===- Sgemm.h - The f32 matrix product for one thread ----------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//
//
// The runtime's own single-thread f32 gemm (Sgemm.cpp): row-major
// C = alpha * op(A) * op(B) + beta * C with B packed into 32-column panels
// and A read in place. It needs AVX-512F or AVX2 with FMA
// (sgemmKernelAvailable), and gives the same bits with either; zbrt_sgemm
// (Gemm.cpp) decides when it serves a call and when OpenBLAS does.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_LIB_SGEMM_H
#define ZBRT_LIB_SGEMM_H

#include "zbrt/zbrt.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace zbrt {

/// A 64-byte aligned float buffer that grows on demand.
class AlignedFloats {
public:
  /// Room for `floats`, the contents lost when it grows; false (and empty)
  /// when it cannot be allocated.
  bool reserve(size_t floats) {
    if (floats <= capacity)
      return true;
    size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    storage.reset(static_cast<float *>(std::aligned_alloc(64, bytes)));
    capacity = storage ? floats : 0;
    return storage != nullptr;
  }
  float *data() const { return storage.get(); }
  size_t size() const { return capacity; }

private:
  std::unique_ptr<float, decltype(&std::free)> storage{nullptr, &std::free};
  size_t capacity = 0;
};

/// The instruction sets the kernel is written for.
enum class SgemmIsa { None, Avx2, Avx512 };

/// Which terms of C(i, j) = sum over p of op(A)(i, p) * op(B)(p, j) a
/// product computes: zbrt_sgemm_batched_terms's term sets (zbrt.h). The
/// kernel leaves out whole register blocks of the others (a block with
/// none of its terms kept gets beta * C), so some of them are still
/// computed.
enum class SgemmTerms : int32_t {
  All = ZBRT_TERMS_ALL,
  KUpToM = ZBRT_TERMS_K_UPTO_M,
  KFromM = ZBRT_TERMS_K_FROM_M,
  NUpToM = ZBRT_TERMS_N_UPTO_M,
  KUpToN = ZBRT_TERMS_K_UPTO_N,
  KFromN = ZBRT_TERMS_K_FROM_N,
  MUpToN = ZBRT_TERMS_M_UPTO_N
};

/// Whether this CPU runs `isa`'s kernel (AVX2 needs FMA as well).
bool sgemmIsaSupported(SgemmIsa isa);

/// The best instruction set this CPU runs the kernel with: AVX-512F, else
/// AVX2, else None.
SgemmIsa sgemmIsa();

/// "avx512", "avx2" or "none".
const char *sgemmIsaName(SgemmIsa isa);

/// Whether this CPU runs the kernel at all (sgemmIsa() is not None).
bool sgemmKernelAvailable();

/// Floats a packed op(B) of k x n takes.
size_t sgemmPackedSize(int64_t k, int64_t n);

/// Packs op(B) (k x n; B itself n x k when transB) into `packed`, which
/// holds sgemmPackedSize(k, n) floats and is 64-byte aligned. The layout is
/// the same for every instruction set. `isa` must be supported (all three
/// functions below take it, by default the best one).
void sgemmPackB(bool transB, int64_t k, int64_t n, const float *b, int64_t ldb,
                float *packed, SgemmIsa isa = sgemmIsa());

/// C = alpha * op(A) * P + beta * C for a P packed by sgemmPackB (k x n),
/// over the `terms` asked for. With beta = 0, C is written without being
/// read. Each element sums its terms in the order of p, so leaving out
/// terms that are zero changes no bit.
void sgemmPacked(bool transA, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *packed, float beta,
                 float *c, int64_t ldc, SgemmIsa isa = sgemmIsa(),
                 SgemmTerms terms = SgemmTerms::All);

/// op(B) packed (as sgemmPackB does) into this thread's buffer, which
/// holds it until the thread's next call here or to sgemm; null when the
/// buffer cannot be allocated.
const float *sgemmPackBPerCall(bool transB, int64_t k, int64_t n,
                               const float *b, int64_t ldb,
                               SgemmIsa isa = sgemmIsa());

/// The whole product, B packed into the per-thread buffer of
/// sgemmPackBPerCall. False (C untouched) when that buffer cannot be
/// allocated.
bool sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc,
           SgemmIsa isa = sgemmIsa(), SgemmTerms terms = SgemmTerms::All);

/// out[j * ldOut + i] = in[i * ldIn + j] for i < rows, j < cols: the
/// rows x cols matrix at `in` transposed into `out` (which must not overlap
/// it), 8 x 8 blocks at a time in registers with either kernel's
/// instruction set (as sgemmPackB packs a transposed B), element by element
/// with None (any CPU).
void transposeF32(int64_t rows, int64_t cols, const float *in, int64_t ldIn,
                  float *out, int64_t ldOut, SgemmIsa isa = sgemmIsa());

} // namespace zbrt

#endif // ZBRT_LIB_SGEMM_H
