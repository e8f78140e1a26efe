//===- EmitOptimizer.cpp - Each rank's optimizer update as code -----------===//
//
// Part of ZeroBubble MLIR.
//
// --zb-emit-optimizer: the update of a rank's parameters after a step,
// written as elementwise linalg on tensors next to the step function, so
// that it compiles with the model for either target. The contract with the
// caller (argument order, the hyper-parameter layout) is in
// zb/Conversion/CompiledOptimizer.h; the arithmetic repeats
// runtime/lib/Optimizer.cpp operation by operation.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/CompiledOptimizer.h"
#include "zb/Conversion/Passes.h"
#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace zb {
#define GEN_PASS_DEF_ZBEMITOPTIMIZER
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;
using namespace zb::optimizer;

std::optional<Kind> zb::optimizer::parseKind(StringRef name) {
  if (name == "sgd")
    return Kind::SGD;
  if (name == "sgd-momentum")
    return Kind::SGDMomentum;
  if (name == "adamw")
    return Kind::AdamW;
  return std::nullopt;
}

StringRef zb::optimizer::kindName(Kind kind) {
  switch (kind) {
  case Kind::SGD:
    return "sgd";
  case Kind::SGDMomentum:
    return "sgd-momentum";
  case Kind::AdamW:
    return "adamw";
  }
  llvm_unreachable("unknown optimizer kind");
}

int64_t zb::optimizer::numStates(Kind kind) {
  switch (kind) {
  case Kind::SGD:
    return 0;
  case Kind::SGDMomentum:
    return 1;
  case Kind::AdamW:
    return 2;
  }
  llvm_unreachable("unknown optimizer kind");
}

std::string zb::optimizer::updateFunction(int64_t rank) {
  return "zb_rank" + std::to_string(rank) + "_update";
}

std::string zb::optimizer::gradSquaresFunction(int64_t rank) {
  return "zb_rank" + std::to_string(rank) + "_grad_squares";
}

namespace {

/// The hyper-parameters an update of `kind` reads, in the order of the
/// generic's inputs after the gradient.
ArrayRef<Hyper> usedHyper(Kind kind) {
  static const Hyper sgd[] = {kLearningRate, kClipScale, kWeightDecay};
  static const Hyper momentum[] = {kLearningRate, kClipScale, kWeightDecay,
                                   kMomentum, kFirstStep};
  static const Hyper adamw[] = {
      kLearningRate,  kClipScale, kBeta1,       kOneMinusBeta1, kBeta2,
      kOneMinusBeta2, kDecay,     kCorrection1, kCorrection2,   kEpsilon};
  switch (kind) {
  case Kind::SGD:
    return sgd;
  case Kind::SGDMomentum:
    return momentum;
  case Kind::AdamW:
    return adamw;
  }
  llvm_unreachable("unknown optimizer kind");
}

/// Builds one parameter's update inside a linalg.generic body: f64
/// arithmetic on the block's scalars, rounded to the parameter's type.
class UpdateBody {
public:
  UpdateBody(OpBuilder &b, Location loc, Kind kind, FloatType element,
             ValueRange args)
      : b(b), loc(loc), kind(kind), element(element), f64(b.getF64Type()),
        args(args) {}

  /// Block arguments: the gradient, then the hyper-parameters in
  /// usedHyper() order, then the parameter and its state (the outs).
  Value grad() const { return args[0]; }
  Value hyper(Hyper h) const {
    ArrayRef<Hyper> used = usedHyper(kind);
    auto it = llvm::find(used, h);
    assert(it != used.end() && "hyper-parameter not read by this kind");
    return args[1 + (it - used.begin())];
  }
  Value out(int64_t i) const { return args[1 + usedHyper(kind).size() + i]; }

  /// The yielded values: the parameter, then its state.
  SmallVector<Value> build() {
    // The clipped gradient in the parameter's type, as zb-run scales it.
    Value scale = hyper(kClipScale);
    if (element != f64)
      scale = arith::TruncFOp::create(b, loc, element, scale);
    Value g = widen(arith::MulFOp::create(b, loc, grad(), scale));
    Value p = widen(out(0));
    if (kind == Kind::AdamW)
      return adamw(g, p);
    // d = g + wd * p; with momentum, d = first ? d : mu * buf + d.
    Value d = add(g, arith::MulFOp::create(b, loc, hyper(kWeightDecay), p));
    SmallVector<Value> results;
    Value buffer;
    if (kind == Kind::SGDMomentum) {
      Value zero = arith::ConstantOp::create(b, loc, b.getF64FloatAttr(0.0));
      Value first = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ONE,
                                          hyper(kFirstStep), zero);
      Value later = add(
          arith::MulFOp::create(b, loc, hyper(kMomentum), widen(out(1))), d);
      d = arith::SelectOp::create(b, loc, first, d, later);
      buffer = narrow(d);
    }
    results.push_back(narrow(arith::SubFOp::create(
        b, loc, p, arith::MulFOp::create(b, loc, hyper(kLearningRate), d))));
    if (buffer)
      results.push_back(buffer);
    return results;
  }

private:
  /// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g;
  /// p = p (1 - lr wd) - lr (m / c1) / (sqrt(v / c2) + eps).
  SmallVector<Value> adamw(Value g, Value p) {
    Value m =
        add(mul(hyper(kBeta1), widen(out(1))), mul(hyper(kOneMinusBeta1), g));
    Value v = add(mul(hyper(kBeta2), widen(out(2))),
                  mul(mul(hyper(kOneMinusBeta2), g), g));
    Value decayed = mul(p, hyper(kDecay));
    Value step = arith::DivFOp::create(
        b, loc,
        mul(hyper(kLearningRate),
            arith::DivFOp::create(b, loc, m, hyper(kCorrection1))),
        add(math::SqrtOp::create(
                b, loc, arith::DivFOp::create(b, loc, v, hyper(kCorrection2))),
            hyper(kEpsilon)));
    Value updated = arith::SubFOp::create(b, loc, decayed, step);
    return {narrow(updated), narrow(m), narrow(v)};
  }

  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value widen(Value x) {
    return element == f64 ? x : arith::ExtFOp::create(b, loc, f64, x);
  }
  Value narrow(Value x) {
    return element == f64 ? x : arith::TruncFOp::create(b, loc, element, x);
  }

  OpBuilder &b;
  Location loc;
  Kind kind;
  FloatType element;
  FloatType f64;
  ValueRange args;
};

/// `nameOf` the rank of `step` (updateFunction, gradSquaresFunction); an
/// error on `step` when the module already has it.
FailureOr<std::string> freshRankFunction(ModuleOp module, func::FuncOp step,
                                         std::string (*nameOf)(int64_t rank)) {
  auto rank = step->getAttrOfType<IntegerAttr>(zb::ZBDialect::kRankAttrName);
  std::string name = nameOf(rank.getInt());
  if (SymbolTable::lookupSymbolIn(module, name))
    return step.emitError("--zb-emit-optimizer: '")
           << name << "' already exists";
  return name;
}

struct EmitOptimizerPass : zb::impl::ZBEmitOptimizerBase<EmitOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<Kind> parsed = parseKind(kind);
    if (!parsed) {
      module.emitError("--zb-emit-optimizer: unknown optimizer '")
          << kind.getValue() << "'; known: sgd, sgd-momentum, adamw";
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> steps;
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn->hasAttr(zb::ZBDialect::kRankAttrName) &&
          fn->hasAttr(zb::ZBDialect::kParamsAttrName) &&
          !fn->hasAttr(zb::ZBDialect::kOptimizerAttrName))
        steps.push_back(fn);
    if (steps.empty()) {
      module.emitError("--zb-emit-optimizer: no step function (a function "
                       "with zb.rank and zb.params, see "
                       "--zb-lower-to-runtime)");
      return signalPassFailure();
    }
    for (func::FuncOp step : steps)
      if (failed(emitUpdate(module, step, *parsed)) ||
          failed(emitGradSquares(module, step)))
        return signalPassFailure();
  }

  /// `@zb_rank<r>_grad_squares(grads) -> sums`: per gradient, the sum of
  /// its squares in f64 (for f32 gradients non-finite exactly when an
  /// element is: the square of a finite f32 cannot overflow an f64 sum; an
  /// f64 gradient's also when it overflows). Two row reductions per
  /// gradient, so that each is a block reduction on the GPU and vector code
  /// on the CPU: along the innermost dimension, then over the other
  /// dimensions' partial sums, collapsed into one row.
  LogicalResult emitGradSquares(ModuleOp module, func::FuncOp step) {
    auto names = step->getAttrOfType<ArrayAttr>(zb::ZBDialect::kParamsAttrName);
    auto rank = step->getAttrOfType<IntegerAttr>(zb::ZBDialect::kRankAttrName);
    int64_t n = names.size();
    FailureOr<std::string> name =
        freshRankFunction(module, step, gradSquaresFunction);
    if (failed(name))
      return failure();
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(step);
    Location loc = step.getLoc();
    FloatType f64 = b.getF64Type();
    auto scalar = RankedTensorType::get({}, f64);
    SmallVector<Type> inputs(step.getArgumentTypes().take_front(n));
    SmallVector<Type> results(n, scalar);
    auto fn =
        func::FuncOp::create(b, loc, *name, b.getFunctionType(inputs, results));
    // No zb.params: it is not a step function; zb.rank keeps it with the
    // rank's program.
    fn->setAttr(zb::ZBDialect::kRankAttrName, rank);
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    SmallVector<Value> sums;
    for (int64_t i = 0; i < n; ++i) {
      Value g = entry->getArgument(i);
      // The squares summed along the innermost dimension (a 0-d gradient's
      // square alone).
      Value partial = sumAlongInnermost(b, loc, g, /*square=*/true);
      auto partialType = cast<RankedTensorType>(partial.getType());
      if (partialType.getRank() > 1) {
        SmallVector<ReassociationIndices> all(1);
        for (int64_t d = 0; d < partialType.getRank(); ++d)
          all[0].push_back(d);
        partial = tensor::CollapseShapeOp::create(b, loc, partial, all);
      }
      if (partialType.getRank() > 0)
        partial = sumAlongInnermost(b, loc, partial, /*square=*/false);
      sums.push_back(partial);
    }
    func::ReturnOp::create(b, loc, sums);
    return success();
  }

  /// `x` (rank r) summed along its innermost dimension in f64, squared
  /// first when `square`: a tensor of rank r - 1 (0-d x: its square).
  Value sumAlongInnermost(OpBuilder &b, Location loc, Value x, bool square) {
    auto type = cast<RankedTensorType>(x.getType());
    FloatType f64 = b.getF64Type();
    int64_t r = type.getRank();
    auto resultType =
        RankedTensorType::get(type.getShape().drop_back(r > 0 ? 1 : 0), f64);
    Value zero = arith::ConstantOp::create(b, loc, b.getF64FloatAttr(0.0));
    Value init = linalg::FillOp::create(
                     b, loc, zero,
                     tensor::EmptyOp::create(b, loc, resultType.getShape(), f64)
                         .getResult())
                     .getResult(0);
    AffineMap identity = b.getMultiDimIdentityMap(r);
    AffineMap dropInner = r > 0 ? identity.dropResult(r - 1) : identity;
    SmallVector<utils::IteratorType> iterators(r,
                                               utils::IteratorType::parallel);
    if (r > 0)
      iterators.back() = utils::IteratorType::reduction;
    auto generic = linalg::GenericOp::create(
        b, loc, TypeRange{resultType}, ValueRange{x}, ValueRange{init},
        ArrayRef<AffineMap>{identity, dropInner}, iterators,
        [&](OpBuilder &nested, Location at, ValueRange args) {
          Value v = args[0];
          if (v.getType() != f64)
            v = arith::ExtFOp::create(nested, at, f64, v);
          if (square)
            v = arith::MulFOp::create(nested, at, v, v);
          Value sum = arith::AddFOp::create(nested, at, args[1], v);
          linalg::YieldOp::create(nested, at, sum);
        });
    return generic.getResult(0);
  }

  LogicalResult emitUpdate(ModuleOp module, func::FuncOp step, Kind k) {
    auto names = step->getAttrOfType<ArrayAttr>(zb::ZBDialect::kParamsAttrName);
    auto rank = step->getAttrOfType<IntegerAttr>(zb::ZBDialect::kRankAttrName);
    int64_t n = names.size();
    if (static_cast<int64_t>(step.getNumArguments()) < n)
      return step.emitError("--zb-emit-optimizer: ")
             << n << " parameters named in zb.params but "
             << step.getNumArguments() << " arguments";
    SmallVector<RankedTensorType> params;
    for (int64_t i = 0; i < n; ++i) {
      auto type = dyn_cast<RankedTensorType>(step.getArgumentTypes()[i]);
      Type element = type ? type.getElementType() : Type();
      if (!type || !type.hasStaticShape() ||
          !(element.isF32() || element.isF64()))
        return step.emitError("--zb-emit-optimizer: parameter '")
               << cast<StringAttr>(names[i]).getValue() << "' is "
               << step.getArgumentTypes()[i]
               << "; the compiled optimizer updates static f32 or f64 "
                  "tensors";
      params.push_back(type);
    }
    FailureOr<std::string> name =
        freshRankFunction(module, step, updateFunction);
    if (failed(name))
      return failure();

    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(step);
    Location loc = step.getLoc();
    int64_t states = numStates(k);
    auto hyperType = RankedTensorType::get({kNumHyper}, b.getF64Type());
    SmallVector<Type> inputs, results;
    // params, grads, state 1, state 2, hyper; returns params and state.
    for (int64_t copy = 0; copy < 2 + states; ++copy)
      inputs.append(params.begin(), params.end());
    inputs.push_back(hyperType);
    results.append(params.begin(), params.end());
    for (int64_t s = 0; s < states; ++s)
      results.append(params.begin(), params.end());
    auto update =
        func::FuncOp::create(b, loc, *name, b.getFunctionType(inputs, results));
    update->setAttr(zb::ZBDialect::kRankAttrName, rank);
    update->setAttr(zb::ZBDialect::kParamsAttrName, names);
    update->setAttr(zb::ZBDialect::kOptimizerAttrName,
                    b.getStringAttr(kindName(k)));
    Block *entry = update.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value hyper = entry->getArgument(inputs.size() - 1);

    SmallVector<Value> newParams, newStates[2];
    for (int64_t i = 0; i < n; ++i) {
      RankedTensorType type = params[i];
      int64_t r = type.getRank();
      ArrayRef<Hyper> used = usedHyper(k);
      AffineMap identity = b.getMultiDimIdentityMap(r);
      SmallVector<Value> ins{entry->getArgument(n + i)};
      SmallVector<AffineMap> maps{identity};
      for (Hyper h : used) {
        ins.push_back(hyper);
        maps.push_back(
            AffineMap::get(r, 0, b.getAffineConstantExpr(h), b.getContext()));
      }
      SmallVector<Value> outs{entry->getArgument(i)};
      for (int64_t s = 0; s < states; ++s)
        outs.push_back(entry->getArgument((2 + s) * n + i));
      maps.append(outs.size(), identity);
      SmallVector<utils::IteratorType> iterators(r,
                                                 utils::IteratorType::parallel);
      auto generic = linalg::GenericOp::create(
          b, loc, TypeRange(ValueRange(outs)), ins, outs, maps, iterators,
          [&](OpBuilder &nested, Location at, ValueRange args) {
            UpdateBody body(nested, at, k,
                            cast<FloatType>(type.getElementType()), args);
            linalg::YieldOp::create(nested, at, body.build());
          });
      newParams.push_back(generic.getResult(0));
      for (int64_t s = 0; s < states; ++s)
        newStates[s].push_back(generic.getResult(1 + s));
    }
    SmallVector<Value> returned(newParams);
    for (int64_t s = 0; s < states; ++s)
      returned.append(newStates[s]);
    func::ReturnOp::create(b, loc, returned);
    return success();
  }
};

} // namespace
