//===- CostModel.h - FLOPs and bytes of ops ---------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The one cost model the compiler uses: the B/W split records it on stages
// for the scheduler, and the partitioner balances stages with it.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_ANALYSIS_COSTMODEL_H
#define ZB_ANALYSIS_COSTMODEL_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"

namespace zb {

/// Floating-point operations `op` performs (with everything nested in it):
/// a linalg op's iteration-space size times the arith/math ops in its body
/// (2·M·N·K for a matmul; a product marked `zb.skip_terms` counts only the
/// terms it computes, a grouped product 2·M·N·K for its rows' groups alone), a
/// loop's trip count times its body's cost, one per element of the result for
/// other tensor arithmetic, zero for data movement and reshapes.
double estimateFlops(mlir::Operation *op);

/// The FLOPs of all ops in `region`.
double estimateFlops(mlir::Region &region);

/// The bytes a value of `type` occupies (0 for non-shaped or dynamic).
int64_t estimateBytes(mlir::Type type);

} // namespace zb

#endif // ZB_ANALYSIS_COSTMODEL_H
