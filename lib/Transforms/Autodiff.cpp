//===- Autodiff.cpp - The --zb-autodiff pass ------------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Passes.h"

#include "RegionStash.h"

#include "zb/Autodiff/Autodiff.h"
#include "zb/Autodiff/GradientOpInterface.h"
#include "zb/Dialect/Pipe/PipeOps.h"
#include "zb/Dialect/ZB/ZBDialect.h"
#include "zb/Model/Model.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace zb {
#define GEN_PASS_DEF_ZBAUTODIFF
#include "zb/Transforms/Passes.h.inc"
} // namespace zb

using namespace mlir;
using namespace zb;

/// Folds `backward`: constants and dead code, the linalg ops' operands
/// their bodies do not read, and the ops that only copy an operand. Leaves
/// the blocks as they are (their arguments are the stage's interface), and
/// stops where a fixpoint would take longer: what is left is correct, only
/// possibly larger.
static void simplifyBackward(Region &backward) {
  MLIRContext *context = backward.getContext();
  RewritePatternSet patterns(context);
  linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
  linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
  tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
  tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
  GreedyRewriteConfig config;
  config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  (void)applyPatternsGreedily(backward, std::move(patterns), config);
}

/// Gives `stage` a backward region (see the pass description).
static LogicalResult differentiateStage(pipe::StageOp stage) {
  Block &forward = stage.getForward().front();
  pipe::YieldOp yield = stage.getForwardYield();
  if (!yield.getStash().empty())
    return stage.emitOpError("already stashes values but has no backward; "
                             "cannot differentiate it again");
  Location loc = stage.getLoc();
  Region &backward = stage.getBackward();
  Block *block = new Block();
  backward.push_back(block);
  SmallVector<std::pair<Value, Value>> seeds;
  for (Value result : yield.getValues())
    seeds.emplace_back(result, block->addArgument(result.getType(), loc));

  unsigned numInputs = stage.getInputs().size();
  unsigned numData = stage.getData().size();
  SmallVector<Value> wrt(forward.getArguments().take_front(numInputs));
  auto params = forward.getArguments().drop_front(numInputs + numData);
  wrt.append(params.begin(), params.end());

  OpBuilder b = OpBuilder::atBlockEnd(block);
  FailureOr<SmallVector<Value>> grads =
      autodiff::buildReverse(b, forward, seeds, wrt);
  if (failed(grads))
    return failure();
  pipe::YieldOp::create(b, loc, *grads, ValueRange());
  // What the backward reads decides what the forward stashes: fold it
  // first, so that an operand a derivative no longer reads (the product
  // of `x * 1.0` a bias's derivative leaves, once folded) is not stashed,
  // nor a copy made of what is.
  simplifyBackward(backward);

  SmallVector<Value> stash = stashValuesUsedFromAbove(backward, 0);
  yield.getStashMutable().assign(stash);

  recordStageCosts(stage);
  Builder attrs(stage.getContext());
  stage.setMemBAttr(attrs.getI64IntegerAttr(forwardStashBytes(stage)));
  return success();
}

/// The name of `fn`'s companion (see the pass description).
static std::string companionName(func::FuncOp fn, bool accumulate) {
  return (fn.getSymName() + (accumulate ? "_grad_acc" : "_grad")).str();
}

/// Adds `@<name>_grad` returning the loss and every parameter's gradient,
/// or with `accumulate` `@<name>_grad_acc` adding them into sums.
static LogicalResult
differentiateFunction(func::FuncOp fn, SymbolTable &symbols, bool accumulate) {
  func::FuncOp grad = fn.clone();
  grad.setSymName(companionName(fn, /*accumulate=*/false));
  grad->setAttr(ZBDialect::kGradientOfAttrName, FlatSymbolRefAttr::get(fn));
  symbols.insert(grad, std::next(Block::iterator(fn)));

  if (!grad.getBody().hasOneBlock()) {
    grad.erase();
    return fn.emitError("cannot differentiate '")
           << fn.getSymName() << "': its body must be one block";
  }
  Block &body = grad.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  if (ret.getNumOperands() != 1) {
    grad.erase();
    return fn.emitError("cannot differentiate '")
           << fn.getSymName() << "': it must return one scalar loss";
  }
  Value loss = ret.getOperand(0);
  auto lossType = dyn_cast<RankedTensorType>(loss.getType());
  if (!lossType || lossType.getRank() != 0 ||
      !isa<FloatType>(lossType.getElementType())) {
    grad.erase();
    return fn.emitError("cannot differentiate '")
           << fn.getSymName() << "': its result is not a scalar float tensor";
  }
  SmallVector<Value> params;
  for (unsigned i = 0, e = grad.getNumArguments(); i < e; ++i) {
    if (!grad.getArgAttr(i, kParamAttr))
      continue;
    // A gradient is a float tensor of the parameter's shape.
    auto type = dyn_cast<RankedTensorType>(grad.getArgument(i).getType());
    if (!type || !type.hasStaticShape() ||
        !isa<FloatType>(type.getElementType())) {
      grad.erase();
      return fn.emitError("cannot differentiate '")
             << fn.getSymName() << "': parameter #" << i << " has type "
             << fn.getArgument(i).getType()
             << "; parameters must be ranked tensors of floats with "
                "static shapes";
    }
    params.push_back(grad.getArgument(i));
  }

  OpBuilder b(ret);
  Value seed = arith::ConstantOp::create(
      b, fn.getLoc(),
      DenseElementsAttr::get(lossType, b.getFloatAttr(
                                           lossType.getElementType(), 1.0)));
  FailureOr<SmallVector<Value>> grads =
      autodiff::buildReverse(b, body, {{loss, seed}}, params);
  if (failed(grads)) {
    grad.erase();
    return failure();
  }
  SmallVector<Value> results = {loss};
  results.append(grads->begin(), grads->end());
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  grad.setFunctionType(FunctionType::get(
      fn.getContext(), grad.getArgumentTypes(), ValueRange(results).getTypes()));
  if (!accumulate)
    return success();
  // A model without parameters has no sums (and no zb.grad_sums).
  SmallVector<autodiff::GradientSource> sources;
  for (unsigned i = 1; i < results.size(); ++i)
    sources.emplace_back(/*isArg=*/false, i);
  OpBuilder builder(fn.getContext());
  func::FuncOp acc = autodiff::buildAccumulating(
      builder, grad, companionName(fn, /*accumulate=*/true), sources, {0});
  if (!sources.empty())
    acc->setAttr(ZBDialect::kGradSumsAttrName,
                 builder.getI64IntegerAttr(sources.size()));
  symbols.erase(grad);
  symbols.insert(acc);
  return success();
}

namespace {
struct AutodiffPass : zb::impl::ZBAutodiffBase<AutodiffPass> {
  using ZBAutodiffBase::ZBAutodiffBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    ZBAutodiffBase::getDependentDialects(registry);
    autodiff::registerGradientExternalModels(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> functions(module.getOps<func::FuncOp>());
    for (func::FuncOp fn : functions) {
      if (fn.isExternal() || fn->hasAttr(ZBDialect::kGradientOfAttrName))
        continue;
      SmallVector<pipe::StageOp> stages(fn.getOps<pipe::StageOp>());
      if (!stages.empty()) {
        for (pipe::StageOp stage : stages)
          if (!stage.hasBackward() && failed(differentiateStage(stage)))
            return signalPassFailure();
        continue;
      }
      if (!fn.isPublic() || symbols.lookup(companionName(fn, accumulate)))
        continue;
      if (failed(differentiateFunction(fn, symbols, accumulate)))
        return signalPassFailure();
    }
  }
};
} // namespace
