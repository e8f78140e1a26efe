//===- KeepRank.cpp - One rank's step function and what it uses ----------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"
#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

namespace zb {
#define GEN_PASS_DEF_ZBKEEPRANK
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {
struct KeepRankPass : zb::impl::ZBKeepRankBase<KeepRankPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> others;
    bool found = false;
    for (auto fn : module.getOps<func::FuncOp>()) {
      auto attr = fn->getAttrOfType<IntegerAttr>(zb::ZBDialect::kRankAttrName);
      if (!attr)
        continue;
      if (attr.getInt() == rank)
        found = true;
      else
        others.push_back(fn);
    }
    if (!found) {
      module.emitError("--zb-keep-rank: no step function for rank ")
          << rank.getValue() << " (see --zb-lower-to-runtime)";
      return signalPassFailure();
    }
    for (func::FuncOp fn : others)
      fn.erase();
    OpPassManager pm(ModuleOp::getOperationName());
    pm.addPass(createSymbolDCEPass());
    if (failed(runPipeline(pm, module)))
      return signalPassFailure();
  }
};
} // namespace
