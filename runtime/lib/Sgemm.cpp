//===- Sgemm.cpp - The f32 matrix product for one thread, AVX-512 ---------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//
//
// C = alpha * op(A) * op(B) + beta * C, row-major, for one thread on a CPU
// with AVX-512F: the product a pipeline rank runs per action, where the
// operands are a microbatch's activations and a layer's weights.
//
// Only B is packed, into column panels of kNR = 32 (two zmm registers wide),
// each panel's rows contiguous; A is read where it lies, one broadcast per
// element (its rows, or with transA its columns, need no packing for a
// broadcast). The register kernel holds an kMR x 32 block of C (16
// accumulators) over a block of kKC steps of k; the kMC rows of A that one B
// panel meets stay in L2. Each element of C sums its k terms in order, in
// blocks of kKC, so its value depends on k alone, not on the shape around it
// (no dependence on m, n or how many ranks split the model).
//
//===----------------------------------------------------------------------===//

#include "Sgemm.h"

#include <immintrin.h>

#include <algorithm>
#include <utility>

#define ZB_AVX512 __attribute__((target("avx512f")))

namespace {

constexpr int64_t kNR = 32; // columns of a B panel
constexpr int64_t kMR = 8;  // rows of C one register kernel call holds
constexpr int64_t kKC = 512;
constexpr int64_t kMC = 256;

/// The masks of a panel's two 16-column halves when it holds `nj` (<= 32)
/// columns of C.
std::pair<__mmask16, __mmask16> panelMasks(int64_t nj) {
  auto half = [](int64_t cols) -> __mmask16 {
    return cols >= 16 ? 0xFFFF : cols <= 0 ? 0 : (1u << cols) - 1;
  };
  return {half(nj), half(nj - 16)};
}

/// The `MR` x 32 block of C at `c` from `kc` steps of k: A's element (i, p)
/// at `a[i * strideI + p * strideK]`, B's panel rows 32 floats apart at
/// `panel`. The first k block writes alpha * acc + beta * C (C unread when
/// beta is 0); later ones add alpha * acc. Columns beyond `mask0`/`mask1`
/// stay untouched.
template <int MR>
ZB_AVX512 void kernel(int64_t kc, const float *a, int64_t strideI,
                      int64_t strideK, const float *panel, float *c,
                      int64_t ldc, float alpha, float beta, bool first,
                      __mmask16 mask0, __mmask16 mask1) {
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
    // C's block is read at the end: its lines arrive meanwhile.
    _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc + 16), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m512 b0 = _mm512_load_ps(panel + p * kNR);
    __m512 b1 = _mm512_load_ps(panel + p * kNR + 16);
    const float *ap = a + p * strideK;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      __m512 ai = _mm512_set1_ps(ap[i * strideI]);
      acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
    }
  }
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(first ? beta : 1.0f);
  bool readC = !first || beta != 0.0f;
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float *ci = c + i * ldc;
    __m512 r0 = _mm512_mul_ps(va, acc0[i]), r1 = _mm512_mul_ps(va, acc1[i]);
    if (readC) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask0, ci), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask1, ci + 16), r1);
    }
    _mm512_mask_storeu_ps(ci, mask0, r0);
    _mm512_mask_storeu_ps(ci + 16, mask1, r1);
  }
}

using KernelFn = void (*)(int64_t, const float *, int64_t, int64_t,
                          const float *, float *, int64_t, float, float, bool,
                          __mmask16, __mmask16);
/// kernel<mr> for mr in 1..kMR.
constexpr KernelFn kKernels[kMR + 1] = {nullptr,   kernel<1>, kernel<2>,
                                        kernel<3>, kernel<4>, kernel<5>,
                                        kernel<6>, kernel<7>, kernel<8>};

/// Transposes the 16 x 16 block in `r` in place.
ZB_AVX512 void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  // Each 128-bit lane now holds a 4 x 4 block transposed; two rounds of
  // lane shuffles put the blocks in place.
  for (int g = 0; g < 16; g += 8)
    for (int q = 0; q < 4; ++q) {
      t[g + q] = _mm512_shuffle_f32x4(u[g + q], u[g + 4 + q], 0x88);
      t[g + 4 + q] = _mm512_shuffle_f32x4(u[g + q], u[g + 4 + q], 0xDD);
    }
  for (int q = 0; q < 8; ++q) {
    r[q] = _mm512_shuffle_f32x4(t[q], t[8 + q], 0x88);
    r[8 + q] = _mm512_shuffle_f32x4(t[q], t[8 + q], 0xDD);
  }
}

} // namespace

namespace zbrt {

bool sgemmKernelAvailable() {
  static const bool available = __builtin_cpu_supports("avx512f");
  return available;
}

size_t sgemmPackedSize(int64_t k, int64_t n) {
  return static_cast<size_t>(k) * ((n + kNR - 1) / kNR) * kNR;
}

// op(B) (k x n) in panels: panel j holds columns [32j, 32j + 32) as k rows
// of 32 floats (zeros past n), at `out + j * k * 32`.
ZB_AVX512 void sgemmPackB(bool transB, int64_t k, int64_t n, const float *b,
                          int64_t ldb, float *out) {
  for (int64_t j0 = 0; j0 < n; j0 += kNR) {
    float *panel = out + (j0 / kNR) * k * kNR;
    int64_t nj = std::min(kNR, n - j0);
    if (!transB) {
      auto [m0, m1] = panelMasks(nj);
      for (int64_t p = 0; p < k; ++p) {
        const float *row = b + p * ldb + j0;
        _mm512_store_ps(panel + p * kNR, _mm512_maskz_loadu_ps(m0, row));
        _mm512_store_ps(panel + p * kNR + 16,
                        _mm512_maskz_loadu_ps(m1, row + 16));
      }
      continue;
    }
    // op(B)(p, j) = b[j * ldb + p]: 16 x 16 blocks transposed in registers,
    // the ragged edges element by element.
    int64_t pFull = k - k % 16;
    for (int64_t jj = 0; jj < kNR; jj += 16) {
      int64_t cols = std::clamp<int64_t>(nj - jj, 0, 16);
      for (int64_t p0 = 0; p0 < pFull; p0 += 16) {
        __m512 r[16];
        for (int64_t q = 0; q < 16; ++q)
          r[q] = q < cols ? _mm512_loadu_ps(b + (j0 + jj + q) * ldb + p0)
                          : _mm512_setzero_ps();
        transpose16(r);
        for (int64_t q = 0; q < 16; ++q)
          _mm512_store_ps(panel + (p0 + q) * kNR + jj, r[q]);
      }
      for (int64_t p = pFull; p < k; ++p)
        for (int64_t q = 0; q < 16; ++q)
          panel[p * kNR + jj + q] =
              q < cols ? b[(j0 + jj + q) * ldb + p] : 0.0f;
    }
  }
}

ZB_AVX512 void sgemmPacked(bool transA, int64_t m, int64_t n, int64_t k,
                           float alpha, const float *a, int64_t lda,
                           const float *packed, float beta, float *c,
                           int64_t ldc) {
  int64_t strideI = transA ? 1 : lda, strideK = transA ? lda : 1;
  if (k == 0) {
    // No k steps: C = beta * C (zero when beta is 0, whatever C held).
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  for (int64_t k0 = 0; k0 < k; k0 += kKC) {
    int64_t kc = std::min(kKC, k - k0);
    for (int64_t i0 = 0; i0 < m; i0 += kMC) {
      int64_t mc = std::min(kMC, m - i0);
      for (int64_t j0 = 0; j0 < n; j0 += kNR) {
        int64_t nj = std::min(kNR, n - j0);
        auto [m0, m1] = panelMasks(nj);
        const float *panel = packed + (j0 / kNR) * k * kNR + k0 * kNR;
        for (int64_t i = i0; i < i0 + mc; i += kMR) {
          int64_t mr = std::min(kMR, i0 + mc - i);
          kKernels[mr](kc, a + i * strideI + k0 * strideK, strideI, strideK,
                       panel, c + i * ldc + j0, ldc, alpha, beta, k0 == 0, m0,
                       m1);
        }
      }
    }
  }
}

bool sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc) {
  thread_local AlignedFloats packed;
  if (!packed.reserve(sgemmPackedSize(k, n)))
    return false;
  sgemmPackB(transB, k, n, b, ldb, packed.data());
  sgemmPacked(transA, m, n, k, alpha, a, lda, packed.data(), beta, c, ldc);
  return true;
}

} // namespace zbrt
