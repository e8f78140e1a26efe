//===- DecomposeAggregates.cpp - Decompose aggregate linalg ops -----------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"

namespace zb {
#define GEN_PASS_DEF_ZBDECOMPOSEAGGREGATES
#include "zb/Transforms/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {
struct DecomposeAggregatesPass
    : zb::impl::ZBDecomposeAggregatesBase<DecomposeAggregatesPass> {
  void runOnOperation() override {
    SmallVector<linalg::AggregatedOpInterface> ops;
    getOperation()->walk(
        [&](linalg::AggregatedOpInterface op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::AggregatedOpInterface op : ops) {
      // Softmax's decomposition builds float identities (-inf, 0.0).
      if (auto softmax = dyn_cast<linalg::SoftmaxOp>(op.getOperation()))
        if (!isa<FloatType>(softmax.getInputOperandType().getElementType())) {
          op->emitError("'")
              << op->getName() << "' needs a float element type, got "
              << softmax.getInputOperandType().getElementType();
          return signalPassFailure();
        }
      rewriter.setInsertionPoint(op);
      FailureOr<SmallVector<Value>> results = op.decomposeOperation(rewriter);
      if (failed(results)) {
        op->emitError("cannot decompose '") << op->getName() << "'";
        return signalPassFailure();
      }
      rewriter.replaceOp(op, *results);
    }
  }
};
} // namespace
