//===- PipeOps.cpp - The pipe dialect operations --------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Dialect/Pipe/PipeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace zb::pipe;

#define GET_OP_CLASSES
#include "zb/Dialect/Pipe/PipeOps.cpp.inc"

//===----------------------------------------------------------------------===//
// StageOp
//===----------------------------------------------------------------------===//

YieldOp StageOp::getForwardYield() {
  return cast<YieldOp>(getForward().front().getTerminator());
}

/// Appends `types` to `list`.
static void append(SmallVectorImpl<Type> &list, TypeRange types) {
  list.append(types.begin(), types.end());
}

/// Checks that `region` of `stage` has one block whose arguments have
/// `argTypes`, ending in a `pipe.yield` whose values have `valueTypes`; when
/// `stashTypes` is given the yield's stash must have those types, and when
/// `allowStash` is false it must be empty. On success sets `yieldOut`.
static LogicalResult verifyRegion(StageOp stage, Region &region, StringRef name,
                                  TypeRange argTypes, TypeRange valueTypes,
                                  bool allowStash,
                                  YieldOp *yieldOut = nullptr) {
  if (!region.hasOneBlock())
    return stage.emitOpError()
           << "region '" << name << "' must have exactly one block";
  Block &block = region.front();
  if (block.getArgumentTypes() != argTypes) {
    InFlightDiagnostic diag = stage.emitOpError()
                              << "region '" << name << "' must take "
                              << argTypes.size() << " arguments of types (";
    llvm::interleaveComma(argTypes, diag);
    diag << "), but takes (";
    llvm::interleaveComma(block.getArgumentTypes(), diag);
    return diag << ")";
  }
  auto yield =
      dyn_cast_or_null<YieldOp>(block.empty() ? nullptr : &block.back());
  if (!yield)
    return stage.emitOpError()
           << "region '" << name << "' must end in 'pipe.yield'";
  if (yield.getValues().getTypes() != valueTypes) {
    InFlightDiagnostic diag = yield.emitOpError()
                              << "in region '" << name << "' must yield "
                              << valueTypes.size() << " values of types (";
    llvm::interleaveComma(valueTypes, diag);
    diag << "), but yields (";
    llvm::interleaveComma(yield.getValues().getTypes(), diag);
    return diag << ")";
  }
  if (!allowStash && !yield.getStash().empty())
    return yield.emitOpError()
           << "in region '" << name << "' cannot stash values";
  if (yieldOut)
    *yieldOut = yield;
  return success();
}

LogicalResult StageOp::verifyRegions() {
  SmallVector<Type> forwardArgs;
  append(forwardArgs, getInputs().getTypes());
  append(forwardArgs, getData().getTypes());
  append(forwardArgs, getParams().getTypes());
  YieldOp forwardYield;
  if (failed(verifyRegion(*this, getForward(), "forward", forwardArgs,
                          getResultTypes(), /*allowStash=*/true,
                          &forwardYield)))
    return failure();

  bool hasFused = !getBackward().empty();
  bool hasB = !getBackwardInput().empty();
  bool hasW = !getBackwardWeight().empty();
  if (hasB != hasW)
    return emitOpError("regions 'backward_input' and 'backward_weight' must "
                       "be present together");
  if (hasFused && hasB)
    return emitOpError("cannot have both a 'backward' region and the split "
                       "'backward_input'/'backward_weight' regions");
  if (!hasFused && !hasB)
    return success();

  // Backward regions take the forward stash, then one cotangent per result.
  SmallVector<Type> backwardArgs;
  append(backwardArgs, forwardYield.getStash().getTypes());
  append(backwardArgs, getResultTypes());

  if (hasFused) {
    SmallVector<Type> grads;
    append(grads, getInputs().getTypes());
    append(grads, getParams().getTypes());
    return verifyRegion(*this, getBackward(), "backward", backwardArgs, grads,
                        /*allowStash=*/false);
  }

  YieldOp bYield;
  if (failed(verifyRegion(*this, getBackwardInput(), "backward_input",
                          backwardArgs, getInputs().getTypes(),
                          /*allowStash=*/true, &bYield)))
    return failure();
  return verifyRegion(*this, getBackwardWeight(), "backward_weight",
                      bYield.getStash().getTypes(), getParams().getTypes(),
                      /*allowStash=*/false);
}

//===----------------------------------------------------------------------===//
// RunningStatOp
//===----------------------------------------------------------------------===//

LogicalResult RunningStatOp::verify() {
  auto type = cast<RankedTensorType>(getValue().getType());
  if (!type.hasStaticShape() ||
      !(type.getElementType().isF32() || type.getElementType().isF64()))
    return emitOpError("records a statically shaped f32 or f64 tensor, not ")
           << type;
  if (getBuffer().empty())
    return emitOpError("needs a non-empty 'buffer' name");
  double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0.0 && momentum <= 1.0))
    return emitOpError("'momentum' must lie in [0, 1], got ") << momentum;
  return success();
}
