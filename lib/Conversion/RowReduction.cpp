//===- RowReduction.cpp - Reductions along the rows' innermost loop -------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "RowReduction.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace zb::detail;

TypedAttr zb::detail::combinerIdentity(Operation *op, Type type) {
  auto floatType = dyn_cast<FloatType>(type);
  if (!floatType)
    return {};
  const llvm::fltSemantics &semantics = floatType.getFloatSemantics();
  if (isa<arith::AddFOp>(op))
    return FloatAttr::get(type, 0.0);
  if (isa<arith::MulFOp>(op))
    return FloatAttr::get(type, 1.0);
  if (isa<arith::MaximumFOp, arith::MaxNumFOp>(op))
    return FloatAttr::get(type, APFloat::getInf(semantics, /*Negative=*/true));
  if (isa<arith::MinimumFOp, arith::MinNumFOp>(op))
    return FloatAttr::get(type, APFloat::getInf(semantics, /*Negative=*/false));
  return {};
}

std::optional<RowReduction> zb::detail::matchReduction(linalg::LinalgOp op,
                                                       int64_t minLength) {
  if (op.getNumDpsInits() != 1 || op.getNumReductionLoops() != 1 ||
      op->getNumRegions() != 1)
    return std::nullopt;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  RowReduction match;
  match.dim =
      llvm::find(iterators, utils::IteratorType::reduction) - iterators.begin();
  match.ranges = op.getStaticLoopRanges();
  if (llvm::any_of(match.ranges, ShapedType::isDynamic) ||
      match.ranges[match.dim] < minLength)
    return std::nullopt;
  for (AffineMap map : op.getIndexingMapsArray())
    if (!map.isProjectedPermutation())
      return std::nullopt;
  if (op.getMatchingIndexingMap(op.getDpsInitOperand(0))
          .isFunctionOfDim(match.dim))
    return std::nullopt;
  Block *body = op.getBlock();
  BlockArgument acc = body->getArguments().back();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  Operation *combiner = yield.getValues()[0].getDefiningOp();
  // The accumulator feeds the combiner alone, and the combiner's result
  // only the yield: the rest of the body computes the element.
  if (!combiner || combiner->getBlock() != body ||
      combiner->getNumOperands() != 2 || !acc.hasOneUse() ||
      acc.getUses().begin()->getOwner() != combiner ||
      !combiner->getResult(0).hasOneUse())
    return std::nullopt;
  match.combiner = combiner;
  match.accumulator = acc;
  match.element = combiner->getOperand(0) == acc ? combiner->getOperand(1)
                                                 : combiner->getOperand(0);
  match.identity = combinerIdentity(combiner, acc.getType());
  if (!match.identity || match.element == acc)
    return std::nullopt;
  return match;
}

std::optional<RowReduction> zb::detail::matchRowReduction(linalg::LinalgOp op,
                                                          int64_t minLength) {
  std::optional<RowReduction> match = matchReduction(op, minLength);
  if (!match || match->dim + 1 != match->ranges.size())
    return std::nullopt;
  return match;
}

int64_t RowReduction::outputElements() const {
  int64_t elements = 1;
  for (auto [d, range] : llvm::enumerate(ranges))
    if (d != dim)
      elements *= range;
  return elements;
}

Value zb::detail::combine(OpBuilder &b, const RowReduction &match,
                          Value accumulator, Value element) {
  IRMapping pair;
  pair.map(match.accumulator, accumulator);
  pair.map(match.element, element);
  Operation *clone = b.clone(*match.combiner, pair);
  clone->getResult(0).setType(accumulator.getType());
  return clone->getResult(0);
}

SmallVector<Value> zb::detail::indicesOf(AffineMap map, ArrayRef<Value> ivs) {
  SmallVector<Value> indices;
  for (AffineExpr expr : map.getResults())
    indices.push_back(ivs[cast<AffineDimExpr>(expr).getPosition()]);
  return indices;
}

IRMapping zb::detail::cloneBodyAt(OpBuilder &b, Location loc,
                                  linalg::LinalgOp op,
                                  ArrayRef<OpOperand *> operands,
                                  ArrayRef<Value> ivs, Operation *skip) {
  IRMapping values;
  for (OpOperand *operand : operands) {
    BlockArgument arg = op.getMatchingBlockArgument(operand);
    if (arg.use_empty())
      continue;
    Value element = operand->get();
    if (isa<MemRefType>(element.getType()))
      element = memref::LoadOp::create(
          b, loc, element, indicesOf(op.getMatchingIndexingMap(operand), ivs));
    values.map(arg, element);
  }
  for (Operation &inner : op.getBlock()->without_terminator()) {
    if (&inner == skip)
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(inner))
      values.map(index.getResult(), ivs[index.getDim()]);
    else
      b.clone(inner, values);
  }
  return values;
}

Value zb::detail::foldElement(OpBuilder &b, Location loc, linalg::LinalgOp op,
                              const RowReduction &match, ArrayRef<Value> ivs,
                              Value acc) {
  IRMapping values =
      cloneBodyAt(b, loc, op, op.getDpsInputOperands(), ivs, match.combiner);
  return combine(b, match, acc, values.lookupOrDefault(match.element));
}
