//===- RunningStats.cpp - The --zb-lower-running-stats pass ---------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"
#include "zb/Conversion/Transforms.h"

#include "zb/Dialect/Pipe/PipeOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

namespace zb {
#define GEN_PASS_DEF_ZBLOWERRUNNINGSTATS
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;
using namespace zb;

/// The runtime function that records a value of element type `elt`.
static StringRef recordFunctionName(Type elt) {
  return elt.isF64() ? "zbrt_record_stat_f64" : "zbrt_record_stat_f32";
}

namespace {
struct LowerRunningStatsPass
    : zb::impl::ZBLowerRunningStatsBase<LowerRunningStatsPass> {
  using ZBLowerRunningStatsBase::ZBLowerRunningStatsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<pipe::RunningStatOp> stats;
    module.walk([&](pipe::RunningStatOp op) { stats.push_back(op); });
    if (stats.empty())
      return;
    if (target != "cpu") {
      stats.front().emitError("running statistic '")
          << stats.front().getBuffer()
          << "' is not supported on target=" << target
          << " (only the CPU lowering keeps running statistics)";
      return signalPassFailure();
    }

    MLIRContext *ctx = &getContext();
    SymbolTable symbols(module);
    auto i8 = IntegerType::get(ctx, 8);
    // One global per buffer name, shared by every record of it (a model
    // and its gradient function both record).
    llvm::StringMap<memref::GlobalOp> names;
    for (pipe::RunningStatOp op : stats) {
      StringRef buffer = op.getBuffer();
      memref::GlobalOp &global = names[buffer];
      if (!global) {
        auto type = MemRefType::get({static_cast<int64_t>(buffer.size())}, i8);
        auto bytes = DenseElementsAttr::get(
            RankedTensorType::get(type.getShape(), i8),
            ArrayRef<char>(buffer.data(), buffer.size()));
        auto builder = OpBuilder::atBlockBegin(module.getBody());
        global = memref::GlobalOp::create(
            builder, op.getLoc(), "__zb_running_stat",
            builder.getStringAttr("private"), type, bytes, /*constant=*/true,
            /*alignment=*/nullptr);
        symbols.insert(global);
      }

      auto type = cast<RankedTensorType>(op.getValue().getType());
      Type elt = type.getElementType();
      StringRef callee = recordFunctionName(elt);
      auto moduleStart = OpBuilder::atBlockBegin(module.getBody());
      declareRuntimeFunction(moduleStart, module, callee,
                             FunctionType::get(ctx,
                                               {UnrankedMemRefType::get(elt, 0),
                                                UnrankedMemRefType::get(i8, 0)},
                                               {}),
                             /*cInterface=*/true);

      OpBuilder b(op);
      Location loc = op.getLoc();
      // The value's buffer as it is (read only: no copy), whatever its
      // layout.
      Value valueBuffer = bufferization::ToBufferOp::create(
          b, loc, bufferization::getMemRefTypeWithFullyDynamicLayout(type),
          op.getValue(), /*read_only=*/true);
      Value value = memref::CastOp::create(
          b, loc, UnrankedMemRefType::get(elt, 0), valueBuffer);
      Value nameBuf = memref::GetGlobalOp::create(b, loc, global.getType(),
                                                  global.getSymName());
      Value name = memref::CastOp::create(
          b, loc, UnrankedMemRefType::get(i8, 0), nameBuf);
      func::CallOp::create(b, loc, callee, TypeRange(),
                           ValueRange{value, name});
      op.erase();
    }
  }
};
} // namespace
