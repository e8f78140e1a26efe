//===- RowReduction.h - Reductions of one loop with a tree combiner -*- C++
//-*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Conversion: what the GPU lowering (one thread block per row,
// two kernels per column reduction, MapToGPU.cpp) and the CPU's vector code
// (VectorizeRowReductions.cpp) recognise and rebuild: a linalg op that folds
// one loop (a row reduction: its innermost) into its one output with a
// combiner that can run as a tree.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_LIB_CONVERSION_ROWREDUCTION_H
#define ZB_LIB_CONVERSION_ROWREDUCTION_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"

#include <optional>

namespace zb::detail {

/// A linalg op that reduces one of its loops into its one output as
/// `out = combine(out, element(inputs))`, where the combiner is an addf,
/// mulf or a float max or min. A row reduction reduces its innermost loop;
/// a column reduction another one (a bias gradient: the sum over rows).
struct RowReduction {
  mlir::Operation *combiner = nullptr;
  /// The output's block argument, and the other operand of `combiner`.
  mlir::Value accumulator, element;
  /// The combiner's identity, of the output's element type.
  mlir::TypedAttr identity;
  /// The op's static loop ranges; ranges[dim] is the reduction's length.
  llvm::SmallVector<int64_t> ranges;
  /// The reduced loop.
  unsigned dim = 0;

  /// The output's elements: the product of the other loops' ranges.
  int64_t outputElements() const;
};

/// `op` as a reduction: one output, which does not depend on the reduced
/// loop; exactly one reduction loop, at least `minLength` long; static
/// ranges; projected-permutation indexing maps; the output's block argument
/// read by the combiner alone, whose result only the yield reads. The body
/// may read loop indices (linalg.index: the loss's pick of the target
/// class); cloneBodyAt() binds them.
std::optional<RowReduction> matchReduction(mlir::linalg::LinalgOp op,
                                           int64_t minLength);

/// matchReduction() of an op whose reduced loop is the innermost: a row
/// reduction.
std::optional<RowReduction> matchRowReduction(mlir::linalg::LinalgOp op,
                                              int64_t minLength);

/// The identity of the combiner `op` (addf, mulf, max, min) for `type`, or
/// null.
mlir::TypedAttr combinerIdentity(mlir::Operation *op, mlir::Type type);

/// A clone of `match`'s combiner folding `element` into `accumulator`, in
/// its operands' order, with its result of `accumulator`'s type.
mlir::Value combine(mlir::OpBuilder &b, const RowReduction &match,
                    mlir::Value accumulator, mlir::Value element);

/// `op`'s body cloned at loop indices `ivs`, every op but `skip`: the block
/// arguments of `operands` that the body uses bound to their elements there
/// (buffers loaded, scalars as they are), linalg.index to the loop index.
/// Returns the mapping of the body's values to the clones'.
mlir::IRMapping cloneBodyAt(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::linalg::LinalgOp op,
                            llvm::ArrayRef<mlir::OpOperand *> operands,
                            llvm::ArrayRef<mlir::Value> ivs,
                            mlir::Operation *skip = nullptr);

/// `acc` combined with `op`'s element at loop indices `ivs`: its body but
/// the combiner cloned there on its inputs (cloneBodyAt).
mlir::Value foldElement(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::linalg::LinalgOp op, const RowReduction &match,
                        llvm::ArrayRef<mlir::Value> ivs, mlir::Value acc);

/// The values of `map`'s results (a projected permutation) for loop
/// indices `ivs`.
llvm::SmallVector<mlir::Value> indicesOf(mlir::AffineMap map,
                                         llvm::ArrayRef<mlir::Value> ivs);

} // namespace zb::detail

#endif // ZB_LIB_CONVERSION_ROWREDUCTION_H
