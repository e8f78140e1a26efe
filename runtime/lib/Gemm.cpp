//===- Gemm.cpp - Matrix products: the runtime's kernel or OpenBLAS -------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Gemm.h"
#include "zbrt/zbrt.h"

#include "Sgemm.h"
#include "zbrt/Lending.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

using namespace zbrt;

namespace {

/// The products the runtime's kernel takes, per instruction set: none
/// smaller than m, n, k and volume (m * n * k), and none with A transposed
/// of at least transAVolume (0: no such limit).
struct KernelShapes {
  int64_t m, n, k, volume, transAVolume;
};
/// With AVX-512: below m * n * k = 2^20, OpenBLAS's small-matrix paths are
/// as fast or faster than packing (2^19: 128x64x64 1.07x OpenBLAS's time,
/// 96x80x72 1.28x; 2^20: 128x128x64 0.93-0.96x); a narrow C fills few of a
/// panel's 32 lanes (m = 1024, n = 8, k = 64: 3.1x), a short k leaves the
/// call to loading and storing C (512 x 1024 x 1: 1.8x), and a few rows of
/// A do not repay packing B (8 x 64 x 1024 with B transposed: 2.0x).
constexpr KernelShapes kAvx512Shapes{32, 64, 64, int64_t(1) << 20, 0};
/// With AVX2 (Zen 3), OpenBLAS's Haswell-era kernels leave the small
/// products to the runtime's (64^3: 0.85-0.95x OpenBLAS's time in every
/// transpose, 32^3 0.79x, 16 x 32 x 64 0.81x); a 16-row C still repays
/// packing B (16 x 64 x 1024, B transposed: 0.88x); n or k of 16 do not
/// (1024 x 16 x 64 at parity, 512 x 1024 x 16 1.5x). A weight gradient's
/// X^T dY (A transposed, B an activation packed per call) of 2^24 or more
/// runs 2-5% faster in OpenBLAS, which packs as it goes, when its operands
/// come from memory (256 x 768 x 256 to 2048 x 512 x 512, beta 1).
constexpr KernelShapes kAvx2Shapes{16, 32, 32, int64_t(1) << 15,
                                   int64_t(1) << 24};

/// One packed copy of a weight: which operand, as which op(B).
struct PackedKey {
  const float *b;
  int64_t k, n, ldb;
  bool transB;
  bool operator==(const PackedKey &o) const {
    return b == o.b && k == o.k && n == o.n && ldb == o.ldb &&
           transB == o.transB;
  }
};

struct PackedKeyHash {
  size_t operator()(const PackedKey &key) const {
    size_t h = std::hash<const void *>()(key.b);
    for (int64_t v : {key.k, key.n, key.ldb * 2 + key.transB})
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

struct PackedCopy {
  AlignedFloats floats;
  /// The scope it was packed in (0: none yet).
  uint64_t scope = 0;
  /// When it was packed there, counting the thread's packings: the order
  /// of its first use, or of packWeightWhileIdle's, which follows the
  /// previous scope's order.
  uint64_t order = 0;
};

/// This thread's PackedWeights state.
struct WeightCache {
  /// The open scope's ranges as [begin, end) addresses, sorted; empty when
  /// no scope is open.
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  /// Counts the scopes opened; a copy packed in an earlier one is stale.
  uint64_t scope = 0;
  std::unordered_map<PackedKey, PackedCopy, PackedKeyHash> copies;
  /// The copies' bytes, and the open scope's budget for them.
  size_t bytes = 0, budget = 0;
  /// The copies an earlier scope kept whose weights lie in the open
  /// scope's ranges, in the order they were packed there, reversed: what
  /// packWeightWhileIdle repacks, from the back.
  std::vector<PackedKey> pending;
  uint64_t packings = 0;
};

WeightCache &weightCache() {
  thread_local WeightCache cache;
  return cache;
}

/// Whether the B of `key` lies wholly in one of the open scope's ranges.
bool inScope(const WeightCache &cache, const PackedKey &key) {
  int64_t rows = key.transB ? key.n : key.k, cols = key.transB ? key.k : key.n;
  auto first = reinterpret_cast<uintptr_t>(key.b);
  uintptr_t end = first + ((rows - 1) * key.ldb + cols) * sizeof(float);
  auto it = std::upper_bound(cache.ranges.begin(), cache.ranges.end(), first,
                             [](uintptr_t address, const auto &range) {
                               return address < range.first;
                             });
  return it != cache.ranges.begin() && end <= std::prev(it)->second;
}

/// Packs `key`'s weight into `copy` for the open scope.
void repack(WeightCache &cache, const PackedKey &key, PackedCopy &copy) {
  sgemmPackB(key.transB, key.k, key.n, key.b, key.ldb, copy.floats.data());
  copy.scope = cache.scope;
  copy.order = ++cache.packings;
}

/// The packed op(B) of the open scope when B lies wholly in one of its
/// ranges (packed now if this is the scope's first use), else null.
const float *packedWeight(bool transB, int64_t k, int64_t n, const float *b,
                          int64_t ldb) {
  WeightCache &cache = weightCache();
  PackedKey key{b, k, n, ldb, transB};
  if (cache.ranges.empty() || !inScope(cache, key))
    return nullptr;
  auto found = cache.copies.find(key);
  if (found != cache.copies.end() && found->second.scope == cache.scope)
    return found->second.floats.data();
  // Packed now: in the copy an earlier scope kept, or a new one within the
  // budget.
  size_t held = found == cache.copies.end()
                    ? 0
                    : found->second.floats.size() * sizeof(float);
  size_t needed = sgemmPackedSize(k, n) * sizeof(float);
  if (needed > held && cache.bytes + (needed - held) > cache.budget)
    return nullptr;
  PackedCopy &copy = cache.copies[key];
  if (!copy.floats.reserve(needed / sizeof(float))) {
    cache.bytes -= held;
    cache.copies.erase(key);
    return nullptr;
  }
  cache.bytes += copy.floats.size() * sizeof(float) - held;
  repack(cache, key, copy);
  return copy.floats.data();
}

} // namespace

PackedWeights::PackedWeights(std::vector<MemoryRange> weights, size_t budget) {
  WeightCache &cache = weightCache();
  cache.budget = budget;
  cache.ranges.clear();
  for (const MemoryRange &w : weights)
    if (w.second)
      cache.ranges.emplace_back(reinterpret_cast<uintptr_t>(w.first),
                                reinterpret_cast<uintptr_t>(w.first) +
                                    w.second);
  std::sort(cache.ranges.begin(), cache.ranges.end());
  ++cache.scope;
  // The previous scope's copies (the only ones kept) of weights in these
  // ranges, to repack while the thread would wait: first packed, last
  // popped.
  std::vector<std::pair<uint64_t, PackedKey>> kept;
  for (const auto &[key, copy] : cache.copies)
    if (inScope(cache, key))
      kept.emplace_back(copy.order, key);
  std::sort(kept.begin(), kept.end(),
            [](const auto &x, const auto &y) { return x.first > y.first; });
  cache.pending.clear();
  for (const auto &entry : kept)
    cache.pending.push_back(entry.second);
}

PackedWeights::~PackedWeights() {
  // The copies this scope did not use go (their weights may be gone); the
  // others keep their memory for the next scope.
  WeightCache &cache = weightCache();
  for (auto it = cache.copies.begin(); it != cache.copies.end();) {
    if (it->second.scope == cache.scope) {
      ++it;
      continue;
    }
    cache.bytes -= it->second.floats.size() * sizeof(float);
    it = cache.copies.erase(it);
  }
  cache.ranges.clear();
  cache.pending.clear();
  ++cache.scope;
}

bool zbrt::packWeightWhileIdle() {
  WeightCache &cache = weightCache();
  while (!cache.pending.empty()) {
    PackedKey key = cache.pending.back();
    cache.pending.pop_back();
    auto found = cache.copies.find(key);
    if (found == cache.copies.end() || found->second.scope == cache.scope)
      continue;
    repack(cache, key, found->second);
    return true;
  }
  return false;
}

size_t zbrt::packedWeightBytes() { return weightCache().bytes; }

/// ZB_SGEMM, "zbrt" when unset or empty.
static std::string sgemmChoice() {
  const char *choice = std::getenv("ZB_SGEMM");
  return choice && *choice ? choice : "zbrt";
}

std::string zbrt::sgemmChoiceProblem() {
  std::string choice = sgemmChoice();
  if (choice == "zbrt" || choice == "openblas")
    return {};
  return std::string("ZB_SGEMM must be 'zbrt' or 'openblas', got '") + choice +
         "'";
}

std::string zbrt::avoidFaultyOpenBLASThreads() {
  std::string config = openblas_get_config();
  std::string core = openblas_get_corename();
  bool faulty = config.rfind("OpenBLAS 0.3.21 ", 0) == 0 &&
                (core == "Cooperlake" || core == "SkylakeX");
  int threads = openblas_get_num_threads();
  if (!faulty || threads < 2)
    return "";
  openblas_set_num_threads(1);
  return "OpenBLAS 0.3.21's " + core + " kernels on " +
         std::to_string(threads) +
         " threads have given wrong gradients; it runs on one thread "
         "(OPENBLAS_CORETYPE=Haswell keeps its threads, with its AVX2 "
         "kernels)";
}

/// The kernel's instruction set, None with ZB_SGEMM=openblas.
static SgemmIsa kernelIsa() {
  static const SgemmIsa isa =
      sgemmChoice() == "openblas" ? SgemmIsa::None : sgemmIsa();
  return isa;
}

const char *zbrt::sgemmKernelName() {
  SgemmIsa isa = kernelIsa();
  return isa == SgemmIsa::None ? "openblas" : sgemmIsaName(isa);
}

/// The KernelShapes of the kernel's instruction set, null with none.
static const KernelShapes *kernelShapes() {
  SgemmIsa isa = kernelIsa();
  if (isa == SgemmIsa::None)
    return nullptr;
  return isa == SgemmIsa::Avx512 ? &kAvx512Shapes : &kAvx2Shapes;
}

/// Whether an f32 product goes to OpenBLAS, on one thread, because it is a
/// weight gradient's large X^T dY (KernelShapes's transAVolume).
static bool isLargeTransposedA(bool transA, int64_t m, int64_t n, int64_t k) {
  const KernelShapes *shapes = kernelShapes();
  return shapes && transA && shapes->transAVolume &&
         m * n * k >= shapes->transAVolume && openblas_get_num_threads() == 1;
}

/// Whether an f32 product goes to the runtime's kernel (Sgemm.cpp) rather
/// than OpenBLAS: on a CPU with AVX-512F or AVX2, for the products that
/// instruction set's KernelShapes admit, while OpenBLAS runs on one
/// thread (the kernel is single-thread: a rank given more threads keeps
/// OpenBLAS's), unless ZB_SGEMM=openblas says otherwise (zb-run rejects other
/// values, see sgemmChoiceProblem). The choice depends on the shape and
/// transposes alone, so a product has the same bits wherever it runs on a
/// machine.
static bool useRuntimeSgemm(bool transA, int64_t m, int64_t n, int64_t k) {
  const KernelShapes *shapes = kernelShapes();
  if (!shapes || isLargeTransposedA(transA, m, n, k))
    return false;
  return m >= shapes->m && n >= shapes->n && k >= shapes->k &&
         m * n * k >= shapes->volume && openblas_get_num_threads() == 1;
}

/// The rows of a block when a product of m rows is shared with a borrowed
/// core: about eight blocks, of a multiple of 48 rows, the last one taking
/// the rest too (so that none is smaller than m / 8).
static int64_t sharedBlockRows(int64_t m) {
  return std::max<int64_t>(48, ((m + 7) / 8 + 47) / 48 * 48);
}

extern "C" void zbrt_sgemm(int32_t transA, int32_t transB, int64_t m, int64_t n,
                           int64_t k, float alpha, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float beta, float *c,
                           int64_t ldc) {
  // The kernel's op(B): a weight's copy packed once per step, else packed
  // for this call alone (null: OpenBLAS computes it).
  const float *packed = nullptr;
  if (useRuntimeSgemm(transA, m, n, k)) {
    packed = packedWeight(transB, k, n, b, ldb);
    if (!packed)
      packed = sgemmPackBPerCall(transB, k, n, b, ldb);
  }
  // Rows i0 .. i0 + rows of C, by the kernel or OpenBLAS.
  auto product = [&](int64_t i0, int64_t rows) {
    const float *ai = transA ? a + i0 : a + i0 * lda;
    float *ci = c + i0 * ldc;
    if (packed) {
      sgemmPacked(transA, rows, n, k, alpha, ai, lda, packed, beta, ci, ldc);
      return;
    }
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(rows),
                static_cast<blasint>(n), static_cast<blasint>(k), alpha, ai,
                static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta,
                ci, static_cast<blasint>(ldc));
  };
  // A product may share its rows with a borrowed core (Lending.h) where
  // each row of C sums its terms in the same order in any block of rows:
  // in the kernel (by k blocks of its own), and in OpenBLAS's blocked
  // driver on one thread for the large X^T dY it takes (every block of
  // 2^21 multiply-adds or more); the bits are those of one call
  // (LendingTest.cpp). Other OpenBLAS products stay whole.
  int64_t rows = sharedBlockRows(m), blocks = m / rows;
  if ((packed || isLargeTransposedA(transA, m, n, k)) &&
      shareWork(blocks, m * n * k, [&](int64_t block) {
        int64_t end = block == blocks - 1 ? m : (block + 1) * rows;
        product(block * rows, end - block * rows);
      }))
    return;
  product(0, m);
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

/// A batch of `gemm` calls, the matrices `stride*` elements apart; with
/// `share`, a node-local rank's idle core may take some of them
/// (Lending.h), each item the same call either way.
template <typename T, typename Gemm>
static void batched(Gemm gemm, bool share, int32_t transA, int32_t transB,
                    int64_t batch, int64_t m, int64_t n, int64_t k, T alpha,
                    const T *a, int64_t lda, int64_t strideA, const T *b,
                    int64_t ldb, int64_t strideB, T beta, T *c, int64_t ldc,
                    int64_t strideC) {
  auto item = [&](int64_t i) {
    gemm(transA, transB, m, n, k, alpha, a + i * strideA, lda, b + i * strideB,
         ldb, beta, c + i * strideC, ldc);
  };
  if (share && shareWork(batch, batch * m * n * k, item))
    return;
  for (int64_t i = 0; i < batch; ++i)
    item(i);
}

extern "C" void zbrt_sgemm_batched(int32_t transA, int32_t transB,
                                   int64_t batch, int64_t m, int64_t n,
                                   int64_t k, float alpha, const float *a,
                                   int64_t lda, int64_t strideA,
                                   const float *b, int64_t ldb,
                                   int64_t strideB, float beta, float *c,
                                   int64_t ldc, int64_t strideC) {
  // Items shared only while OpenBLAS (which takes some of them) runs on one
  // thread: a rank computes on one thread per core it has.
  batched(zbrt_sgemm, openblas_get_num_threads() == 1, transA, transB, batch, m,
          n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c, ldc, strideC);
}

/// `x` rounded to the nearest bf16 (ties to even), as f32; NaN stays NaN.
static float roundToBF16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return x;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  std::memcpy(&x, &bits, sizeof(bits));
  return x;
}

/// The elements a batch of row-major `rows` x `cols` matrices (rows `ld`
/// apart, batch items `stride` apart) spans from `p`, rounded to bf16.
static std::vector<float> roundedToBF16(const float *p, int64_t batch,
                                        int64_t stride, int64_t rows,
                                        int64_t cols, int64_t ld) {
  if (batch <= 0 || rows <= 0 || cols <= 0)
    return {};
  std::vector<float> out(p, p + (batch - 1) * stride + (rows - 1) * ld + cols);
  for (float &x : out)
    x = roundToBF16(x);
  return out;
}

extern "C" void zbrt_sgemm_batched_bf16(int32_t transA, int32_t transB,
                                        int64_t batch, int64_t m, int64_t n,
                                        int64_t k, float alpha, const float *a,
                                        int64_t lda, int64_t strideA,
                                        const float *b, int64_t ldb,
                                        int64_t strideB, float beta, float *c,
                                        int64_t ldc, int64_t strideC) {
  std::vector<float> a16 =
      roundedToBF16(a, batch, strideA, transA ? k : m, transA ? m : k, lda);
  std::vector<float> b16 =
      roundedToBF16(b, batch, strideB, transB ? n : k, transB ? k : n, ldb);
  zbrt_sgemm_batched(transA, transB, batch, m, n, k, alpha, a16.data(), lda,
                     strideA, b16.data(), ldb, strideB, beta, c, ldc, strideC);
}

extern "C" void zbrt_sgemm_batched_terms(
    int32_t terms, int32_t transA, int32_t transB, int64_t batch, int64_t m,
    int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
    int64_t strideA, const float *b, int64_t ldb, int64_t strideB, float beta,
    float *c, int64_t ldc, int64_t strideC) {
  // Whatever its size, a product that leaves out terms takes the kernel
  // (the only one that can): a choice by the call site alone, but for a
  // packing buffer that cannot be allocated.
  bool known = terms >= ZBRT_TERMS_K_UPTO_M && terms <= ZBRT_TERMS_M_UPTO_N;
  SgemmIsa isa = kernelIsa();
  if (known && isa != SgemmIsa::None && openblas_get_num_threads() == 1) {
    auto kept = static_cast<zbrt::SgemmTerms>(terms);
    // Items a node-local rank's idle core may take (Lending.h); those for
    // which no packing buffer can be had compute every term below.
    std::vector<char> failed(batch, 0);
    auto item = [&](int64_t i) {
      failed[i] = !zbrt::sgemm(transA, transB, m, n, k, alpha, a + i * strideA,
                               lda, b + i * strideB, ldb, beta, c + i * strideC,
                               ldc, isa, kept);
    };
    if (!shareWork(batch, batch * m * n * k, item))
      for (int64_t i = 0; i < batch; ++i)
        item(i);
    for (int64_t i = 0; i < batch; ++i)
      if (failed[i])
        zbrt_sgemm(transA, transB, m, n, k, alpha, a + i * strideA, lda,
                   b + i * strideB, ldb, beta, c + i * strideC, ldc);
    return;
  }
  zbrt_sgemm_batched(transA, transB, batch, m, n, k, alpha, a, lda, strideA, b,
                     ldb, strideB, beta, c, ldc, strideC);
}

extern "C" void zbrt_dgemm_batched(int32_t transA, int32_t transB,
                                   int64_t batch, int64_t m, int64_t n,
                                   int64_t k, double alpha, const double *a,
                                   int64_t lda, int64_t strideA,
                                   const double *b, int64_t ldb,
                                   int64_t strideB, double beta, double *c,
                                   int64_t ldc, int64_t strideC) {
  batched(zbrt_dgemm, /*share=*/false, transA, transB, batch, m, n, k, alpha, a,
          lda, strideA, b, ldb, strideB, beta, c, ldc, strideC);
}

extern "C" void zbrt_transpose_f32(int64_t batch0, int64_t batch1, int64_t rows,
                                   int64_t cols, const float *in,
                                   int64_t inStride0, int64_t inStride1,
                                   int64_t ldIn, float *out, int64_t outStride0,
                                   int64_t outStride1, int64_t ldOut) {
  for (int64_t b0 = 0; b0 < batch0; ++b0)
    for (int64_t b1 = 0; b1 < batch1; ++b1)
      zbrt::transposeF32(rows, cols, in + b0 * inStride0 + b1 * inStride1, ldIn,
                         out + b0 * outStride0 + b1 * outStride1, ldOut);
}
