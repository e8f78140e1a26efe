//===- RegionStash.cpp - Values handed between stage regions --------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "RegionStash.h"

#include "zb/Analysis/CostModel.h"
#include "zb/Dialect/Pipe/PipeOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

using namespace mlir;

bool zb::isRematerialisable(Operation *op) {
  if (op->getNumOperands() == 0 && op->getNumRegions() == 0 &&
      (op->hasTrait<OpTrait::ConstantLike>() || isa<tensor::EmptyOp>(op)))
    return true;
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return llvm::all_of(fill->getOperands(), [](Value v) {
      Operation *def = v.getDefiningOp();
      return def && isRematerialisable(def);
    });
  return false;
}

Value zb::rematerialise(OpBuilder &b, Value value, IRMapping &mapping) {
  if (Value copy = mapping.lookupOrNull(value))
    return copy;
  Operation *def = value.getDefiningOp();
  for (Value operand : def->getOperands())
    rematerialise(b, operand, mapping);
  Operation *copy = b.clone(*def, mapping);
  return copy->getResult(cast<OpResult>(value).getResultNumber());
}

SmallVector<Value> zb::stashValuesUsedFromAbove(Region &region,
                                                unsigned firstArg) {
  // Values from anywhere outside `region` (a sibling region of the same
  // stage, not only its ancestors), in order of first use.
  llvm::SetVector<Value> used;
  region.walk([&](Operation *op) {
    for (Value v : op->getOperands())
      if (!region.isAncestor(v.getParentRegion()))
        used.insert(v);
  });
  Block &block = region.front();
  OpBuilder b = OpBuilder::atBlockBegin(&block);
  auto inRegion = [&](OpOperand &use) {
    return region.isAncestor(use.getOwner()->getParentRegion());
  };
  SmallVector<Value> stash;
  IRMapping copies;
  // A reshape of a value from outside is recreated from that value, which
  // is stashed in its place: the two are one buffer, and stashing both
  // would hold (and copy) it twice.
  std::function<Value(Value)> replacementFor = [&](Value value) -> Value {
    if (Value done = copies.lookupOrNull(value))
      return done;
    Operation *def = value.getDefiningOp();
    if (def && isRematerialisable(def))
      return rematerialise(b, value, copies);
    if (def && isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(def) &&
        llvm::all_of(def->getOperands().drop_front(), [](Value size) {
          return matchPattern(size, m_Constant());
        })) {
      Value source = replacementFor(def->getOperand(0));
      IRMapping mapping;
      mapping.map(def->getOperand(0), source);
      for (Value size : def->getOperands().drop_front())
        mapping.map(size, rematerialise(b, size, copies));
      Value reshaped = b.clone(*def, mapping)->getResult(0);
      copies.map(value, reshaped);
      return reshaped;
    }
    Value arg = block.insertArgument(firstArg + stash.size(), value.getType(),
                                     value.getLoc());
    stash.push_back(value);
    copies.map(value, arg);
    return arg;
  };
  for (Value value : used)
    value.replaceUsesWithIf(replacementFor(value), inRegion);
  return stash;
}

/// The forward region's parameter arguments (after its inputs and data).
static ArrayRef<BlockArgument> forwardParamArgs(zb::pipe::StageOp stage) {
  return stage.getForward().front().getArguments().drop_front(
      stage.getInputs().size() + stage.getData().size());
}

void zb::recordStageCosts(pipe::StageOp stage) {
  Builder attrs(stage.getContext());
  stage.setCostFAttr(attrs.getF64FloatAttr(estimateFlops(stage.getForward())));
  if (!stage.isSplit()) {
    stage.setCostBAttr(
        attrs.getF64FloatAttr(estimateFlops(stage.getBackward())));
    return;
  }
  stage.setCostBAttr(
      attrs.getF64FloatAttr(estimateFlops(stage.getBackwardInput())));
  stage.setCostWAttr(
      attrs.getF64FloatAttr(estimateFlops(stage.getBackwardWeight())));
}

int64_t zb::forwardStashBytes(pipe::StageOp stage) {
  ArrayRef<BlockArgument> params = forwardParamArgs(stage);
  int64_t bytes = 0;
  for (Value v : stage.getForwardYield().getStash())
    if (!llvm::is_contained(params, v))
      bytes += estimateBytes(v.getType());
  return bytes;
}

int64_t zb::backwardWeightStashBytes(pipe::StageOp stage) {
  ArrayRef<BlockArgument> params = forwardParamArgs(stage);
  ValueRange forwardStash = stage.getForwardYield().getStash();
  Block &b = stage.getBackwardInput().front();
  auto isParamStash = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &b &&
           arg.getArgNumber() < forwardStash.size() &&
           llvm::is_contained(params, forwardStash[arg.getArgNumber()]);
  };
  int64_t bytes = 0;
  for (Value v : cast<pipe::YieldOp>(b.getTerminator()).getStash())
    if (!isParamStash(v))
      bytes += estimateBytes(v.getType());
  return bytes;
}
