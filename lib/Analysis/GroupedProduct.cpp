//===- GroupedProduct.cpp - Products routed by a group index --------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Analysis/GroupedProduct.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace {
/// What a term of the body is made of: block arguments multiplied together,
/// under the conditions of the selects around them.
struct Term {
  SmallVector<BlockArgument, 2> factors;
  SmallVector<Value, 1> conditions;
};
} // namespace

/// `value` as a product of block arguments, constants 1.0 and selects
/// between such a product and 0.0 (false: something else).
static bool collectTerm(Value value, Term &term) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    term.factors.push_back(arg);
    return true;
  }
  if (matchPattern(value, m_OneFloat()))
    return true;
  if (auto mul = value.getDefiningOp<arith::MulFOp>())
    return collectTerm(mul.getLhs(), term) && collectTerm(mul.getRhs(), term);
  if (auto select = value.getDefiningOp<arith::SelectOp>()) {
    if (!matchPattern(select.getFalseValue(), m_AnyZeroFloat()))
      return false;
    term.conditions.push_back(select.getCondition());
    return collectTerm(select.getTrueValue(), term);
  }
  return false;
}

/// `value` through index casts.
static Value throughIndexCasts(Value value) {
  while (auto cast = value.getDefiningOp<arith::IndexCastOp>())
    value = cast.getIn();
  return value;
}

std::optional<zb::GroupedProduct> zb::matchGroupedProduct(linalg::LinalgOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumReductionLoops() == 0)
    return std::nullopt;
  Block *body = op.getBlock();
  Operation *yield = body->getTerminator();
  if (yield->getNumOperands() != 1)
    return std::nullopt;
  BlockArgument out = body->getArguments().back();
  auto add = yield->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || (add.getLhs() == out) == (add.getRhs() == out))
    return std::nullopt;
  Term term;
  if (!collectTerm(add.getLhs() == out ? add.getRhs() : add.getLhs(), term) ||
      term.factors.size() != 2 || term.conditions.size() != 1 ||
      llvm::is_contained(term.factors, out) ||
      term.factors[0] == term.factors[1])
    return std::nullopt;

  // The condition: group == linalg.index g.
  auto cmp = term.conditions[0].getDefiningOp<arith::CmpIOp>();
  if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::eq)
    return std::nullopt;
  Value lhs = throughIndexCasts(cmp.getLhs());
  Value rhs = throughIndexCasts(cmp.getRhs());
  if (lhs.getDefiningOp<linalg::IndexOp>())
    std::swap(lhs, rhs);
  auto index = rhs.getDefiningOp<linalg::IndexOp>();
  auto groupArg = dyn_cast<BlockArgument>(lhs);
  if (!index || !groupArg || groupArg.getOwner() != body || groupArg == out ||
      !isa<IntegerType>(groupArg.getType()))
    return std::nullopt;

  GroupedProduct product;
  product.lhs = term.factors[0].getArgNumber();
  product.rhs = term.factors[1].getArgNumber();
  product.group = groupArg.getArgNumber();
  product.groupLoop = index.getDim();
  // The group index is the row's: read through one loop, not the groups'.
  AffineMap groupMap =
      op.getMatchingIndexingMap(op.getDpsInputOperand(product.group));
  if (groupMap.getNumResults() != 1)
    return std::nullopt;
  auto rowLoop = dyn_cast<AffineDimExpr>(groupMap.getResult(0));
  if (!rowLoop || rowLoop.getPosition() == product.groupLoop)
    return std::nullopt;
  for (BlockArgument factor : term.factors)
    if (factor.getArgNumber() >= op.getNumDpsInputs() ||
        !isa<FloatType>(factor.getType()))
      return std::nullopt;
  return product;
}

/// The loops `map`'s results name, or nothing if one is not a plain loop.
static std::optional<SmallVector<unsigned>> loopsOf(AffineMap map) {
  SmallVector<unsigned> loops;
  for (AffineExpr expr : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (!dim)
      return std::nullopt;
    loops.push_back(dim.getPosition());
  }
  return loops;
}

std::optional<zb::GroupedLayout> zb::matchGroupedLayout(linalg::LinalgOp op) {
  if (op.getNumLoops() != 4)
    return std::nullopt;
  std::optional<GroupedProduct> product = matchGroupedProduct(op);
  if (!product)
    return std::nullopt;
  auto loops = [&](OpOperand *operand) {
    return loopsOf(op.getMatchingIndexingMap(operand));
  };
  unsigned a = product->lhs, b = product->rhs;
  std::optional<SmallVector<unsigned>> la = loops(op.getDpsInputOperand(a));
  std::optional<SmallVector<unsigned>> lb = loops(op.getDpsInputOperand(b));
  std::optional<SmallVector<unsigned>> lc = loops(op.getDpsInitOperand(0));
  std::optional<SmallVector<unsigned>> lg =
      loops(op.getDpsInputOperand(product->group));
  if (!la || !lb || !lc || !lg)
    return std::nullopt;
  unsigned e = product->groupLoop, r = (*lg)[0];
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  auto parallel = [&](unsigned loop) {
    return iterators[loop] == utils::IteratorType::parallel;
  };

  GroupedLayout layout;
  layout.product = *product;
  layout.rowLoop = r;
  unsigned first, second;
  if (lc->size() == 2) {
    // Rows: C (r, j); A (r, p); B (e, p, j) or (e, j, p).
    if (lb->size() == 2) {
      std::swap(a, b);
      std::swap(la, lb);
    }
    if (la->size() != 2 || lb->size() != 3 || (*lc)[0] != r || (*la)[0] != r ||
        (*lb)[0] != e)
      return std::nullopt;
    unsigned j = (*lc)[1], p = (*la)[1];
    if ((*lb)[1] == j && (*lb)[2] == p)
      layout.transB = true;
    else if ((*lb)[1] != p || (*lb)[2] != j)
      return std::nullopt;
    if (!parallel(r) || !parallel(j) || parallel(e) || parallel(p))
      return std::nullopt;
    layout.kind = GroupedLayout::Rows;
    first = j;
    second = p;
  } else if (lc->size() == 3) {
    // Reduce: C (e, i, j); A (r, i); B (r, j).
    if (la->size() != 2 || lb->size() != 2 || (*lc)[0] != e || (*la)[0] != r ||
        (*lb)[0] != r)
      return std::nullopt;
    unsigned i = (*lc)[1], j = (*lc)[2];
    if ((*la)[1] == j && (*lb)[1] == i) {
      std::swap(a, b);
      std::swap(la, lb);
    }
    if ((*la)[1] != i || (*lb)[1] != j || !parallel(e) || !parallel(i) ||
        !parallel(j) || parallel(r))
      return std::nullopt;
    layout.kind = GroupedLayout::Reduce;
    first = i;
    second = j;
  } else {
    return std::nullopt;
  }
  if (llvm::SmallDenseSet<unsigned>({r, e, first, second}).size() != 4)
    return std::nullopt;
  layout.a = a;
  layout.b = b;
  layout.loop0 = first;
  layout.loop1 = second;
  return layout;
}
