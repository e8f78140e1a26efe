//===- Sgemm.cpp - The f32 matrix product for one thread ------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//
//
// C = alpha * op(A) * op(B) + beta * C, row-major, for one thread on a CPU
// with AVX-512F or AVX2 with FMA: the product a pipeline rank runs per
// action, where the operands are a microbatch's activations and a layer's
// weights.
//
// Only B is packed, into column panels of kNR = 32 (two zmm or four ymm
// registers wide), each panel's rows contiguous; the layout is the same for
// both instruction sets. A is read where it lies, one broadcast per element
// (its rows, or with transA its columns, need no packing for a broadcast).
// The AVX-512 register kernel holds an 8 x 32 block of C (16 accumulators),
// the AVX2 one a 6 x 16 block (12 of its 16 ymm registers: half a panel),
// over a block of kKC steps of k; the rows of A that one B panel meets stay
// in L2. Each element of C sums its k terms in order with fused
// multiply-adds, in blocks of kKC, then takes alpha and beta the same way:
// its value depends on k alone, not on the shape around it (no dependence on
// m, n or how many ranks split the model), nor on the instruction set.
//
//===----------------------------------------------------------------------===//

#include "Sgemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>

#define ZB_AVX512 __attribute__((target("avx512f")))
#define ZB_AVX2 __attribute__((target("avx2,fma")))

namespace {

// op(B) (k x n) is packed in panels: panel j holds columns [32j, 32j + 32)
// as k rows of 32 floats (zeros past n), at `out + j * k * 32`, whichever
// instruction set packs or reads it.
constexpr int64_t kNR = 32; // columns of a B panel
constexpr int64_t kKC = 512;

/// The steps [first, first + count) of the k block [k0, k0 + kc), relative
/// to k0, that the terms of the block of C at rows [i, i + mr) and columns
/// [j, j + nr) need (zbrt::SgemmTerms); a count of 0 when none.
struct Steps {
  int64_t first = 0, count = 0;
};
inline Steps neededSteps(zbrt::SgemmTerms terms, int64_t i, int64_t mr,
                         int64_t j, int64_t nr, int64_t k0, int64_t kc) {
  using zbrt::SgemmTerms;
  int64_t first = 0, last = kc;
  switch (terms) {
  case SgemmTerms::All:
    break;
  case SgemmTerms::KUpToM: // k <= m: up to the block's last row
    last = std::min(kc, i + mr - k0);
    break;
  case SgemmTerms::KFromM: // k >= m: from the block's first row
    first = std::clamp<int64_t>(i - k0, 0, kc);
    break;
  case SgemmTerms::NUpToM: // n <= m: none where every column is past
    if (j > i + mr - 1)
      last = 0;
    break;
  case SgemmTerms::KUpToN: // k <= n: up to the block's last column
    last = std::min(kc, j + nr - k0);
    break;
  case SgemmTerms::KFromN: // k >= n: from the block's first column
    first = std::clamp<int64_t>(j - k0, 0, kc);
    break;
  case SgemmTerms::MUpToN: // m <= n: none where every row is past
    if (i > j + nr - 1)
      last = 0;
    break;
  }
  return {first, std::max<int64_t>(0, last - first)};
}

/// Bytes of A^T's rows a kernel call may walk in place (L1's size), and the
/// fewest columns of C over which copying A's block pays (measured on Zen 3
/// with AVX2: 64 columns run 12% faster in place, 128 alike, 256 4% faster
/// copied).
constexpr int64_t kCopyASpan = 32 * 1024, kCopyAMinN = 256;

/// The thread's buffer of `floats` that a product copies A's blocks into
/// (copyTransposedA), or null where it reads A in place: with op(A) = A^T,
/// A is copied once a group's kc lines, lda apart, span more than L1 (and
/// as many pages) and C is wide enough for the copy to pay; otherwise, or
/// when no room can be had, it is read in place.
inline float *aCopyBuffer(bool transA, int64_t n, int64_t k, int64_t lda,
                          int64_t floats) {
  thread_local zbrt::AlignedFloats block;
  bool copies = transA && n >= kCopyAMinN &&
                std::min(k, kKC) * lda * int64_t(sizeof(float)) > kCopyASpan;
  return copies && block.reserve(floats) ? block.data() : nullptr;
}

/// Copies the `mc` x `kc` block of A^T at (i0, k0) (A's element (i, p) at
/// `a[p * lda + i]`) into `out` in groups of MR rows, each group kc steps of
/// MR floats (the last group's rows past mc left as they were): what the
/// register kernels then read with strideI = 1, strideK = MR. Inlined into
/// each instruction set's product, which copies a full group's row with
/// its own vector moves.
template <int64_t MR>
inline __attribute__((always_inline)) void
copyTransposedA(int64_t mc, int64_t kc, const float *a, int64_t lda, int64_t i0,
                int64_t k0, float *out) {
  // Group by group, so that the writes go to one place in turn (a row of
  // A^T dealt out to every group at once writes kc * MR floats apart, to a
  // few L1 sets); a group's kc lines of A^T stay in L1 for the next.
  for (int64_t g = 0; g < mc; g += MR) {
    int64_t mr = std::min(MR, mc - g);
    const float *src = a + k0 * lda + i0 + g;
    float *dst = out + g * kc;
    if (mr < MR) {
      for (int64_t p = 0; p < kc; ++p, src += lda, dst += MR)
        std::copy(src, src + mr, dst);
      continue;
    }
    for (int64_t p = 0; p < kc; ++p, src += lda, dst += MR)
      std::memcpy(dst, src, MR * sizeof(float));
  }
}

namespace avx512 {

constexpr int64_t kMR = 8; // rows of C one register kernel call holds
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

ZB_AVX512 void packB(bool transB, int64_t k, int64_t n, const float *b,
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

ZB_AVX512 void packed(bool transA, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *packedB,
                      float beta, float *c, int64_t ldc,
                      zbrt::SgemmTerms terms) {
  // With transA, each block of A is copied into kMR-row groups where that
  // pays.
  float *aCopy = aCopyBuffer(transA, n, k, lda, kMC * kKC);
  // A's element (i, p) of a group at rows[i * strideI + p * strideK].
  int64_t strideI = aCopy || transA ? 1 : lda;
  int64_t strideK = aCopy ? kMR : transA ? lda : 1;
  for (int64_t k0 = 0; k0 < k; k0 += kKC) {
    int64_t kc = std::min(kKC, k - k0);
    for (int64_t i0 = 0; i0 < m; i0 += kMC) {
      int64_t mc = std::min(kMC, m - i0);
      if (aCopy)
        copyTransposedA<kMR>(mc, kc, a, lda, i0, k0, aCopy);
      for (int64_t j0 = 0; j0 < n; j0 += kNR) {
        int64_t nj = std::min(kNR, n - j0);
        auto [m0, m1] = panelMasks(nj);
        const float *panel = packedB + (j0 / kNR) * k * kNR + k0 * kNR;
        for (int64_t i = i0; i < i0 + mc; i += kMR) {
          int64_t mr = std::min(kMR, i0 + mc - i);
          const float *rows =
              aCopy ? aCopy + (i - i0) * kc : a + i * strideI + k0 * strideK;
          // Terms not needed are skipped; the first k block still writes
          // beta * C where it has none.
          Steps steps = neededSteps(terms, i, mr, j0, nj, k0, kc);
          if (steps.count == 0 && k0 != 0)
            continue;
          kKernels[mr](steps.count, rows + steps.first * strideK, strideI,
                       strideK, panel + steps.first * kNR, c + i * ldc + j0,
                       ldc, alpha, beta, k0 == 0, m0, m1);
        }
      }
    }
  }
}

} // namespace avx512

namespace avx2 {

constexpr int64_t kMR = 6;   // rows of C one register kernel call holds
constexpr int64_t kMC = 144; // 144 x kKC floats of A: 288 KB, within L2

/// The mask of the first `cols` (clamped to 0..8) lanes of a ymm register.
ZB_AVX2 __m256i laneMask(int64_t cols) {
  int32_t clamped = static_cast<int32_t>(std::clamp<int64_t>(cols, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(clamped),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/// The `MR` x 16 block of C at `c` from `kc` steps of k: A's element (i, p)
/// at `a[i * strideI + p * strideK]`, B's half panel rows kNR floats apart
/// at `half`. The first k block writes alpha * acc + beta * C (C unread when
/// beta is 0); later ones add alpha * acc. Only the first `cols` (1..16)
/// columns of C are touched.
template <int MR>
ZB_AVX2 void kernel(int64_t kc, const float *a, int64_t strideI,
                    int64_t strideK, const float *half, float *c, int64_t ldc,
                    float alpha, float beta, bool first, int64_t cols) {
  __m256 acc0[MR], acc1[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    acc0[i] = _mm256_setzero_ps();
    acc1[i] = _mm256_setzero_ps();
    // C's block is read at the end: its lines arrive meanwhile.
    _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc + 15), _MM_HINT_T0);
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    __m256 b0 = _mm256_load_ps(half + p * kNR);
    __m256 b1 = _mm256_load_ps(half + p * kNR + 8);
    const float *ap = a + p * strideK;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      __m256 ai = _mm256_broadcast_ss(ap + i * strideI);
      acc0[i] = _mm256_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm256_fmadd_ps(ai, b1, acc1[i]);
    }
  }
  __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(first ? beta : 1.0f);
  bool readC = !first || beta != 0.0f;
  if (cols >= 16) {
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      float *ci = c + i * ldc;
      __m256 r0 = _mm256_mul_ps(va, acc0[i]), r1 = _mm256_mul_ps(va, acc1[i]);
      if (readC) {
        r0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci), r0);
        r1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8), r1);
      }
      _mm256_storeu_ps(ci, r0);
      _mm256_storeu_ps(ci + 8, r1);
    }
    return;
  }
  // A ragged edge goes through a buffer (AVX2's masked stores are slow).
  alignas(32) float edge[16] = {};
  // Unrolled like the loops above, or the accumulators live in memory.
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float *ci = c + i * ldc;
    __m256 r0 = _mm256_mul_ps(va, acc0[i]), r1 = _mm256_mul_ps(va, acc1[i]);
    if (readC) {
      std::copy(ci, ci + cols, edge);
      r0 = _mm256_fmadd_ps(vb, _mm256_load_ps(edge), r0);
      r1 = _mm256_fmadd_ps(vb, _mm256_load_ps(edge + 8), r1);
    }
    _mm256_store_ps(edge, r0);
    _mm256_store_ps(edge + 8, r1);
    std::copy(edge, edge + cols, ci);
  }
}

using KernelFn = void (*)(int64_t, const float *, int64_t, int64_t,
                          const float *, float *, int64_t, float, float, bool,
                          int64_t);
/// kernel<mr> for mr in 1..kMR.
constexpr KernelFn kKernels[kMR + 1] = {
    nullptr, kernel<1>, kernel<2>, kernel<3>, kernel<4>, kernel<5>, kernel<6>};

/// Transposes the 8 x 8 block in `r` in place.
ZB_AVX2 inline __attribute__((always_inline)) void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  // Each 128-bit lane now holds a 4 x 4 block transposed; the lanes swap
  // across the two halves of the block.
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
    r[4 + q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
  }
}

ZB_AVX2 void packB(bool transB, int64_t k, int64_t n, const float *b,
                   int64_t ldb, float *out) {
  for (int64_t j0 = 0; j0 < n; j0 += kNR) {
    float *panel = out + (j0 / kNR) * k * kNR;
    int64_t nj = std::min(kNR, n - j0);
    if (!transB) {
      __m256i masks[4];
      for (int q = 0; q < 4; ++q)
        masks[q] = laneMask(nj - 8 * q);
      for (int64_t p = 0; p < k; ++p) {
        const float *row = b + p * ldb + j0;
        for (int q = 0; q < 4; ++q)
          _mm256_store_ps(panel + p * kNR + 8 * q,
                          nj >= 8 * (q + 1)
                              ? _mm256_loadu_ps(row + 8 * q)
                              : _mm256_maskload_ps(row + 8 * q, masks[q]));
      }
      continue;
    }
    // op(B)(p, j) = b[j * ldb + p]: 8 x 8 blocks transposed in registers,
    // the ragged edges element by element.
    int64_t pFull = k - k % 8;
    for (int64_t jj = 0; jj < kNR; jj += 8) {
      int64_t cols = std::clamp<int64_t>(nj - jj, 0, 8);
      for (int64_t p0 = 0; p0 < pFull; p0 += 8) {
        __m256 r[8];
        for (int64_t q = 0; q < 8; ++q)
          r[q] = q < cols ? _mm256_loadu_ps(b + (j0 + jj + q) * ldb + p0)
                          : _mm256_setzero_ps();
        transpose8(r);
        for (int64_t q = 0; q < 8; ++q)
          _mm256_store_ps(panel + (p0 + q) * kNR + jj, r[q]);
      }
      for (int64_t p = pFull; p < k; ++p)
        for (int64_t q = 0; q < 8; ++q)
          panel[p * kNR + jj + q] =
              q < cols ? b[(j0 + jj + q) * ldb + p] : 0.0f;
    }
  }
}

/// out[j * ldOut + i] = in[i * ldIn + j]: 8 x 8 blocks transposed in
/// registers, the ragged edges element by element.
ZB_AVX2 void transpose(int64_t rows, int64_t cols, const float *in,
                       int64_t ldIn, float *out, int64_t ldOut) {
  int64_t rowsFull = rows - rows % 8, colsFull = cols - cols % 8;
  for (int64_t i0 = 0; i0 < rowsFull; i0 += 8) {
    for (int64_t j0 = 0; j0 < colsFull; j0 += 8) {
      __m256 r[8];
      for (int64_t q = 0; q < 8; ++q)
        r[q] = _mm256_loadu_ps(in + (i0 + q) * ldIn + j0);
      transpose8(r);
      for (int64_t q = 0; q < 8; ++q)
        _mm256_storeu_ps(out + (j0 + q) * ldOut + i0, r[q]);
    }
    for (int64_t j = colsFull; j < cols; ++j)
      for (int64_t q = 0; q < 8; ++q)
        out[j * ldOut + i0 + q] = in[(i0 + q) * ldIn + j];
  }
  for (int64_t i = rowsFull; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[j * ldOut + i] = in[i * ldIn + j];
}

ZB_AVX2 void packed(bool transA, int64_t m, int64_t n, int64_t k, float alpha,
                    const float *a, int64_t lda, const float *packedB,
                    float beta, float *c, int64_t ldc, zbrt::SgemmTerms terms) {
  // With transA, each block of A is copied into kMR-row groups where that
  // pays.
  float *aCopy = aCopyBuffer(transA, n, k, lda, kMC * kKC);
  // A's element (i, p) of a group at rows[i * strideI + p * strideK].
  int64_t strideI = aCopy || transA ? 1 : lda;
  int64_t strideK = aCopy ? kMR : transA ? lda : 1;
  for (int64_t k0 = 0; k0 < k; k0 += kKC) {
    int64_t kc = std::min(kKC, k - k0);
    for (int64_t i0 = 0; i0 < m; i0 += kMC) {
      int64_t mc = std::min(kMC, m - i0);
      if (aCopy)
        copyTransposedA<kMR>(mc, kc, a, lda, i0, k0, aCopy);
      for (int64_t j0 = 0; j0 < n; j0 += kNR) {
        const float *panel = packedB + (j0 / kNR) * k * kNR + k0 * kNR;
        // A group of rows meets both halves of the panel in turn (a half
        // past n skipped), its rows of A still in L1 for the second.
        for (int64_t i = i0; i < i0 + mc; i += kMR) {
          int64_t mr = std::min(kMR, i0 + mc - i);
          const float *rows =
              aCopy ? aCopy + (i - i0) * kc : a + i * strideI + k0 * strideK;
          for (int64_t h = 0; h < kNR && j0 + h < n; h += 16) {
            int64_t cols = std::min<int64_t>(16, n - j0 - h);
            // Terms not needed are skipped; the first k block still writes
            // beta * C where it has none.
            Steps steps = neededSteps(terms, i, mr, j0 + h, cols, k0, kc);
            if (steps.count == 0 && k0 != 0)
              continue;
            kKernels[mr](steps.count, rows + steps.first * strideK, strideI,
                         strideK, panel + h + steps.first * kNR,
                         c + i * ldc + j0 + h, ldc, alpha, beta, k0 == 0, cols);
          }
        }
      }
    }
  }
}

} // namespace avx2

} // namespace

namespace zbrt {

SgemmIsa sgemmIsa() {
  static const SgemmIsa best =
      sgemmIsaSupported(SgemmIsa::Avx512) ? SgemmIsa::Avx512
      : sgemmIsaSupported(SgemmIsa::Avx2) ? SgemmIsa::Avx2
                                          : SgemmIsa::None;
  return best;
}

bool sgemmIsaSupported(SgemmIsa isa) {
  switch (isa) {
  case SgemmIsa::Avx512:
    return __builtin_cpu_supports("avx512f");
  case SgemmIsa::Avx2:
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  case SgemmIsa::None:
    return false;
  }
  return false;
}

bool sgemmKernelAvailable() { return sgemmIsa() != SgemmIsa::None; }

const char *sgemmIsaName(SgemmIsa isa) {
  switch (isa) {
  case SgemmIsa::Avx512:
    return "avx512";
  case SgemmIsa::Avx2:
    return "avx2";
  case SgemmIsa::None:
    return "none";
  }
  return "none";
}

size_t sgemmPackedSize(int64_t k, int64_t n) {
  return static_cast<size_t>(k) * ((n + kNR - 1) / kNR) * kNR;
}

void sgemmPackB(bool transB, int64_t k, int64_t n, const float *b, int64_t ldb,
                float *out, SgemmIsa isa) {
  if (isa == SgemmIsa::Avx512)
    avx512::packB(transB, k, n, b, ldb, out);
  else
    avx2::packB(transB, k, n, b, ldb, out);
}

void sgemmPacked(bool transA, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *packed, float beta,
                 float *c, int64_t ldc, SgemmIsa isa, SgemmTerms terms) {
  if (k == 0) {
    // No k steps: C = beta * C (zero when beta is 0, whatever C held).
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  if (isa == SgemmIsa::Avx512)
    avx512::packed(transA, m, n, k, alpha, a, lda, packed, beta, c, ldc, terms);
  else
    avx2::packed(transA, m, n, k, alpha, a, lda, packed, beta, c, ldc, terms);
}

void transposeF32(int64_t rows, int64_t cols, const float *in, int64_t ldIn,
                  float *out, int64_t ldOut, SgemmIsa isa) {
  // Either kernel's CPU has AVX2.
  if (isa != SgemmIsa::None) {
    avx2::transpose(rows, cols, in, ldIn, out, ldOut);
    return;
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[j * ldOut + i] = in[i * ldIn + j];
}

const float *sgemmPackBPerCall(bool transB, int64_t k, int64_t n,
                               const float *b, int64_t ldb, SgemmIsa isa) {
  thread_local AlignedFloats packed;
  if (!packed.reserve(sgemmPackedSize(k, n)))
    return nullptr;
  sgemmPackB(transB, k, n, b, ldb, packed.data(), isa);
  return packed.data();
}

bool sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc, SgemmIsa isa,
           SgemmTerms terms) {
  const float *packed = sgemmPackBPerCall(transB, k, n, b, ldb, isa);
  if (!packed)
    return false;
  sgemmPacked(transA, m, n, k, alpha, a, lda, packed, beta, c, ldc, isa, terms);
  return true;
}

} // namespace zbrt
