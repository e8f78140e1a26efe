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

/// Whether `op`'s payload only converts its one input's element type (the
/// widening of a bf16 stash).
static bool isConversion(linalg::LinalgOp op) {
  Block *body = op.getBlock();
  if (op.getNumDpsInputs() != 1 || body->getOperations().size() != 2)
    return false;
  Operation *first = &body->front();
  return isa<arith::ExtFOp, arith::TruncFOp>(first) &&
         first->getOperand(0) == body->getArgument(0);
}

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
    RewritePatternSet patterns(&getContext());
    // Fuse only single-use producers: fusing a shared producer would
    // recompute it in every consumer. A producer whose body reads its own
    // output is not fused either: in a consumer with more loops that output
    // would be read back and rewritten once per extra iteration. A widening
    // (a bf16 stash read back in f32) is not fused into a contraction written
    // as a generic, such as a weight gradient: it would stop being one and
    // lower to loops instead of the gemm. (Other producers still fuse as
    // they always have, which keeps today's bits.)
    linalg::populateElementwiseOpsFusionPatterns(
        patterns, [](OpOperand *fused) {
          auto producer = fused->get().getDefiningOp<linalg::LinalgOp>();
          if (!producer || !producer->hasOneUse())
            return false;
          if (auto consumer = dyn_cast<linalg::LinalgOp>(fused->getOwner());
              consumer && isConversion(producer) && isContraction(consumer))
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
