//===- FuseElementwise.cpp - Fuse elementwise linalg chains ---------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Passes.h"

#include "zb/Autodiff/Autodiff.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace zb {
#define GEN_PASS_DEF_ZBFUSEELEMENTWISE
#include "zb/Transforms/Passes.h.inc"
} // namespace zb

using namespace mlir;

/// Whether `op` computes a contraction, out + a * b over a reduction loop
/// of two of its inputs, whatever unused inputs it still carries (the
/// canonicalizer drops them later; linalg::isaContractionOpInterface wants
/// exactly two).
static bool isContraction(linalg::LinalgOp op) {
  if (linalg::isaContractionOpInterface(op))
    return true;
  if (op.getNumReductionLoops() == 0 || op.getNumDpsInits() != 1)
    return false;
  Operation *mul = zb::autodiff::mulAddProduct(op.getBlock());
  Value out = op.getBlock()->getArguments().back();
  return mul && llvm::all_of(mul->getOperands(), [&](Value v) {
           return isa<BlockArgument>(v) && v != out;
         });
}

namespace {
struct FuseElementwisePass
    : zb::impl::ZBFuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    // Folded bodies first (autodiff's `x * 1.0`, its dead primal
    // recomputations), so that a contraction reads as one below.
    if (failed(applyPatternsGreedily(getOperation(),
                                     RewritePatternSet(&getContext()))))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    // Fuse only single-use producers: fusing a shared producer would
    // recompute it in every consumer. A producer whose body reads its own
    // output is not fused either: in a consumer with more loops that output
    // would be read back and rewritten once per extra iteration. Nothing is
    // fused into a contraction written as a generic, such as a weight
    // gradient: it would stop being one and lower to loops instead of the
    // gemm (a ReLU's derivative, when no input gradient needs it
    // materialised; a bf16 stash read back in f32).
    linalg::populateElementwiseOpsFusionPatterns(
        patterns, [](OpOperand *fused) {
          auto producer = fused->get().getDefiningOp<linalg::LinalgOp>();
          if (!producer || !producer->hasOneUse())
            return false;
          if (auto consumer = dyn_cast<linalg::LinalgOp>(fused->getOwner());
              consumer && isContraction(consumer))
            return false;
          return llvm::none_of(
              producer.getDpsInitsMutable(), [&](OpOperand &init) {
                return producer.payloadUsesValueFromOperand(&init);
              });
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
