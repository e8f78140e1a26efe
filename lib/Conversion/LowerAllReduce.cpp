//===- LowerAllReduce.cpp - The --zb-lower-all-reduce pass ----------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/GPUPasses.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace zb {
#define GEN_PASS_DEF_ZBLOWERALLREDUCE
#include "zb/Conversion/GPUPasses.h.inc"
} // namespace zb

using namespace mlir;

namespace {
struct LowerAllReducePass : zb::impl::ZBLowerAllReduceBase<LowerAllReducePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateGpuAllReducePatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
