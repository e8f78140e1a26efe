//===- PrepareEntryPoints.cpp - Public functions as runtime entries -------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"
#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace zb {
#define GEN_PASS_DEF_ZBPREPAREENTRYPOINTS
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {
struct PrepareEntryPointsPass
    : zb::impl::ZBPrepareEntryPointsBase<PrepareEntryPointsPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    auto readOnly = BoolAttr::get(ctx, false);
    auto internal = LLVM::LinkageAttr::get(ctx, LLVM::Linkage::Internal);
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (!fn.isPublic()) {
        // Only this module calls it: LLVM may drop the memref descriptor
        // fields its callers pass as constants or never read.
        fn->setAttr("llvm.linkage", internal);
        continue;
      }
      fn->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  UnitAttr::get(ctx));
      // An optimizer update writes its parameters and state in place.
      if (fn->hasAttr(zb::ZBDialect::kOptimizerAttrName))
        continue;
      // Gradient sums are updated in place.
      unsigned e = fn.getNumArguments();
      if (auto sums =
              fn->getAttrOfType<IntegerAttr>(zb::ZBDialect::kGradSumsAttrName))
        e -= sums.getInt();
      for (unsigned i = 0; i < e; ++i)
        if (isa<TensorType>(fn.getArgument(i).getType()))
          fn.setArgAttr(i,
                        bufferization::BufferizationDialect::kWritableAttrName,
                        readOnly);
    }
  }
};
} // namespace
