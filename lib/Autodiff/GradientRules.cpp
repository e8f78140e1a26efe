//===- GradientRules.cpp - Reverse-mode rules of upstream ops -------------===//
//
// Part of ZeroBubble MLIR.
//
// Every linalg structured op is differentiated through its linalg.generic
// form: for an input x read through map m, the adjoint is a new generic over
// the same iteration space that accumulates dOut * d(body)/dx into a tensor
// indexed by m (dimensions m drops become reductions). Contractions thereby
// become contractions again (dA = dC * B^T is a generic with a mul-add
// body), which the CPU pipeline turns into gemm calls. An input broadcast
// into a sum with one read through every loop (the bias of f(x + b)) takes
// that one's adjoint summed over the broadcast loops instead of the body's
// derivative again. Tensors read inside a body through tensor.extract
// (embedding lookups) get a scatter-add loop.
//
//===----------------------------------------------------------------------===//

#include "zb/Autodiff/Autodiff.h"
#include "zb/Autodiff/GradientOpInterface.h"
#include "zb/Dialect/Pipe/PipeDialect.h"
#include "zb/Dialect/Pipe/PipeOps.h"

#include "ScalarTangent.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"

#include <optional>

using namespace mlir;
using namespace zb::autodiff;

using IsActiveFn = llvm::function_ref<bool(Value)>;
using AddAdjointFn = llvm::function_ref<void(Value, Value)>;

#include "zb/Autodiff/GradientOpInterface.cpp.inc"

//===----------------------------------------------------------------------===//
// linalg.generic
//===----------------------------------------------------------------------===//

namespace {
/// How a generic body combines its result with the accumulator.
enum class Combiner {
  /// The body ignores the accumulator: out = e(ins).
  None,
  /// out = acc + e(ins), summed over the reduction dimensions.
  Sum,
  /// out = max(acc, e(ins)) or min: the extremal elements share dOut
  /// evenly (as PyTorch's amax and amin; the frontend's max pools and
  /// max along a dim, which give one element all of it, carry their
  /// gradients through lookups, not through this rule).
  Extremum,
};

/// The analysed body of a single-output generic.
struct BodyInfo {
  Combiner combiner;
  /// The per-iteration value combined into the output.
  Value element;
  /// The op combining it with the accumulator (null for None).
  Operation *combineOp = nullptr;
};
} // namespace

static FailureOr<BodyInfo> analyzeBody(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  Value yielded = body.getTerminator()->getOperand(0);
  BlockArgument acc = body.getArgument(op.getNumDpsInputs());
  bool hasReduction = op.getNumReductionLoops() > 0;
  if (acc.use_empty()) {
    if (hasReduction)
      return op.emitError("cannot differentiate a reduction whose body "
                          "ignores the accumulator");
    return BodyInfo{Combiner::None, yielded};
  }
  Operation *combine = yielded.getDefiningOp();
  if (combine && acc.hasOneUse() && combine->getNumOperands() == 2 &&
      llvm::is_contained(combine->getOperands(), Value(acc))) {
    Value element = combine->getOperand(0) == acc ? combine->getOperand(1)
                                                  : combine->getOperand(0);
    if (isa<arith::AddFOp>(combine))
      return BodyInfo{Combiner::Sum, element, combine};
    if (isa<arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
            arith::MinNumFOp>(combine))
      return BodyInfo{Combiner::Extremum, element, combine};
  }
  return op.emitError("cannot differentiate this linalg.generic: its body "
                      "must ignore the accumulator, or combine it once with "
                      "addf (sum) or maximumf/minimumf");
}

/// Float `value` converted to float type `type`: an adjoint flows back
/// through a precision cast (extf, truncf) the other way.
static Value castFloat(OpBuilder &b, Location loc, Value value, Type type) {
  auto from = cast<FloatType>(value.getType()), to = cast<FloatType>(type);
  if (from == to)
    return value;
  if (from.getWidth() == to.getWidth()) // bf16 <-> f16: through f32.
    value = arith::ExtFOp::create(b, loc, b.getF32Type(), value);
  if (cast<FloatType>(value.getType()).getWidth() < to.getWidth())
    return arith::ExtFOp::create(b, loc, to, value);
  return arith::TruncFOp::create(b, loc, to, value);
}

/// The tangent of the body's element with respect to `seed`, a body
/// argument or captured read of type `type`, seeded with `dOut` where the
/// types agree (then it is the adjoint contribution itself; see
/// ScalarTangent), else with 1 (the body computes in another precision: the
/// adjoint is not rounded to the input's type before the chain).
static FailureOr<std::pair<Value, bool>> elementTangent(OpBuilder &nb,
                                                        Location nloc,
                                                        Value seed, Value dOut,
                                                        Value element) {
  bool seeded = seed.getType() == dOut.getType();
  ScalarTangent tangents(nb, nloc, seed, nb.getInsertionBlock()->getParent(),
                         seeded ? dOut : Value());
  FailureOr<Value> tangent = tangents.get(element);
  if (failed(tangent))
    return failure();
  return std::make_pair(*tangent, seeded);
}

/// The scalar adjoint contribution dOut * tangent (the tangent itself when it
/// was `seeded` with dOut), masked to the extremal elements for max/min
/// reductions (dOut then each one's share), in the differentiated input's
/// element type `type` (the body may compute in another precision).
static Value contribution(OpBuilder &b, Location loc, const BodyInfo &info,
                          Value tangent, bool seeded, Value dOut, Value element,
                          Value result, Type type) {
  Value c = seeded ? tangent : arith::MulFOp::create(b, loc, tangent, dOut);
  if (info.combiner == Combiner::Extremum) {
    Value isExtremum = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                             element, result);
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(c.getType()));
    c = arith::SelectOp::create(b, loc, isExtremum, c, zero);
  }
  return castFloat(b, loc, c, type);
}

/// The body's element (BodyInfo::element) recomputed at `nb` from the body's
/// inputs `inputs`: a copy of the body's ops but its combining op.
static Value cloneElement(OpBuilder &nb, Block &body, const BodyInfo &info,
                          ValueRange inputs, IRMapping &mapping) {
  for (auto [arg, input] : llvm::zip(body.getArguments(), inputs))
    mapping.map(arg, input);
  for (Operation &bodyOp : body.without_terminator())
    if (&bodyOp != info.combineOp)
      nb.clone(bodyOp, mapping);
  return mapping.lookupOrDefault(info.element);
}

/// dOut / (the number of elements equal to the result) for each element of
/// the output of `op`, a max/min reduction (Combiner::Extremum): what each
/// extremal element's adjoint takes, so that ties share dOut instead of each
/// taking all of it (the reduction's derivative along the direction that
/// moves every tied element alike). An output no element equals (an
/// initial value beyond every element, a NaN) has a count of 0; its
/// contributions are masked out all the same.
static Value extremumShare(OpBuilder &b, linalg::GenericOp op,
                           const BodyInfo &info, Value result, Value dOut) {
  Location loc = op.getLoc();
  Block &body = op.getRegion().front();
  unsigned numInputs = op.getNumDpsInputs();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  AffineMap outMap = maps[numInputs];
  auto outType = cast<RankedTensorType>(result.getType());
  Type elementType = outType.getElementType();

  // ties: over op's loops, 1 for each element equal to its output's result.
  SmallVector<Value> ins;
  for (unsigned j = 0; j < numInputs; ++j)
    ins.push_back(op.getDpsInputOperand(j)->get());
  ins.push_back(result);
  SmallVector<AffineMap> tieMaps(maps.begin(), maps.begin() + numInputs);
  tieMaps.push_back(outMap);
  tieMaps.push_back(outMap);
  auto ties = linalg::GenericOp::create(
      b, loc, TypeRange{outType}, ins, ValueRange{buildZeros(b, loc, outType)},
      tieMaps, op.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        IRMapping mapping;
        Value element =
            cloneElement(nb, body, info, args.take_front(numInputs), mapping);
        Value tied = arith::CmpFOp::create(nb, nloc, arith::CmpFPredicate::OEQ,
                                           element, args[numInputs]);
        Value one =
            arith::ConstantOp::create(nb, nloc, nb.getOneAttr(elementType));
        Value zero =
            arith::ConstantOp::create(nb, nloc, nb.getZeroAttr(elementType));
        Value count = arith::SelectOp::create(nb, nloc, tied, one, zero);
        linalg::YieldOp::create(
            nb, nloc,
            Value(arith::AddFOp::create(nb, nloc, args.back(), count)));
      });

  AffineMap identity = b.getMultiDimIdentityMap(outType.getRank());
  auto share = linalg::GenericOp::create(
      b, loc, TypeRange{outType}, ValueRange{dOut, ties.getResult(0)},
      ValueRange{
          tensor::EmptyOp::create(b, loc, outType.getShape(), elementType)},
      ArrayRef<AffineMap>{identity, identity, identity},
      SmallVector<utils::IteratorType>(outType.getRank(),
                                       utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(
            nb, nloc, Value(arith::DivFOp::create(nb, nloc, args[0], args[1])));
      });
  return share.getResult(0);
}

/// Iterators of a generic that accumulates an input's adjoint over its
/// op's loops: parallel along the loops `inputMap` reads, reduction along
/// the rest.
static SmallVector<utils::IteratorType> adjointIterators(AffineMap inputMap,
                                                         unsigned numLoops) {
  SmallVector<utils::IteratorType> iterators;
  for (unsigned d = 0; d < numLoops; ++d)
    iterators.push_back(inputMap.isFunctionOfDim(d)
                            ? utils::IteratorType::parallel
                            : utils::IteratorType::reduction);
  return iterators;
}

/// Adjoint of input `k` of `op`: a generic over op's iteration space that
/// accumulates into a tensor indexed like the input. Returns null when the
/// input does not influence the output.
static FailureOr<Value> buildInputAdjoint(OpBuilder &b, linalg::GenericOp op,
                                          const BodyInfo &info, unsigned k,
                                          Value result, Value dOut) {
  Location loc = op.getLoc();
  Block &body = op.getRegion().front();
  unsigned numInputs = op.getNumDpsInputs();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  AffineMap outMap = maps[numInputs];
  Value input = op.getDpsInputOperand(k)->get();
  auto inputType = cast<RankedTensorType>(input.getType());
  if (!maps[k].isProjectedPermutation())
    return op.emitError("cannot differentiate with respect to input #")
           << k << ": its indexing map " << AffineMapAttr::get(maps[k])
           << " is not a projected permutation";

  // ins: dOut, the op's inputs, [the op's result]; outs: the adjoint.
  SmallVector<Value> ins = {dOut};
  SmallVector<AffineMap> newMaps = {outMap};
  for (unsigned j = 0; j < numInputs; ++j) {
    ins.push_back(op.getDpsInputOperand(j)->get());
    newMaps.push_back(maps[j]);
  }
  if (info.combiner == Combiner::Extremum) {
    ins.push_back(result);
    newMaps.push_back(outMap);
  }
  newMaps.push_back(maps[k]);
  SmallVector<utils::IteratorType> iterators =
      adjointIterators(maps[k], op.getNumLoops());

  // Without reduction dimensions every element is written once: no
  // accumulator is read, so the init can be uninitialised.
  bool accumulates = llvm::is_contained(iterators,
                                        utils::IteratorType::reduction);
  Value init = accumulates ? buildZeros(b, loc, inputType)
                           : Value(tensor::EmptyOp::create(
                                 b, loc, inputType.getShape(),
                                 inputType.getElementType()));
  bool failedRule = false, isZero = false;
  auto adjoint = linalg::GenericOp::create(
      b, loc, TypeRange{inputType}, ins, ValueRange{init}, newMaps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        IRMapping mapping;
        Value element =
            cloneElement(nb, body, info, args.slice(1, numInputs), mapping);
        Value acc = args.back();
        auto tangent = elementTangent(nb, nloc, args[1 + k], args[0], element);
        failedRule = failed(tangent);
        isZero = succeeded(tangent) && !tangent->first;
        if (failedRule || isZero) {
          linalg::YieldOp::create(nb, nloc, acc);
          return;
        }
        Value resultScalar =
            info.combiner == Combiner::Extremum ? args[1 + numInputs] : Value();
        Value c = contribution(nb, nloc, info, tangent->first, tangent->second,
                               args[0], element, resultScalar,
                               inputType.getElementType());
        linalg::YieldOp::create(
            nb, nloc,
            accumulates ? Value(arith::AddFOp::create(nb, nloc, acc, c)) : c);
      });
  if (failedRule || isZero) {
    adjoint->erase();
    if (failedRule)
      return failure();
    return Value();
  }
  return adjoint.getResult(0);
}

/// Whether the body's element depends on inputs `j` and `k` only through
/// their sum: each block argument has one use, the same arith.addf (a bias
/// added before an activation, f(x + b)). Their tangents are then one
/// expression, and each iteration contributes the same term to both
/// adjoints.
static bool sharesSumTangent(linalg::GenericOp op, unsigned j, unsigned k) {
  Block &body = op.getRegion().front();
  BlockArgument x = body.getArgument(j), y = body.getArgument(k);
  if (j == k || !x.hasOneUse() || !y.hasOneUse())
    return false;
  Operation *user = *x.getUsers().begin();
  return isa<arith::AddFOp>(user) && user == *y.getUsers().begin();
}

/// Adjoint of input `k` from `adjointJ`, input `j`'s (sharesSumTangent, j
/// read through all the loops; `maps` are op's indexing maps): adjointJ summed
/// over the loops k's map leaves out, term by term in buildInputAdjoint's
/// order, without computing the body's derivative a second time. (The bias of
/// f(x + b) then takes its gradient from x's, which the input gradient computes
/// anyway, instead of from the forward's values again.)
static Value sumAdjoint(OpBuilder &b, linalg::GenericOp op,
                        ArrayRef<AffineMap> maps, unsigned j, unsigned k,
                        Value adjointJ) {
  Location loc = op.getLoc();
  auto inputType =
      cast<RankedTensorType>(op.getDpsInputOperand(k)->get().getType());
  auto sum = linalg::GenericOp::create(
      b, loc, TypeRange{inputType}, ValueRange{adjointJ},
      ValueRange{buildZeros(b, loc, inputType)},
      ArrayRef<AffineMap>{maps[j], maps[k]},
      adjointIterators(maps[k], op.getNumLoops()),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(
            nb, nloc, Value(arith::AddFOp::create(nb, nloc, args[1], args[0])));
      });
  return sum.getResult(0);
}

/// Adjoint of `table`, a tensor the body reads with tensor.extract (an
/// embedding lookup): a loop nest over the iteration space that adds each
/// contribution at the index the body read (scatter-add).
static FailureOr<Value> buildCapturedAdjoint(OpBuilder &b,
                                             linalg::GenericOp op,
                                             const BodyInfo &info, Value table,
                                             Value result, Value dOut) {
  Location loc = op.getLoc();
  Block &body = op.getRegion().front();
  SmallVector<tensor::ExtractOp> reads;
  for (OpOperand &use : table.getUses()) {
    if (!op->isProperAncestor(use.getOwner()))
      continue;
    auto read = dyn_cast<tensor::ExtractOp>(use.getOwner());
    if (!read || read->getBlock() != &body)
      return use.getOwner()->emitError(
          "cannot differentiate this use of a tensor captured by a "
          "linalg.generic body (only tensor.extract in the body is "
          "supported)");
    reads.push_back(read);
  }
  unsigned numInputs = op.getNumDpsInputs();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  for (AffineMap map : maps)
    if (!map.isProjectedPermutation())
      return op.emitError("cannot differentiate a captured tensor through "
                          "the non-permutation indexing map ")
             << AffineMapAttr::get(map);

  SmallVector<Value> lbs, ubs, steps;
  for (int64_t range : op.getStaticLoopRanges()) {
    lbs.push_back(arith::ConstantIndexOp::create(b, loc, 0));
    ubs.push_back(arith::ConstantIndexOp::create(b, loc, range));
    steps.push_back(arith::ConstantIndexOp::create(b, loc, 1));
  }
  Value zeros = buildZeros(b, loc, cast<RankedTensorType>(table.getType()));
  bool failedRule = false;
  scf::LoopNest nest = scf::buildLoopNest(
      b, loc, lbs, ubs, steps, ValueRange{zeros},
      [&](OpBuilder &nb, Location nloc, ValueRange ivs,
          ValueRange iterArgs) -> scf::ValueVector {
        auto extractAt = [&](Value tensor, AffineMap map) -> Value {
          SmallVector<Value> indices;
          for (AffineExpr expr : map.getResults())
            indices.push_back(ivs[cast<AffineDimExpr>(expr).getPosition()]);
          return tensor::ExtractOp::create(nb, nloc, tensor, indices);
        };
        IRMapping mapping;
        for (unsigned j = 0; j < numInputs; ++j) {
          Value in = op.getDpsInputOperand(j)->get();
          mapping.map(body.getArgument(j), isa<RankedTensorType>(in.getType())
                                               ? extractAt(in, maps[j])
                                               : in);
        }
        Value dOutScalar = extractAt(dOut, maps[numInputs]);
        Value resultScalar = info.combiner == Combiner::Extremum
                                 ? extractAt(result, maps[numInputs])
                                 : Value();
        for (Operation &bodyOp : body.without_terminator()) {
          if (&bodyOp == info.combineOp)
            continue;
          if (auto index = dyn_cast<linalg::IndexOp>(bodyOp)) {
            mapping.map(index.getResult(), ivs[index.getDim()]);
            continue;
          }
          nb.clone(bodyOp, mapping);
        }
        Value acc = iterArgs[0];
        Value element = mapping.lookupOrDefault(info.element);
        for (tensor::ExtractOp read : reads) {
          auto tangent = elementTangent(
              nb, nloc, mapping.lookup(read.getResult()), dOutScalar, element);
          if (failed(tangent)) {
            failedRule = true;
            break;
          }
          if (!tangent->first)
            continue;
          Value c = contribution(
              nb, nloc, info, tangent->first, tangent->second, dOutScalar,
              element, resultScalar,
              cast<RankedTensorType>(table.getType()).getElementType());
          SmallVector<Value> indices;
          for (Value index : read.getIndices())
            indices.push_back(mapping.lookupOrDefault(index));
          Value old = tensor::ExtractOp::create(nb, nloc, acc, indices);
          Value sum = arith::AddFOp::create(nb, nloc, old, c);
          acc = tensor::InsertOp::create(nb, nloc, sum, acc, indices);
        }
        return {acc};
      });
  if (failedRule)
    return failure();
  return nest.results.front();
}

static LogicalResult buildGenericAdjoints(OpBuilder &b, linalg::GenericOp op,
                                          Value result, Value dOut,
                                          IsActiveFn isActive,
                                          AddAdjointFn addAdjoint) {
  if (op.getNumDpsInits() != 1 || !op.hasPureTensorSemantics())
    return op.emitError("cannot differentiate a linalg op with ")
           << op.getNumDpsInits()
           << " outputs; only single-output ops on tensors are supported";
  FailureOr<BodyInfo> info = analyzeBody(op);
  if (failed(info))
    return failure();
  // What each extremal element takes of dOut, built when first needed.
  Value share;
  auto dOutShare = [&] {
    if (info->combiner != Combiner::Extremum)
      return dOut;
    if (!share)
      share = extremumShare(b, op, *info, result, dOut);
    return share;
  };

  // The inputs read through all the loops first, so that an input
  // broadcast over some of them can sum one of their adjoints
  // (sharesSumTangent); the adjoints are added in the inputs' order.
  unsigned numInputs = op.getNumDpsInputs();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  SmallVector<std::optional<Value>> adjoints(numInputs);
  auto readsAllLoops = [&](unsigned k) { return maps[k].isPermutation(); };
  for (bool allLoops : {true, false}) {
    for (unsigned k = 0; k < numInputs; ++k) {
      Value input = op.getDpsInputOperand(k)->get();
      if (readsAllLoops(k) != allLoops ||
          !isa<RankedTensorType>(input.getType()) || !isActive(input))
        continue;
      auto shared = llvm::find_if(llvm::seq(numInputs), [&](unsigned j) {
        return !allLoops && adjoints[j] && readsAllLoops(j) &&
               maps[k].isProjectedPermutation() && sharesSumTangent(op, j, k);
      });
      if (shared != llvm::seq(numInputs).end()) {
        Value from = *adjoints[*shared];
        adjoints[k] =
            from ? sumAdjoint(b, op, maps, *shared, k, from) : Value();
        continue;
      }
      FailureOr<Value> adjoint =
          buildInputAdjoint(b, op, *info, k, result, dOutShare());
      if (failed(adjoint))
        return failure();
      adjoints[k] = *adjoint;
    }
  }
  for (unsigned k = 0; k < numInputs; ++k)
    if (adjoints[k] && *adjoints[k])
      addAdjoint(op.getDpsInputOperand(k)->get(), *adjoints[k]);

  Value init = op.getDpsInitOperand(0)->get();
  if (isActive(init)) {
    if (info->combiner == Combiner::Sum)
      addAdjoint(init, dOut);
    else if (info->combiner == Combiner::Extremum)
      return op.emitError("cannot differentiate a max/min reduction with "
                          "respect to its initial value");
  }

  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(op.getRegion(), captured);
  for (Value value : captured) {
    if (!isa<RankedTensorType>(value.getType()) || !isActive(value))
      continue;
    FailureOr<Value> adjoint =
        buildCapturedAdjoint(b, op, *info, value, result, dOutShare());
    if (failed(adjoint))
      return failure();
    addAdjoint(value, *adjoint);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// External models
//===----------------------------------------------------------------------===//

namespace {
/// Any linalg structured op: differentiated through its generic form.
template <typename OpTy>
struct LinalgGradient
    : GradientOpInterface::ExternalModel<LinalgGradient<OpTy>, OpTy> {
  LogicalResult buildAdjoints(Operation *op, OpBuilder &b,
                              ArrayRef<Value> resultAdjoints,
                              IsActiveFn isActive,
                              AddAdjointFn addAdjoint) const {
    if (op->getNumResults() != 1)
      return op->emitError("cannot differentiate '")
             << op->getName() << "' with " << op->getNumResults()
             << " results";
    if (auto generic = dyn_cast<linalg::GenericOp>(op))
      return buildGenericAdjoints(b, generic, op->getResult(0),
                                  resultAdjoints[0], isActive, addAdjoint);
    // Generalise a scratch copy, differentiate it, then drop it.
    Operation *scratch = b.clone(*op);
    IRRewriter rewriter(b.getContext());
    rewriter.setInsertionPoint(scratch);
    FailureOr<linalg::GenericOp> generic =
        linalg::generalizeNamedOp(rewriter, cast<linalg::LinalgOp>(scratch));
    if (failed(generic)) {
      scratch->erase();
      return op->emitError("cannot differentiate '")
             << op->getName() << "': it has no linalg.generic form";
    }
    LogicalResult result =
        buildGenericAdjoints(b, *generic, op->getResult(0), resultAdjoints[0],
                             isActive, addAdjoint);
    (*generic)->erase();
    return result;
  }
};

/// y = softmax(x) along d: dx = y * (dy - sum_d(dy * y)).
struct SoftmaxGradient
    : GradientOpInterface::ExternalModel<SoftmaxGradient, linalg::SoftmaxOp> {
  LogicalResult buildAdjoints(Operation *op, OpBuilder &b,
                              ArrayRef<Value> resultAdjoints,
                              IsActiveFn isActive,
                              AddAdjointFn addAdjoint) const {
    auto softmax = cast<linalg::SoftmaxOp>(op);
    Value input = softmax.getInput();
    if (!isActive(input))
      return success();
    Location loc = op->getLoc();
    Value y = softmax.getResult()[0], dy = resultAdjoints[0];
    auto type = cast<RankedTensorType>(y.getType());
    int64_t rank = type.getRank(), dim = softmax.getDimension();
    SmallVector<int64_t> reducedShape;
    SmallVector<AffineExpr> reducedExprs;
    SmallVector<utils::IteratorType> iterators;
    for (int64_t d = 0; d < rank; ++d) {
      iterators.push_back(d == dim ? utils::IteratorType::reduction
                                   : utils::IteratorType::parallel);
      if (d != dim) {
        reducedShape.push_back(type.getDimSize(d));
        reducedExprs.push_back(b.getAffineDimExpr(d));
      }
    }
    AffineMap id = b.getMultiDimIdentityMap(rank);
    AffineMap reduced = AffineMap::get(rank, 0, reducedExprs, b.getContext());
    auto reducedType =
        RankedTensorType::get(reducedShape, type.getElementType());
    Value dot =
        linalg::GenericOp::create(
            b, loc, TypeRange{reducedType}, ValueRange{dy, y},
            ValueRange{buildZeros(b, loc, reducedType)},
            ArrayRef<AffineMap>{id, id, reduced}, iterators,
            [](OpBuilder &nb, Location nloc, ValueRange args) {
              Value p = arith::MulFOp::create(nb, nloc, args[0], args[1]);
              linalg::YieldOp::create(
                  nb, nloc, Value(arith::AddFOp::create(nb, nloc, args[2], p)));
            })
            .getResult(0);
    SmallVector<utils::IteratorType> parallel(rank,
                                              utils::IteratorType::parallel);
    Value empty = tensor::EmptyOp::create(b, loc, type.getShape(),
                                          type.getElementType());
    Value dx = linalg::GenericOp::create(
                   b, loc, TypeRange{type}, ValueRange{y, dy, dot},
                   ValueRange{empty},
                   ArrayRef<AffineMap>{id, id, reduced, id}, parallel,
                   [](OpBuilder &nb, Location nloc, ValueRange args) {
                     Value diff =
                         arith::SubFOp::create(nb, nloc, args[1], args[2]);
                     linalg::YieldOp::create(
                         nb, nloc,
                         Value(arith::MulFOp::create(nb, nloc, args[0], diff)));
                   })
                   .getResult(0);
    addAdjoint(input, dx);
    return success();
  }
};

struct ExpandShapeGradient
    : GradientOpInterface::ExternalModel<ExpandShapeGradient,
                                         tensor::ExpandShapeOp> {
  LogicalResult buildAdjoints(Operation *op, OpBuilder &b,
                              ArrayRef<Value> resultAdjoints,
                              IsActiveFn isActive,
                              AddAdjointFn addAdjoint) const {
    auto expand = cast<tensor::ExpandShapeOp>(op);
    addAdjoint(expand.getSrc(),
               tensor::CollapseShapeOp::create(
                   b, op->getLoc(), expand.getSrcType(), resultAdjoints[0],
                   expand.getReassociationIndices()));
    return success();
  }
};

struct CollapseShapeGradient
    : GradientOpInterface::ExternalModel<CollapseShapeGradient,
                                         tensor::CollapseShapeOp> {
  LogicalResult buildAdjoints(Operation *op, OpBuilder &b,
                              ArrayRef<Value> resultAdjoints,
                              IsActiveFn isActive,
                              AddAdjointFn addAdjoint) const {
    auto collapse = cast<tensor::CollapseShapeOp>(op);
    addAdjoint(collapse.getSrc(),
               tensor::ExpandShapeOp::create(
                   b, op->getLoc(), collapse.getSrcType(), resultAdjoints[0],
                   collapse.getReassociationIndices()));
    return success();
  }
};

struct ExtractSliceGradient
    : GradientOpInterface::ExternalModel<ExtractSliceGradient,
                                         tensor::ExtractSliceOp> {
  LogicalResult buildAdjoints(Operation *op, OpBuilder &b,
                              ArrayRef<Value> resultAdjoints,
                              IsActiveFn isActive,
                              AddAdjointFn addAdjoint) const {
    auto slice = cast<tensor::ExtractSliceOp>(op);
    Location loc = op->getLoc();
    Value zeros = buildZeros(b, loc, slice.getSourceType());
    addAdjoint(slice.getSource(),
               tensor::InsertSliceOp::create(
                   b, loc, resultAdjoints[0], zeros, slice.getMixedOffsets(),
                   slice.getMixedSizes(), slice.getMixedStrides()));
    return success();
  }
};

struct InsertSliceGradient
    : GradientOpInterface::ExternalModel<InsertSliceGradient,
                                         tensor::InsertSliceOp> {
  LogicalResult buildAdjoints(Operation *op, OpBuilder &b,
                              ArrayRef<Value> resultAdjoints,
                              IsActiveFn isActive,
                              AddAdjointFn addAdjoint) const {
    auto insert = cast<tensor::InsertSliceOp>(op);
    Location loc = op->getLoc();
    Value dOut = resultAdjoints[0];
    if (isActive(insert.getSource()))
      addAdjoint(insert.getSource(),
                 tensor::ExtractSliceOp::create(
                     b, loc, insert.getSourceType(), dOut,
                     insert.getMixedOffsets(), insert.getMixedSizes(),
                     insert.getMixedStrides()));
    if (isActive(insert.getDest())) {
      Value zeros = buildZeros(b, loc, insert.getSourceType());
      addAdjoint(insert.getDest(),
                 tensor::InsertSliceOp::create(
                     b, loc, zeros, dOut, insert.getMixedOffsets(),
                     insert.getMixedSizes(), insert.getMixedStrides()));
    }
    return success();
  }
};

/// The adjoint of a stage boundary is a backward stage boundary.
struct CutGradient
    : GradientOpInterface::ExternalModel<CutGradient, zb::pipe::CutOp> {
  LogicalResult buildAdjoints(Operation *op, OpBuilder &b,
                              ArrayRef<Value> resultAdjoints,
                              IsActiveFn isActive,
                              AddAdjointFn addAdjoint) const {
    auto cut = cast<zb::pipe::CutOp>(op);
    auto adjoint = zb::pipe::CutOp::create(b, op->getLoc(), resultAdjoints[0]);
    adjoint.setAdjoint(true);
    addAdjoint(cut.getInput(), adjoint);
    return success();
  }
};
} // namespace

template <typename... Ops>
static void attachLinalgModels(MLIRContext *ctx) {
  (Ops::template attachInterface<LinalgGradient<Ops>>(*ctx), ...);
}

void zb::autodiff::registerGradientExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, linalg::LinalgDialect *) {
    attachLinalgModels<linalg::GenericOp, linalg::MatmulOp,
                       linalg::BatchMatmulOp, linalg::TransposeOp,
                       linalg::BroadcastOp, linalg::ReduceOp, linalg::MapOp,
                       linalg::FillOp, linalg::CopyOp, linalg::AddOp,
                       linalg::SubOp, linalg::MulOp, linalg::DivOp,
                       linalg::ExpOp, linalg::LogOp, linalg::NegFOp,
                       linalg::MaxOp, linalg::MinOp>(ctx);
    linalg::SoftmaxOp::attachInterface<SoftmaxGradient>(*ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, tensor::TensorDialect *) {
    tensor::ExpandShapeOp::attachInterface<ExpandShapeGradient>(*ctx);
    tensor::CollapseShapeOp::attachInterface<CollapseShapeGradient>(*ctx);
    tensor::ExtractSliceOp::attachInterface<ExtractSliceGradient>(*ctx);
    tensor::InsertSliceOp::attachInterface<InsertSliceGradient>(*ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, zb::pipe::PipeDialect *) {
    zb::pipe::CutOp::attachInterface<CutGradient>(*ctx);
  });
}
