//===- MarkTriangularProducts.cpp - Products a causal mask halves ---------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//
//
// "Above the diagonal" means, for a tensor of rank >= 2, the elements whose
// last index exceeds the one before it; for a linalg op, the iteration
// points where the loop indexing an operand's last dimension exceeds the one
// indexing its second last. Two facts are derived: what a value holds above
// its diagonal (zero, -inf), and whether a value's elements above its
// diagonal may change to any finite values without changing any result
// (nothing reads them, or what reads them multiplies them by zero or
// selects something else there).
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Passes.h"

#include "RegionStash.h"

#include "zb/Dialect/Pipe/PipeOps.h"
#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseMap.h"

namespace zb {
#define GEN_PASS_DEF_ZBMARKTRIANGULARPRODUCTS
#include "zb/Transforms/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {
/// What a value holds above its diagonal.
enum class Upper { Unknown, Zero, NegInf };

/// A value of a linalg body at the iteration points above the diagonal.
/// `Any` values may depend on the operand under question (`tainted`); the
/// other kinds are the same whatever it holds.
struct Abstract {
  /// Row and Col: the loop indices of the row and the column (above the
  /// diagonal Col > Row).
  enum Kind { Any, Zero, NegInf, Positive, True, False, Row, Col } kind = Any;
  bool tainted = false;
  /// For Any: finite. The model's values are taken to be finite except
  /// where -inf is known to flow (a mask's); a value under question is
  /// replaced by finite ones, and stays finite through arithmetic that
  /// keeps finite values finite (not through a division, a logarithm, ...).
  bool finite = true;

  static Abstract any(bool tainted, bool finite = true) {
    return {Any, tainted, finite};
  }
  static Abstract of(Kind kind) { return {kind, false, kind != NegInf}; }
  bool isFinite() const { return kind != NegInf && (kind != Any || finite); }
};

/// The two loop dimensions an operand's last two dimensions are indexed by
/// under `map`, or none when they are not plain loop dimensions.
std::optional<std::pair<unsigned, unsigned>> lastTwoDims(AffineMap map) {
  if (map.getNumResults() < 2)
    return std::nullopt;
  auto row = dyn_cast<AffineDimExpr>(map.getResult(map.getNumResults() - 2));
  auto col = dyn_cast<AffineDimExpr>(map.getResult(map.getNumResults() - 1));
  if (!row || !col || row.getPosition() == col.getPosition())
    return std::nullopt;
  return std::make_pair(row.getPosition(), col.getPosition());
}

/// Whether a reshape keeps its higher-rank side's last two dimensions as
/// they are (each its own reassociation group): above-diagonal elements
/// stay above the diagonal.
bool keepsLastTwo(ArrayRef<ReassociationIndices> groups) {
  return groups.size() >= 2 && groups[groups.size() - 1].size() == 1 &&
         groups[groups.size() - 2].size() == 1;
}

/// The source of an op whose result has the source's elements above the
/// diagonal there too: a reshape that keeps the last two dimensions, a
/// stage marker (an identity). Null for others.
Value sourceKeepingDiagonal(Operation *op) {
  if (auto cut = dyn_cast_or_null<zb::pipe::CutOp>(op))
    return cut.getOperand();
  if (auto expand = dyn_cast_or_null<tensor::ExpandShapeOp>(op))
    return keepsLastTwo(expand.getReassociationIndices()) ? expand.getSrc()
                                                          : Value();
  if (auto collapse = dyn_cast_or_null<tensor::CollapseShapeOp>(op))
    return keepsLastTwo(collapse.getReassociationIndices()) ? collapse.getSrc()
                                                            : Value();
  return {};
}

/// What `mask`, a constant i1 tensor of rank >= 2, holds above its
/// diagonal: True or False when that is uniform, else Any.
Abstract maskAbove(Value mask) {
  DenseElementsAttr values;
  auto constant = mask.getDefiningOp<arith::ConstantOp>();
  if (!constant ||
      !(values = dyn_cast<DenseElementsAttr>(constant.getValue())) ||
      !values.getElementType().isInteger(1))
    return Abstract::any(false);
  auto type = cast<ShapedType>(values.getType());
  if (type.getRank() < 2)
    return Abstract::any(false);
  if (values.isSplat())
    return Abstract::of(values.getSplatValue<bool>() ? Abstract::True
                                                     : Abstract::False);
  int64_t rows = type.getDimSize(type.getRank() - 2);
  int64_t cols = type.getDimSize(type.getRank() - 1);
  std::optional<bool> above;
  int64_t index = 0;
  for (bool value : values.getValues<bool>()) {
    int64_t i = (index / cols) % rows, j = index % cols;
    ++index;
    if (j <= i)
      continue;
    if (above && *above != value)
      return Abstract::any(false);
    above = value;
  }
  if (!above)
    return Abstract::any(false);
  return Abstract::of(*above ? Abstract::True : Abstract::False);
}

/// What `op` computes from `operands` above the diagonal.
Abstract evaluate(Operation *op, ArrayRef<Abstract> operands) {
  bool tainted = llvm::any_of(operands, [](const Abstract &a) {
    return a.kind == Abstract::Any && a.tainted;
  });
  auto is = [&](unsigned i, Abstract::Kind kind) {
    return operands[i].kind == kind;
  };
  bool allFinite =
      llvm::all_of(operands, [](const Abstract &a) { return a.isFinite(); });
  // Anything else, finite when its operands are: for a value under question
  // only through arithmetic that keeps finite values finite.
  bool keepsFinite =
      isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::NegFOp,
          arith::SelectOp, arith::MaximumFOp, arith::MinimumFOp,
          arith::MaxNumFOp, arith::MinNumFOp>(op);
  Abstract unknown =
      Abstract::any(tainted, allFinite && (keepsFinite || !tainted));
  if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
    auto value = dyn_cast<FloatAttr>(constant.getValue());
    if (!value)
      return Abstract::any(false);
    APFloat v = value.getValue();
    if (v.isZero())
      return Abstract::of(Abstract::Zero);
    if (v.isInfinity() && v.isNegative())
      return Abstract::of(Abstract::NegInf);
    if (v.isFinite() && !v.isNegative())
      return Abstract::of(Abstract::Positive);
    return Abstract::any(false, v.isFinite());
  }
  if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
    // Col > Row: how the predicate compares them, with the column first.
    bool colFirst = is(0, Abstract::Col) && is(1, Abstract::Row);
    if (!colFirst && !(is(0, Abstract::Row) && is(1, Abstract::Col)))
      return unknown;
    bool holds = false;
    switch (cmp.getPredicate()) {
    case arith::CmpIPredicate::eq:
      holds = false;
      break;
    case arith::CmpIPredicate::ne:
      holds = true;
      break;
    case arith::CmpIPredicate::sgt:
    case arith::CmpIPredicate::ugt:
    case arith::CmpIPredicate::sge:
    case arith::CmpIPredicate::uge:
      holds = colFirst;
      break;
    case arith::CmpIPredicate::slt:
    case arith::CmpIPredicate::ult:
    case arith::CmpIPredicate::sle:
    case arith::CmpIPredicate::ule:
      holds = !colFirst;
      break;
    }
    return Abstract::of(holds ? Abstract::True : Abstract::False);
  }
  if (isa<arith::SelectOp>(op)) {
    if (is(0, Abstract::True))
      return operands[1];
    if (is(0, Abstract::False))
      return operands[2];
    if (operands[1].kind == operands[2].kind &&
        operands[1].kind != Abstract::Any)
      return operands[1];
    return unknown;
  }
  if (isa<arith::MulFOp>(op)) {
    // Zero times a finite value (a -inf would make a NaN).
    if ((is(0, Abstract::Zero) && operands[1].isFinite()) ||
        (is(1, Abstract::Zero) && operands[0].isFinite()))
      return Abstract::of(Abstract::Zero);
    if ((is(0, Abstract::NegInf) && is(1, Abstract::Positive)) ||
        (is(1, Abstract::NegInf) && is(0, Abstract::Positive)))
      return Abstract::of(Abstract::NegInf);
    if (is(0, Abstract::Positive) && is(1, Abstract::Positive))
      return Abstract::of(Abstract::Positive);
    return unknown;
  }
  if (isa<arith::AddFOp, arith::SubFOp>(op)) {
    if (is(0, Abstract::Zero) && is(1, Abstract::Zero))
      return Abstract::of(Abstract::Zero);
    return unknown;
  }
  if (isa<arith::DivFOp>(op)) {
    if (is(0, Abstract::Zero) && is(1, Abstract::Positive))
      return Abstract::of(Abstract::Zero);
    return unknown;
  }
  if (isa<arith::NegFOp>(op) && is(0, Abstract::Zero))
    return Abstract::of(Abstract::Zero);
  if (isa<math::ExpOp>(op) && is(0, Abstract::NegInf))
    return Abstract::of(Abstract::Zero);
  return unknown;
}

/// The facts, memoised, over one module.
class TriangularFacts {
public:
  /// What `value` holds above its diagonal.
  Upper upper(Value value);

  /// Whether `value`'s elements above its diagonal may change to any finite
  /// values without changing any result.
  bool upperIsDead(Value value);

  /// The `zb.skip_terms` pair for `op`, a matrix product, or none.
  std::optional<std::pair<unsigned, unsigned>>
  skippableTerms(linalg::LinalgOp op);

private:
  /// What `generic` yields above the diagonal of the iteration points
  /// indexed by (`row`, `col`), with input `tainted` (if any) as an unknown
  /// value under question; none if some input or result cannot be read
  /// that way.
  std::optional<SmallVector<Abstract>> evaluateBody(linalg::GenericOp generic,
                                                    unsigned row, unsigned col,
                                                    OpOperand *tainted);

  llvm::DenseMap<Value, Upper> uppers;
  llvm::DenseMap<Value, bool> dead;
};
} // namespace

/// The stage that takes `value` (a stage's result) as its input, and which
/// input, or none when something else uses it too.
static std::optional<std::pair<zb::pipe::StageOp, unsigned>>
consumingStage(Value value) {
  if (!value.hasOneUse())
    return std::nullopt;
  OpOperand &use = *value.use_begin();
  auto next = dyn_cast<zb::pipe::StageOp>(use.getOwner());
  if (!next || use.getOperandNumber() >= next.getInputs().size())
    return std::nullopt;
  return std::make_pair(next, use.getOperandNumber());
}

/// The region of `stage` that takes the forward's stash.
static Region &backwardOf(zb::pipe::StageOp stage) {
  return stage.isSplit() ? stage.getBackwardInput() : stage.getBackward();
}

/// The terminator of a stage's (non-empty) region.
static zb::pipe::YieldOp yieldOf(Region &region) {
  return cast<zb::pipe::YieldOp>(region.front().getTerminator());
}

/// What a value of a `pipe.stage` region stands for: a forward's input is
/// the previous stage's forward result, a backward's stash argument what
/// the region before it stashed, a backward's gradient of a result what the
/// backward of the stage taking that result yields. Other values stand for
/// themselves.
static Value producerOf(Value value) {
  while (auto arg = dyn_cast<BlockArgument>(value)) {
    Region *region = arg.getOwner()->getParent();
    auto stage = dyn_cast_or_null<zb::pipe::StageOp>(region->getParentOp());
    if (!stage)
      return value;
    unsigned index = arg.getArgNumber();
    if (region == &stage.getForward()) {
      if (index >= stage.getInputs().size())
        return value;
      Value outer = stage.getInputs()[index];
      auto previous = outer.getDefiningOp<zb::pipe::StageOp>();
      if (!previous)
        return value;
      value = previous.getForwardYield()
                  .getValues()[cast<OpResult>(outer).getResultNumber()];
      continue;
    }
    OperandRange stash = stage.getForwardYield().getStash();
    if (region == &stage.getBackwardWeight())
      stash = yieldOf(stage.getBackwardInput()).getStash();
    if (index < stash.size()) {
      value = stash[index];
      continue;
    }
    // A backward's gradient of the stage's result: what the backward of the
    // stage taking that result yields for that input.
    unsigned result = index - stash.size();
    if (region == &stage.getBackwardWeight() ||
        result >= stage->getNumResults())
      return value;
    auto next = consumingStage(stage->getResult(result));
    if (!next || backwardOf(next->first).empty())
      return value;
    value = yieldOf(backwardOf(next->first)).getValues()[next->second];
  }
  return value;
}

/// The block argument an operand `use` of a `pipe.yield` becomes: a
/// stash's in the region after, a forward result's in the forward of the
/// stage that takes it; none for other operands (gradients, results used
/// otherwise).
static std::optional<BlockArgument> argumentFor(OpOperand &use) {
  auto yield = cast<zb::pipe::YieldOp>(use.getOwner());
  auto stage = cast<zb::pipe::StageOp>(yield->getParentOp());
  Region *from = yield->getParentRegion();
  unsigned first = yield.getValues().size();
  if (use.getOperandNumber() < first) {
    if (from != &stage.getForward())
      return std::nullopt;
    auto next = consumingStage(stage->getResult(use.getOperandNumber()));
    if (!next)
      return std::nullopt;
    return next->first.getForward().getArgument(next->second);
  }
  unsigned index = use.getOperandNumber() - first;
  Region *to = nullptr;
  if (from == &stage.getForward())
    to = &backwardOf(stage);
  else if (from == &stage.getBackwardInput())
    to = &stage.getBackwardWeight();
  if (!to || to->empty() || index >= to->getNumArguments())
    return std::nullopt;
  return to->getArgument(index);
}

Upper TriangularFacts::upper(Value value) {
  value = producerOf(value);
  if (Value source = sourceKeepingDiagonal(value.getDefiningOp()))
    return upper(source);
  auto found = uppers.find(value);
  if (found != uppers.end())
    return found->second;
  uppers[value] = Upper::Unknown; // until known; breaks cycles
  Upper result = Upper::Unknown;
  Operation *op = value.getDefiningOp();
  if (auto softmax = dyn_cast_or_null<linalg::SoftmaxOp>(op)) {
    // exp(-inf - max) / sum: zero, given a finite entry in the row.
    if (int64_t(softmax.getDimension()) + 1 ==
            softmax.getInputOperandType().getRank() &&
        upper(softmax.getInput()) == Upper::NegInf)
      result = Upper::Zero;
  } else if (auto generic = dyn_cast_or_null<linalg::GenericOp>(op)) {
    unsigned number = cast<OpResult>(value).getResultNumber();
    AffineMap map = generic.getIndexingMapMatchingResult(cast<OpResult>(value));
    if (auto dims = lastTwoDims(map))
      if (auto yields =
              evaluateBody(generic, dims->first, dims->second, nullptr)) {
        Abstract::Kind kind = (*yields)[number].kind;
        result = kind == Abstract::Zero     ? Upper::Zero
                 : kind == Abstract::NegInf ? Upper::NegInf
                                            : Upper::Unknown;
      }
  }
  uppers[value] = result;
  return result;
}

std::optional<SmallVector<Abstract>>
TriangularFacts::evaluateBody(linalg::GenericOp generic, unsigned row,
                              unsigned col, OpOperand *tainted) {
  Block *body = generic.getBody();
  llvm::DenseMap<Value, Abstract> values;
  for (OpOperand *input : generic.getDpsInputOperands()) {
    Abstract known = Abstract::any(false);
    auto dims = lastTwoDims(generic.getMatchingIndexingMap(input));
    // The value under question (also where it is read twice).
    if (tainted && input->get() == tainted->get()) {
      known = Abstract::any(true);
    } else if (dims && dims->first == row && dims->second == col) {
      Value operand = input->get();
      Type element = getElementTypeOrSelf(operand.getType());
      if (element.isInteger(1)) {
        known = maskAbove(producerOf(operand));
      } else {
        Upper fact = upper(operand);
        if (fact == Upper::Zero)
          known = Abstract::of(Abstract::Zero);
        else if (fact == Upper::NegInf)
          known = Abstract::of(Abstract::NegInf);
      }
    }
    values[generic.getMatchingBlockArgument(input)] = known;
  }
  for (OpOperand &init : generic.getDpsInitsMutable())
    values[generic.getMatchingBlockArgument(&init)] = Abstract::any(false);
  auto lookup = [&](Value v) {
    auto found = values.find(v);
    if (found != values.end())
      return found->second;
    // A constant defined outside the body (hoisted by canonicalisation).
    if (auto constant = v.getDefiningOp<arith::ConstantOp>())
      return evaluate(constant, {});
    return Abstract::any(false);
  };
  for (Operation &op : body->without_terminator()) {
    if (op.getNumResults() != 1 || op.getNumRegions() != 0)
      return std::nullopt;
    if (auto index = dyn_cast<linalg::IndexOp>(op)) {
      uint64_t dim = index.getDim();
      values[index] = dim == row   ? Abstract::of(Abstract::Row)
                      : dim == col ? Abstract::of(Abstract::Col)
                                   : Abstract::any(false);
      continue;
    }
    SmallVector<Abstract> operands;
    for (Value operand : op.getOperands())
      operands.push_back(lookup(operand));
    values[op.getResult(0)] = evaluate(&op, operands);
  }
  SmallVector<Abstract> yields;
  for (Value yielded : body->getTerminator()->getOperands())
    yields.push_back(lookup(yielded));
  return yields;
}

bool TriangularFacts::upperIsDead(Value value) {
  auto found = dead.find(value);
  if (found != dead.end())
    return found->second;
  dead[value] = false; // until shown; a cycle proves nothing
  auto deadUse = [&](OpOperand &use) -> bool {
    Operation *user = use.getOwner();
    if (Value source = sourceKeepingDiagonal(user); source == use.get())
      return upperIsDead(user->getResult(0));
    if (isa<zb::pipe::YieldOp>(user)) {
      std::optional<BlockArgument> arg = argumentFor(use);
      return arg && upperIsDead(*arg);
    }
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!generic || !generic.isDpsInput(&use))
      return false;
    auto dims = lastTwoDims(generic.getMatchingIndexingMap(&use));
    if (!dims)
      return false;
    auto yields = evaluateBody(generic, dims->first, dims->second, &use);
    if (!yields)
      return false;
    for (auto [number, yielded] : llvm::enumerate(*yields)) {
      if (yielded.kind != Abstract::Any || !yielded.tainted)
        continue;
      // The result's elements above the diagonal depend on ours: fine if
      // they are those of its own diagonal and nothing needs them either.
      OpResult result = generic->getResult(number);
      if (lastTwoDims(generic.getIndexingMapMatchingResult(result)) != dims ||
          !upperIsDead(result))
        return false;
    }
    return true;
  };
  bool result = llvm::all_of(value.getUses(), deadUse);
  dead[value] = result;
  return result;
}

std::optional<std::pair<unsigned, unsigned>>
TriangularFacts::skippableTerms(linalg::LinalgOp op) {
  // f32 products only: the runtime's f32 gemm is what leaves terms out.
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op->getNumResults() != 1 || !linalg::isaContractionOpInterface(op) ||
      !getElementTypeOrSelf(op->getResult(0).getType()).isF32())
    return std::nullopt;
  // A matrix product (batched or not): one loop each for rows, columns and
  // the sum.
  FailureOr<linalg::ContractionDimensions> loops =
      linalg::inferContractionDims(op);
  if (failed(loops) || loops->m.size() != 1 || loops->n.size() != 1 ||
      loops->k.size() != 1)
    return std::nullopt;
  // A term at a point above an operand's diagonal vanishes when the operand
  // is zero there.
  for (OpOperand *input : op.getDpsInputOperands()) {
    auto dims = lastTwoDims(op.getMatchingIndexingMap(input));
    if (dims && upper(input->get()) == Upper::Zero)
      return dims;
  }
  // It lands above the result's diagonal, where nothing needs it.
  OpResult result = op->getResult(0);
  auto dims = lastTwoDims(op.getIndexingMapMatchingResult(result));
  if (dims && upperIsDead(result))
    return dims;
  return std::nullopt;
}

namespace {
struct MarkTriangularProductsPass
    : zb::impl::ZBMarkTriangularProductsBase<MarkTriangularProductsPass> {
  void runOnOperation() override {
    // Products as matrix products: without the operands their bodies do not
    // read (a plain model's gradient has them until --zb-lower-to-cpu; a
    // stage's backward is simplified by --zb-autodiff already), their
    // bodies folded.
    RewritePatternSet patterns(&getContext());
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    (void)applyPatternsGreedily(getOperation(), std::move(patterns), config);

    TriangularFacts facts;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (!op.hasPureTensorSemantics())
        return;
      if (auto dims = facts.skippableTerms(op))
        op->setAttr(
            zb::ZBDialect::kSkipTermsAttrName,
            DenseI64ArrayAttr::get(op->getContext(), {int64_t(dims->first),
                                                      int64_t(dims->second)}));
    });
    // The scheduler plans with the FLOPs the stages now do (every costed
    // stage, all of them measured after the same clean-up).
    getOperation()->walk([](zb::pipe::StageOp stage) {
      if (stage.getCostFAttr())
        zb::recordStageCosts(stage);
    });
  }
};
} // namespace
