//===- Gemm.h - Weights packed once for the f32 products --------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// zbrt_sgemm (zbrt.h) packs its B operand into column panels on every call.
// Within a step a layer's weight is B of 2M products (its forward and
// input-gradient products, M microbatches each) and does not change: a
// PackedWeights scope, opened by the driver around a step with the
// parameters' memory, lets those products pack each weight once. Only the
// thread that opens the scope sees it; its products the kernel takes whose B
// lies wholly in one of the ranges use the copy packed at the first of them.
// The memory in the ranges must not change while the scope is open. The packed
// copies are kept for the next scope (repacked there, at their first use or
// while the thread waits for a peer), so their memory is allocated once per
// process; they take at most the scope's byte budget (a weight beyond it is
// packed per call, as outside a scope).
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_GEMM_H
#define ZBRT_GEMM_H

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace zbrt {

/// A byte range [first, first + second).
using MemoryRange = std::pair<const void *, size_t>;

/// The default budget of a scope's packed copies: 1 GiB (a rank whose
/// weights take more, twice over for the two transposes, packs the rest
/// per call).
inline constexpr size_t kPackedWeightBudget = size_t(1) << 30;

class PackedWeights {
public:
  /// Opens the scope for `weights`, its packed copies within `budget`
  /// bytes; scopes do not nest (an inner one replaces the outer's ranges
  /// and budget until it closes).
  explicit PackedWeights(std::vector<MemoryRange> weights,
                         size_t budget = kPackedWeightBudget);
  ~PackedWeights();
  PackedWeights(const PackedWeights &) = delete;
  PackedWeights &operator=(const PackedWeights &) = delete;
};

/// Repacks one of the copies the previous scope used, for this thread's
/// open scope, ahead of its first use: for a rank about to wait (for a
/// peer's message), whose wait then does work the step needs anyway. The
/// copies come in the order the previous scope packed them (at their first
/// use, or ahead of it here, in the order before).
/// False when none is left (or no scope is open).
bool packWeightWhileIdle();

/// Bytes of the packed copies this thread holds.
size_t packedWeightBytes();

/// What serves zbrt_sgemm's products above the kernel's minimum here (with
/// AVX2, but for those with A transposed of 2^24 or more, which OpenBLAS
/// serves): the kernel's instruction set ("avx512", "avx2"), or "openblas"
/// (no kernel for this CPU, or ZB_SGEMM=openblas).
const char *sgemmKernelName();

/// What is wrong with ZB_SGEMM, which picks the f32 gemm ("zbrt": the
/// runtime's kernel where the CPU has AVX-512F or AVX2, the default;
/// "openblas"), as a message; empty when it is unset or valid.
std::string sgemmChoiceProblem();

/// Runs OpenBLAS on one thread where its threads are known to give wrong
/// results: Debian's OpenBLAS 0.3.21 with its AVX-512 kernels (Cooperlake,
/// SkylakeX) on two or more threads made a single-process ResNeXt-50's
/// gradients 1e-2 off, though each product's result was right (its
/// Haswell kernels, one thread, or no OpenBLAS at all gave them to 1e-6).
/// Returns a note saying so when it did, else "".
std::string avoidFaultyOpenBLASThreads();

} // namespace zbrt

#endif // ZBRT_GEMM_H
