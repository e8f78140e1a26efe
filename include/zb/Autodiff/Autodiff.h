//===- Autodiff.h - Reverse-mode differentiation ----------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The engine behind --zb-autodiff: reverse-mode differentiation of the ops of
// one block on tensors, with activity analysis, calling each op's
// GradientOpInterface rule.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_AUTODIFF_AUTODIFF_H
#define ZB_AUTODIFF_AUTODIFF_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace zb::autodiff {

/// Builds, at `builder`'s insertion point, the adjoints of `wrt` given the
/// adjoints `seeds` of some values computed in `block` (pairs of value and
/// its adjoint). Only ops on a path from a `wrt` value to a seeded value are
/// differentiated (activity analysis); ops in `block` before the insertion
/// point are the primal computation and may be used by the adjoint code.
/// Returns one adjoint per `wrt` value, a zero tensor where none flows.
/// Emits a diagnostic naming the op and value on failure.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
buildReverse(mlir::OpBuilder &builder, mlir::Block &block,
             llvm::ArrayRef<std::pair<mlir::Value, mlir::Value>> seeds,
             llvm::ArrayRef<mlir::Value> wrt);

/// Whether gradients flow through values of `type`: float tensors and
/// float scalars. buildReverse() gives every other value a zero adjoint and
/// reads no seed of one.
bool isDifferentiable(mlir::Type type);

/// A zero-filled tensor of `type` (tensor.empty + linalg.fill).
mlir::Value buildZeros(mlir::OpBuilder &builder, mlir::Location loc,
                       mlir::RankedTensorType type);

/// `a + b` elementwise on tensors of the same type; null operands are zero.
mlir::Value buildAdd(mlir::OpBuilder &builder, mlir::Location loc,
                     mlir::Value a, mlir::Value b);

/// `sum + addend` elementwise, computed into `sum` (the `outs` of the
/// linalg.generic), so that bufferization can update `sum`'s buffer in
/// place; the same additions, in the same order, as `buildAdd`.
mlir::Value buildAddInto(mlir::OpBuilder &builder, mlir::Location loc,
                         mlir::Value sum, mlir::Value addend);

/// Where a gradient function's gradient is: its argument (`first` true) or
/// its result number `second`.
using GradientSource = std::pair<bool, unsigned>;

/// The accumulating form of gradient function `fn`, inserted after it under
/// the name `name`: `fn`'s arguments followed by one sum per gradient
/// (`grads`, in order), returning `fn`'s results numbered `kept` followed
/// by each sum with its gradient added (buildAddInto, so that bufferization
/// updates the caller's sum buffers in place and --zb-accumulate-in-gemms
/// can let the gemm computing a gradient add into its sum).
mlir::func::FuncOp buildAccumulating(mlir::OpBuilder &builder,
                                     mlir::func::FuncOp fn,
                                     llvm::StringRef name,
                                     llvm::ArrayRef<GradientSource> grads,
                                     llvm::ArrayRef<unsigned> kept);

/// The product of a linalg op's body that is exactly `yield(out + a * b)`
/// (either order of each; `out` the body's last argument), as the
/// contractions autodiff builds are; null otherwise.
mlir::Operation *mulAddProduct(mlir::Block *body);

} // namespace zb::autodiff

#endif // ZB_AUTODIFF_AUTODIFF_H
