//===- UniqueFills.cpp - One fill per destination use ---------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

namespace zb {
#define GEN_PASS_DEF_ZBUNIQUEFILLS
#include "zb/Transforms/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {
struct UniqueFillsPass : zb::impl::ZBUniqueFillsBase<UniqueFillsPass> {
  void runOnOperation() override {
    SmallVector<linalg::FillOp> fills;
    getOperation()->walk([&](linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics())
        fills.push_back(fill);
    });
    OpBuilder builder(&getContext());
    for (linalg::FillOp fill : fills) {
      Value filled = fill->getResult(0);
      SmallVector<OpOperand *> destinations;
      for (OpOperand &use : filled.getUses())
        if (auto dps = dyn_cast<DestinationStyleOpInterface>(use.getOwner()))
          if (dps.isDpsInit(&use))
            destinations.push_back(&use);
      // Each writer gets its fill right before it, where the gemm lowering
      // finds it (and turns it into beta = 0); the original stays only for
      // the other uses.
      Value init = fill.getDpsInitOperand(0)->get();
      for (OpOperand *use : destinations) {
        builder.setInsertionPoint(use->getOwner());
        IRMapping mapping;
        if (auto empty = init.getDefiningOp<tensor::EmptyOp>())
          mapping.map(init, builder.clone(*empty)->getResult(0));
        use->set(builder.clone(*fill, mapping)->getResult(0));
      }
      if (!filled.use_empty())
        continue;
      fill->erase();
      if (auto empty = init.getDefiningOp<tensor::EmptyOp>();
          empty && empty->use_empty())
        empty->erase();
    }
  }
};
} // namespace
