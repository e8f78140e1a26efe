//===- ScalarTangent.h - Derivatives of scalar computations ----*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// Forward-mode derivatives of the scalar arith/math ops of a linalg.generic
// body: the building block of the generic op's reverse-mode rule.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_LIB_AUTODIFF_SCALARTANGENT_H
#define ZB_LIB_AUTODIFF_SCALARTANGENT_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace zb::autodiff {

/// Computes d(value)/d(seed) for scalar values computed in `region` from
/// `seed`, emitting the derivative ops with `builder`. Values not computed
/// in `region` (and block arguments other than `seed`) are constants.
///
/// With a `seedTangent` (of the seed's type) the result is d(value)/d(seed)
/// times it: a reverse-mode rule seeds the output's adjoint, so that a
/// select's branch not taken contributes an exact zero even where the
/// adjoint is not finite (PyTorch's where), rather than 0 * inf = NaN.
class ScalarTangent {
public:
  ScalarTangent(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value seed,
                mlir::Region *region, mlir::Value seedTangent = {})
      : b(builder), loc(loc), seed(seed), seedTangent(seedTangent),
        region(region) {}

  /// The derivative of `value`; a null Value means zero. Emits a diagnostic
  /// and fails for an op without a scalar derivative rule.
  mlir::FailureOr<mlir::Value> get(mlir::Value value);

private:
  mlir::Value constant(mlir::Type type, double value);
  mlir::Value orZero(mlir::Value tangent, mlir::Type type);

  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::Value seed;
  mlir::Value seedTangent;
  mlir::Region *region;
  llvm::DenseMap<mlir::Value, mlir::Value> memo;
};

} // namespace zb::autodiff

#endif // ZB_LIB_AUTODIFF_SCALARTANGENT_H
