//===- StripCuts.cpp - Remove pipe.cut markers ----------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Passes.h"

#include "zb/Dialect/Pipe/PipeOps.h"

namespace zb {
#define GEN_PASS_DEF_ZBSTRIPCUTS
#include "zb/Transforms/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {
struct StripCutsPass : zb::impl::ZBStripCutsBase<StripCutsPass> {
  void runOnOperation() override {
    getOperation()->walk([](zb::pipe::CutOp cut) {
      cut.getResult().replaceAllUsesWith(cut.getInput());
      cut.erase();
    });
  }
};
} // namespace
