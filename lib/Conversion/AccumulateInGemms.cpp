//===- AccumulateInGemms.cpp - Sums into arguments added by their GEMMs ---===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Analysis/GroupedProduct.h"
#include "zb/Conversion/Passes.h"
#include "zb/Conversion/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Matchers.h"

namespace zb {
#define GEN_PASS_DEF_ZBACCUMULATEINGEMMS
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;

/// The addend of `add` if it is `sum += x` in place on an argument of
/// `fn`: an elementwise `linalg.generic` with `x` as its one input, the
/// argument `sum` as its output and `out + in` (either order) as its body.
static Value addendOf(linalg::GenericOp add, func::FuncOp fn) {
  if (add.getNumDpsInputs() != 1 || add.getNumDpsInits() != 1 ||
      add.getNumLoops() != add.getNumParallelLoops() ||
      !llvm::all_of(add.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return {};
  auto sum = dyn_cast<BlockArgument>(add.getDpsInitOperand(0)->get());
  if (!sum || sum.getOwner() != &fn.getBody().front())
    return {};
  Block *body = add.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto addf = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!addf || &body->front() != addf)
    return {};
  Value in = body->getArgument(0), out = body->getArgument(1);
  if (!((addf.getLhs() == out && addf.getRhs() == in) ||
        (addf.getLhs() == in && addf.getRhs() == out)))
    return {};
  return add.getDpsInputOperand(0)->get();
}

/// Rewrites `sum += gemm(a, b)`, where the GEMM (or grouped product, a
/// mixture of experts' weight gradient) starts from zeros and nothing else
/// reads its result, into the GEMM starting from `sum`.
/// Returns whether it did.
static bool accumulateInGemm(linalg::GenericOp add, func::FuncOp fn) {
  Value addend = addendOf(add, fn);
  if (!addend || !addend.hasOneUse() ||
      addend.getType() != add.getResult(0).getType())
    return false;
  auto gemm = addend.getDefiningOp<linalg::LinalgOp>();
  if (!gemm || gemm->getNumResults() != 1 || !gemm.hasPureTensorSemantics() ||
      !(zb::isGemm(gemm) || zb::matchGroupedProduct(gemm)))
    return false;
  auto fill = gemm.getDpsInitOperand(0)->get().getDefiningOp<linalg::FillOp>();
  if (!fill || !matchPattern(fill.value(), m_AnyZeroFloat()))
    return false;
  gemm.getDpsInitsMutable()[0].assign(add.getDpsInitOperand(0)->get());
  add.getResult(0).replaceAllUsesWith(addend);
  add->erase();
  if (fill->use_empty())
    fill->erase();
  return true;
}

namespace {
struct AccumulateInGemmsPass
    : zb::impl::ZBAccumulateInGemmsBase<AccumulateInGemmsPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    SmallVector<linalg::GenericOp> adds;
    fn.walk([&](linalg::GenericOp op) { adds.push_back(op); });
    for (linalg::GenericOp add : adds)
      (void)accumulateInGemm(add, fn);
  }
};
} // namespace
