//===- ApproximateMath.cpp - Inline polynomial math functions -------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"

#include "RewriteOnly.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/STLExtras.h"

namespace zb {
#define GEN_PASS_DEF_ZBAPPROXIMATEMATH
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {
struct ApproximateMathPass
    : zb::impl::ZBApproximateMathBase<ApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<std::string> names(ops.begin(), ops.end());
    if (names.empty())
      names = {"erf", "exp", "log"};
    auto selected = [&](StringRef name) {
      name.consume_front("math.");
      return llvm::is_contained(names, name);
    };
    SmallVector<Operation *> targets;
    getOperation()->walk([&](Operation *op) {
      if (isa<math::MathDialect>(op->getDialect()) &&
          selected(op->getName().getStringRef()))
        targets.push_back(op);
    });
    if (targets.empty())
      return;
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, selected);
    if (failed(zb::detail::rewriteOnly(targets, std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
