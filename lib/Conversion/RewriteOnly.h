//===- RewriteOnly.h - Patterns applied to chosen ops only ------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_LIB_CONVERSION_REWRITEONLY_H
#define ZB_LIB_CONVERSION_REWRITEONLY_H

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace zb::detail {

/// Applies `patterns` to `targets` and to what their rewrites create, and
/// nothing else, without folding: a greedy driver over the whole module
/// would also fold and simplify every step function, work that grows with
/// the schedule.
inline mlir::LogicalResult
rewriteOnly(llvm::ArrayRef<mlir::Operation *> targets,
            mlir::RewritePatternSet &&patterns) {
  mlir::GreedyRewriteConfig config;
  config.setStrictness(mlir::GreedyRewriteStrictness::ExistingAndNewOps);
  config.enableFolding(false);
  return mlir::applyOpPatternsGreedily(targets, std::move(patterns), config);
}

} // namespace zb::detail

#endif // ZB_LIB_CONVERSION_REWRITEONLY_H
