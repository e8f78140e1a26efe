//===- GroupedProduct.h - Products routed by a group index ------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// A grouped product is the linalg form of a mixture-of-experts layer's
// matrix products: a contraction whose every term is kept only where an
// integer operand, the group of a row, equals the loop over the groups.
// For tokens routed to experts,
//
//   y[r, n] = sum over e, k of (group[r] == e ? x[r, k] * w[e, k, n] : 0)
//
// is each row's product with its expert's weight, and its gradients are
// grouped products again: dx[r, k] sums dy[r, n] * w[e, k, n] the same way,
// dw[e, k, n] sums x[r, k] * dy[r, n] over the rows of group e. As loops the
// op visits every group at every point; the runtime computes each group's
// rows in one gemm instead (--zb-lower-gemm-to-runtime), at 1 / groups of
// the loops' FLOPs, which is what the cost model counts.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_ANALYSIS_GROUPEDPRODUCT_H
#define ZB_ANALYSIS_GROUPEDPRODUCT_H

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"

#include <optional>

namespace zb {

/// The parts of a grouped product.
struct GroupedProduct {
  /// The operand numbers of the two float factors, in the order the body
  /// multiplies them.
  unsigned lhs, rhs;
  /// The operand number of the integer group index: read through one loop
  /// (the row's) that is not `groupLoop`.
  unsigned group;
  /// The loop over the groups.
  unsigned groupLoop;
};

/// `op` as a grouped product, if its body is exactly
/// `out + select(group == index(g), a * b, 0)`: the select may stand around
/// either factor or around the product, factors of 1.0 and casts of the
/// group index (either side, to index or to the index's integer type) are
/// allowed, and ops that the yield does not use are ignored. `op` must have
/// one init and read the group index of each iteration's row through a
/// single loop.
std::optional<GroupedProduct> matchGroupedProduct(mlir::linalg::LinalgOp op);

/// A grouped product whose operands are matrices the way a grouped gemm
/// takes them, over four loops: the row r, the group e and two more.
struct GroupedLayout {
  enum Kind {
    /// C[r, j] += A[r, p] * B[e, p, j] (B stored (e, j, p) when `transB`):
    /// each row times its group's matrix (a forward product, an input
    /// gradient).
    Rows,
    /// C[e, i, j] += A[r, i] * B[r, j]: each group's matrix summed over its
    /// rows (a weight gradient).
    Reduce,
  } kind;
  GroupedProduct product;
  /// The input operand numbers of A and B.
  unsigned a, b;
  bool transB = false;
  unsigned rowLoop;
  /// Rows: the loops of C's columns j and of the inner dimension p;
  /// Reduce: of C's rows i and columns j.
  unsigned loop0, loop1;
};

/// `op` as a grouped product of one of GroupedLayout's kinds, all operands
/// read through plain loops in those orders and the loops' iterator types
/// the kind's (the shapes may be dynamic and the types anything).
std::optional<GroupedLayout> matchGroupedLayout(mlir::linalg::LinalgOp op);

} // namespace zb

#endif // ZB_ANALYSIS_GROUPEDPRODUCT_H
