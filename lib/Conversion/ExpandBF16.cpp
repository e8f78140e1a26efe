//===- ExpandBF16.cpp - bf16 conversions as integer arithmetic ------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"

#include "RewriteOnly.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"

namespace zb {
#define GEN_PASS_DEF_ZBEXPANDBF16
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {
struct ExpandBF16Pass : zb::impl::ZBExpandBF16Base<ExpandBF16Pass> {
  void runOnOperation() override {
    SmallVector<Operation *> targets;
    getOperation()->walk([&](Operation *op) {
      if (isa<arith::TruncFOp, arith::ExtFOp>(op))
        targets.push_back(op);
    });
    if (targets.empty())
      return;
    RewritePatternSet patterns(&getContext());
    arith::populateExpandBFloat16Patterns(patterns);
    if (failed(zb::detail::rewriteOnly(targets, std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
