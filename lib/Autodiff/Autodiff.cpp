//===- Autodiff.cpp - Reverse-mode differentiation of a block -------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Autodiff/Autodiff.h"

#include "zb/Autodiff/GradientOpInterface.h"
#include "zb/Dialect/Pipe/PipeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AsmState.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "zb-autodiff"

using namespace mlir;
using namespace zb::autodiff;

Value zb::autodiff::buildZeros(OpBuilder &b, Location loc,
                               RankedTensorType type) {
  Value empty =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  Value zero =
      arith::ConstantOp::create(b, loc, b.getZeroAttr(type.getElementType()));
  return linalg::FillOp::create(b, loc, zero, empty).getResult(0);
}

/// `lhs + rhs` elementwise, into a new tensor or, with `intoLhs`, into
/// `lhs` (the generic's `outs`).
static Value buildElementwiseAdd(OpBuilder &b, Location loc, Value lhs,
                                 Value rhs, bool intoLhs) {
  auto type = cast<RankedTensorType>(lhs.getType());
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  if (intoLhs)
    return linalg::GenericOp::create(
               b, loc, TypeRange{type}, ValueRange{rhs}, ValueRange{lhs},
               ArrayRef<AffineMap>{id, id}, iterators,
               [](OpBuilder &nb, Location nloc, ValueRange args) {
                 Value sum = arith::AddFOp::create(nb, nloc, args[1], args[0]);
                 linalg::YieldOp::create(nb, nloc, sum);
               })
        .getResult(0);
  Value empty =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, ValueRange{lhs, rhs}, ValueRange{empty},
             ArrayRef<AffineMap>{id, id, id}, iterators,
             [](OpBuilder &nb, Location nloc, ValueRange args) {
               Value sum = arith::AddFOp::create(nb, nloc, args[0], args[1]);
               linalg::YieldOp::create(nb, nloc, sum);
             })
      .getResult(0);
}

Value zb::autodiff::buildAdd(OpBuilder &b, Location loc, Value lhs, Value rhs) {
  if (!lhs)
    return rhs;
  if (!rhs)
    return lhs;
  return buildElementwiseAdd(b, loc, lhs, rhs, /*intoLhs=*/false);
}

Value zb::autodiff::buildAddInto(OpBuilder &b, Location loc, Value sum,
                                 Value addend) {
  return buildElementwiseAdd(b, loc, sum, addend, /*intoLhs=*/true);
}

func::FuncOp zb::autodiff::buildAccumulating(OpBuilder &b, func::FuncOp fn,
                                             StringRef name,
                                             ArrayRef<GradientSource> grads,
                                             ArrayRef<unsigned> kept) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfter(fn);
  auto acc = cast<func::FuncOp>(b.clone(*fn));
  acc.setSymName(name);
  Block &entry = acc.front();
  Location loc = acc.getLoc();
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  auto gradOf = [&](GradientSource source) -> Value {
    auto [isArg, index] = source;
    return isArg ? entry.getArgument(index) : ret.getOperand(index);
  };
  // Through the function, which keeps its argument attributes in step.
  unsigned firstSum = acc.getNumArguments();
  SmallVector<unsigned> indices(grads.size(), firstSum);
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs(grads.size());
  SmallVector<Location> locs;
  for (GradientSource source : grads) {
    Value grad = gradOf(source);
    types.push_back(grad.getType());
    locs.push_back(grad.getLoc());
  }
  [[maybe_unused]] LogicalResult inserted =
      acc.insertArguments(indices, types, attrs, locs);
  assert(succeeded(inserted) && "a func.func takes any argument");
  ValueRange sums = acc.getArguments().drop_front(firstSum);
  b.setInsertionPoint(ret);
  SmallVector<Value> results;
  for (unsigned ri : kept)
    results.push_back(ret.getOperand(ri));
  for (auto [source, sum] : llvm::zip_equal(grads, sums))
    results.push_back(buildAddInto(b, loc, sum, gradOf(source)));
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  acc.setFunctionType(FunctionType::get(b.getContext(),
                                        entry.getArgumentTypes(),
                                        ValueRange(results).getTypes()));
  return acc;
}

Operation *zb::autodiff::mulAddProduct(Block *body) {
  Operation *yield = body->getTerminator();
  if (body->getOperations().size() != 3 || body->getNumArguments() == 0 ||
      yield->getNumOperands() != 1)
    return nullptr;
  Value out = body->getArguments().back();
  auto add = yield->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || (add.getLhs() != out && add.getRhs() != out))
    return nullptr;
  return (add.getLhs() == out ? add.getRhs() : add.getLhs())
      .getDefiningOp<arith::MulFOp>();
}

bool zb::autodiff::isDifferentiable(Type type) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    type = shaped.getElementType();
  return isa<FloatType>(type);
}

/// The values `op` reads: its operands and values its regions use from
/// above.
static SetVector<Value> inputsOf(Operation *op) {
  SetVector<Value> inputs(op->operand_begin(), op->operand_end());
  if (op->getNumRegions()) {
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(op->getRegions(), captured);
    inputs.insert(captured.begin(), captured.end());
  }
  return inputs;
}

/// "parameter 'l1.weight'", "%arg3" or "%12" for diagnostics.
static std::string nameOf(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    Operation *owner = arg.getOwner()->getParentOp();
    // A stage's forward argument: an input, data, or a model parameter.
    if (auto stage = dyn_cast<zb::pipe::StageOp>(owner)) {
      unsigned i = arg.getArgNumber();
      unsigned numInputs = stage.getInputs().size();
      unsigned numData = stage.getData().size();
      if (i < numInputs)
        return "input #" + std::to_string(i) + " of stage " +
               std::to_string(stage.getStage());
      if (i >= numInputs + numData)
        return nameOf(stage.getParams()[i - numInputs - numData]);
    }
    if (auto fn = dyn_cast<FunctionOpInterface>(owner))
      if (auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      "zb.param"))
        return ("parameter '" + name.getValue() + "'").str();
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  OpPrintingFlags flags;
  value.printAsOperand(os, flags);
  return text;
}

FailureOr<SmallVector<Value>>
zb::autodiff::buildReverse(OpBuilder &b, Block &block,
                           ArrayRef<std::pair<Value, Value>> seeds,
                           ArrayRef<Value> wrt) {
  // Forward: values that depend on a `wrt` value.
  DenseSet<Value> varied;
  for (Value v : wrt)
    if (isDifferentiable(v.getType()))
      varied.insert(v);
  for (Operation &op : block) {
    if (llvm::none_of(inputsOf(&op),
                      [&](Value v) { return varied.contains(v); }))
      continue;
    for (Value result : op.getResults())
      if (isDifferentiable(result.getType()))
        varied.insert(result);
  }
  // Backward: values a seeded value depends on.
  DenseSet<Value> useful;
  for (auto &[value, seed] : seeds)
    useful.insert(value);
  for (Operation &op : llvm::reverse(block)) {
    if (llvm::none_of(op.getResults(),
                      [&](Value v) { return useful.contains(v); }))
      continue;
    for (Value input : inputsOf(&op))
      useful.insert(input);
  }
  auto isActive = [&](Value v) {
    return varied.contains(v) && useful.contains(v);
  };

  DenseMap<Value, Value> adjoints;
  auto addAdjoint = [&](Value primal, Value adjoint) {
    Value &slot = adjoints[primal];
    slot = buildAdd(b, adjoint.getLoc(), slot, adjoint);
  };
  for (auto &[value, seed] : seeds)
    if (isActive(value))
      addAdjoint(value, seed);

  for (Operation &op : llvm::reverse(block)) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    SmallVector<Value> resultAdjoints;
    bool anyAdjoint = false;
    for (Value result : op.getResults()) {
      Value adjoint = isActive(result) ? adjoints.lookup(result) : Value();
      anyAdjoint |= static_cast<bool>(adjoint);
      resultAdjoints.push_back(adjoint);
    }
    if (!anyAdjoint)
      continue;
    SetVector<Value> inputs = inputsOf(&op);
    auto active = llvm::find_if(inputs, isActive);
    if (active == inputs.end())
      continue;
    // Adjoints are built at their primal's shape: static ones only.
    for (Value v : llvm::concat<Value>(op.getResults(), inputs)) {
      auto type = dyn_cast<RankedTensorType>(v.getType());
      if (isActive(v) && type && !type.hasStaticShape())
        return op.emitError("cannot differentiate '")
               << op.getName() << "': " << nameOf(v)
               << " has the dynamic shape " << type
               << "; gradients need static shapes";
    }
    auto rule = dyn_cast<GradientOpInterface>(&op);
    if (!rule)
      return op.emitError("cannot differentiate '")
             << op.getName() << "': no gradient rule (needed for the "
             << "gradient of " << nameOf(*active) << ")";
    LLVM_DEBUG(llvm::dbgs() << "differentiating " << op.getName() << "\n");
    if (failed(rule.buildAdjoints(b, resultAdjoints, isActive, addAdjoint)))
      return op.emitError("while differentiating '")
             << op.getName() << "' for the gradient of " << nameOf(*active);
  }

  SmallVector<Value> results;
  for (Value v : wrt) {
    Value adjoint = adjoints.lookup(v);
    if (!adjoint)
      adjoint = buildZeros(b, v.getLoc(), cast<RankedTensorType>(v.getType()));
    results.push_back(adjoint);
  }
  return results;
}
