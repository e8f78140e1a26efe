//===- Gemm.h - Weights packed once for the f32 products --------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// zbrt_sgemm (zbrt.h) packs its B operand into column panels on every call.
// Within a step a layer's weight is B of 2M products (its forward and
// input-gradient products, M microbatches each) and does not change: a
// PackedWeights scope, opened by the driver around a step with the
// parameters' memory, lets those products pack each weight once. Only the
// thread that opens the scope sees it; its products whose B lies wholly in
// one of the ranges use the copy packed at the first of them. The memory in
// the ranges must not change while the scope is open. The packed copies are
// kept for the next scope (repacked there), so their memory is allocated
// once per process.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_GEMM_H
#define ZBRT_GEMM_H

#include <cstddef>
#include <utility>
#include <vector>

namespace zbrt {

/// A byte range [first, first + second).
using MemoryRange = std::pair<const void *, size_t>;

class PackedWeights {
public:
  /// Opens the scope for `weights`; scopes do not nest (an inner one
  /// replaces the outer's ranges until it closes).
  explicit PackedWeights(std::vector<MemoryRange> weights);
  ~PackedWeights();
  PackedWeights(const PackedWeights &) = delete;
  PackedWeights &operator=(const PackedWeights &) = delete;
};

/// Bytes of the packed copies this thread holds.
size_t packedWeightBytes();

} // namespace zbrt

#endif // ZBRT_GEMM_H
