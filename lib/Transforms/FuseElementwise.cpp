//===- FuseElementwise.cpp - Fuse elementwise linalg chains ---------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace zb {
#define GEN_PASS_DEF_ZBFUSEELEMENTWISE
#include "zb/Transforms/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {
struct FuseElementwisePass
    : zb::impl::ZBFuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // Fuse only single-use producers: fusing a shared producer would
    // recompute it in every consumer. A producer whose body reads its own
    // output is not fused either: in a consumer with more loops that output
    // would be read back and rewritten once per extra iteration.
    linalg::populateElementwiseOpsFusionPatterns(
        patterns, [](OpOperand *fused) {
          auto producer = fused->get().getDefiningOp<linalg::LinalgOp>();
          if (!producer || !producer->hasOneUse())
            return false;
          return llvm::none_of(producer.getDpsInitsMutable(),
                               [&](OpOperand &init) {
                                 return producer.payloadUsesValueFromOperand(
                                     &init);
                               });
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
