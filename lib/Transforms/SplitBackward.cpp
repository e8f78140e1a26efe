//===- SplitBackward.cpp - The --zb-split-backward pass -------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Passes.h"

#include "RegionStash.h"

#include "zb/Dialect/Pipe/PipeOps.h"

#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace zb {
#define GEN_PASS_DEF_ZBSPLITBACKWARD
#include "zb/Transforms/Passes.h.inc"
} // namespace zb

using namespace mlir;
using namespace zb;

/// The ops of `block` that `roots` depend on, through operands and values
/// used inside nested regions.
static DenseSet<Operation *> backwardSlice(Block &block, ValueRange roots) {
  DenseSet<Operation *> slice;
  SmallVector<Value> worklist(roots.begin(), roots.end());
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &block || !slice.insert(def).second)
      continue;
    worklist.append(def->operand_begin(), def->operand_end());
    if (def->getNumRegions()) {
      llvm::SetVector<Value> captured;
      getUsedValuesDefinedAbove(def->getRegions(), captured);
      worklist.append(captured.begin(), captured.end());
    }
  }
  return slice;
}

static void splitStage(pipe::StageOp stage) {
  Region &backwardInput = stage.getBackwardInput();
  Region &backwardWeight = stage.getBackwardWeight();
  backwardInput.takeBody(stage.getBackward());
  Block &bBlock = backwardInput.front();
  auto oldYield = cast<pipe::YieldOp>(bBlock.getTerminator());
  unsigned numInputs = stage.getInputs().size();
  SmallVector<Value> inputGrads(oldYield.getValues().take_front(numInputs));
  SmallVector<Value> paramGrads(oldYield.getValues().drop_front(numInputs));

  // B keeps what the input gradients need; everything else moves to W.
  DenseSet<Operation *> bOps = backwardSlice(bBlock, inputGrads);
  Block *wBlock = new Block();
  backwardWeight.push_back(wBlock);
  for (Operation &op : llvm::make_early_inc_range(bBlock.without_terminator()))
    if (!bOps.contains(&op))
      op.moveBefore(wBlock, wBlock->end());
  OpBuilder b = OpBuilder::atBlockEnd(wBlock);
  pipe::YieldOp::create(b, stage.getLoc(), paramGrads, ValueRange());

  // What W reads from B (or from B's arguments) is the B→W stash.
  SmallVector<Value> wStash = stashValuesUsedFromAbove(backwardWeight, 0);
  b.setInsertionPoint(oldYield);
  pipe::YieldOp::create(b, oldYield.getLoc(), inputGrads, wStash);
  oldYield.erase();

  recordStageCosts(stage);
  Builder attrs(stage.getContext());
  stage.setMemBAttr(attrs.getI64IntegerAttr(forwardStashBytes(stage)));
  stage.setMemWAttr(attrs.getI64IntegerAttr(backwardWeightStashBytes(stage)));
}

namespace {
struct SplitBackwardPass : zb::impl::ZBSplitBackwardBase<SplitBackwardPass> {
  void runOnOperation() override {
    getOperation()->walk([](pipe::StageOp stage) {
      if (!stage.getBackward().empty())
        splitStage(stage);
    });
  }
};
} // namespace
