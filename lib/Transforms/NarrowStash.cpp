//===- NarrowStash.cpp - The --zb-narrow-stash pass -----------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Passes.h"

#include "RegionStash.h"

#include "zb/Dialect/Pipe/PipeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace zb {
#define GEN_PASS_DEF_ZBNARROWSTASH
#include "zb/Transforms/Passes.h.inc"
} // namespace zb

using namespace mlir;
using namespace zb;

/// Whether the stash holds `v` in f32 (a ranked f32 tensor).
static bool isF32Tensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getElementType().isF32();
}

/// `v`'s elements converted to `element` (truncf to a narrower float,
/// extf to a wider one), as an elementwise linalg.generic.
static Value convertElements(OpBuilder &b, Location loc, Value v,
                             FloatType element) {
  auto type = cast<RankedTensorType>(v.getType());
  bool narrowing =
      element.getWidth() < cast<FloatType>(type.getElementType()).getWidth();
  Value init = tensor::EmptyOp::create(b, loc, tensor::getMixedSizes(b, loc, v),
                                       element);
  SmallVector<AffineMap> maps(2, b.getMultiDimIdentityMap(type.getRank()));
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, type.clone(element), v, init, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value c =
            narrowing
                ? arith::TruncFOp::create(nb, nloc, element, args[0])
                      .getResult()
                : arith::ExtFOp::create(nb, nloc, element, args[0]).getResult();
        linalg::YieldOp::create(nb, nloc, c);
      });
  return generic.getResult(0);
}

/// Makes the arguments `positions` of `block` `narrow` tensors, widened
/// back to f32 at the block's start for their readers; returns the widened
/// values by position.
static DenseMap<unsigned, Value> narrowArguments(Block &block,
                                                 ArrayRef<unsigned> positions,
                                                 FloatType narrow,
                                                 FloatType wide) {
  DenseMap<unsigned, Value> widened;
  OpBuilder b = OpBuilder::atBlockBegin(&block);
  for (unsigned i : positions) {
    BlockArgument arg = block.getArgument(i);
    arg.setType(cast<RankedTensorType>(arg.getType()).clone(narrow));
    Value wider = convertElements(b, arg.getLoc(), arg, wide);
    arg.replaceAllUsesExcept(wider, wider.getDefiningOp());
    widened[i] = wider;
  }
  return widened;
}

/// Narrows the stashes of one stage (see the pass description).
static void narrowStage(pipe::StageOp stage, FloatType narrow) {
  MLIRContext *ctx = stage.getContext();
  auto wide = Float32Type::get(ctx);
  // F→B: what the forward computes or received as an input; not its data
  // or parameters.
  Block &forward = stage.getForward().front();
  unsigned numInputs = stage.getInputs().size();
  pipe::YieldOp forwardYield = stage.getForwardYield();
  SmallVector<unsigned> narrowedS;
  OpBuilder b(forwardYield);
  for (auto [i, v] : llvm::enumerate(forwardYield.getStash())) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!isF32Tensor(v) ||
        (arg && arg.getOwner() == &forward && arg.getArgNumber() >= numInputs))
      continue;
    narrowedS.push_back(i);
  }
  for (unsigned i : narrowedS) {
    OpOperand &operand = forwardYield.getStashMutable()[i];
    operand.set(
        convertElements(b, forwardYield.getLoc(), operand.get(), narrow));
  }
  bool split = !stage.getBackwardInput().empty();
  Block &backward =
      split ? stage.getBackwardInput().front() : stage.getBackward().front();
  DenseMap<unsigned, Value> widened =
      narrowArguments(backward, narrowedS, narrow, wide);

  if (split) {
    // B→W: what B computes or received (the output gradients); a forward
    // stash B hands on goes on narrowed if it came narrowed, as it is if
    // not (parameters, data).
    auto yield = cast<pipe::YieldOp>(backward.getTerminator());
    unsigned numS = forwardYield.getStash().size();
    DenseMap<Value, Value> narrowOf;
    for (auto [i, wider] : widened)
      narrowOf[wider] = backward.getArgument(i);
    SmallVector<unsigned> narrowedWS;
    b.setInsertionPoint(yield);
    for (auto [j, v] : llvm::enumerate(yield.getStash())) {
      auto arg = dyn_cast<BlockArgument>(v);
      bool handedOn =
          arg && arg.getOwner() == &backward && arg.getArgNumber() < numS;
      if (!isF32Tensor(v) || handedOn)
        continue;
      OpOperand &operand = yield.getStashMutable()[j];
      if (Value already = narrowOf.lookup(v))
        operand.set(already);
      else
        operand.set(convertElements(b, yield.getLoc(), v, narrow));
      narrowedWS.push_back(j);
    }
    narrowArguments(stage.getBackwardWeight().front(), narrowedWS, narrow,
                    wide);
  }
  // A widening only the B→W stash read is now unused.
  for (auto [i, wider] : widened)
    if (wider.use_empty()) {
      auto generic = cast<linalg::GenericOp>(wider.getDefiningOp());
      Operation *init = generic.getDpsInits()[0].getDefiningOp();
      generic.erase();
      if (init->use_empty())
        init->erase();
    }

  Builder attrs(ctx);
  stage.setMemBAttr(attrs.getI64IntegerAttr(forwardStashBytes(stage)));
  if (split)
    stage.setMemWAttr(attrs.getI64IntegerAttr(backwardWeightStashBytes(stage)));
}

namespace {
struct NarrowStashPass : zb::impl::ZBNarrowStashBase<NarrowStashPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    if (dtype != "bf16") {
      getOperation().emitError("--zb-narrow-stash: unknown dtype '")
          << dtype << "'; known: bf16";
      return signalPassFailure();
    }
    FloatType narrow = BFloat16Type::get(ctx);
    getOperation()->walk([&](pipe::StageOp stage) {
      if (stage.hasBackward())
        narrowStage(stage, narrow);
    });
  }
};
} // namespace
