//===- UniqueResults.cpp - Return each value of a function once -----------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"
#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/BitVector.h"

namespace zb {
#define GEN_PASS_DEF_ZBUNIQUERESULTS
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;

/// A public function keeps its signature (callers outside the module rely
/// on it): each repeat of a returned buffer becomes a copy of its own.
static void copyRepeatedResults(func::FuncOp fn) {
  fn.walk([&](func::ReturnOp ret) {
    OpBuilder b(ret);
    for (unsigned i = 0, e = ret.getNumOperands(); i < e; ++i) {
      Value v = ret.getOperand(i);
      auto type = dyn_cast<MemRefType>(v.getType());
      if (!type || !type.hasStaticShape() ||
          !llvm::is_contained(ret.getOperands().take_front(i), v))
        continue;
      Value copy = memref::AllocOp::create(
          b, ret.getLoc(),
          MemRefType::get(type.getShape(), type.getElementType()));
      memref::CopyOp::create(b, ret.getLoc(), v, copy);
      if (copy.getType() != type)
        copy = memref::CastOp::create(b, ret.getLoc(), type, copy);
      ret.setOperand(i, copy);
    }
  });
}

/// A buffer returned through a reshape (an elementwise op on a gemm's
/// (token, feature) rows whose sum is returned as (batch, token, feature))
/// is allocated in the returned shape instead, its writers given the
/// reshape's inverse as a view, so that it becomes an out-parameter as it
/// is, without a copy.
static void allocateInReturnedShape(func::FuncOp fn) {
  fn.walk([&](func::ReturnOp ret) {
    for (Value v : ret.getOperands()) {
      Operation *reshape = v.getDefiningOp();
      if (!isa_and_nonnull<memref::ExpandShapeOp, memref::CollapseShapeOp>(
              reshape))
        continue;
      auto alloc = reshape->getOperand(0).getDefiningOp<memref::AllocOp>();
      auto type = cast<MemRefType>(v.getType());
      if (!alloc || alloc->getNumOperands() != 0 ||
          !alloc.getType().getLayout().isIdentity() ||
          !type.getLayout().isIdentity() || !type.hasStaticShape())
        continue;
      OpBuilder b(alloc);
      Location loc = alloc.getLoc();
      auto fresh =
          memref::AllocOp::create(b, loc, type, alloc.getAlignmentAttr());
      Value view;
      if (auto expand = dyn_cast<memref::ExpandShapeOp>(reshape))
        view = memref::CollapseShapeOp::create(
            b, loc, fresh, expand.getReassociationIndices());
      else
        view = memref::ExpandShapeOp::create(
            b, loc, alloc.getType(), fresh,
            cast<memref::CollapseShapeOp>(reshape).getReassociationIndices());
      alloc.replaceAllUsesWith(view);
      v.replaceAllUsesWith(fresh.getResult());
      reshape->erase();
      alloc.erase();
    }
  });
}

/// A function's last `count` results that bufferization updated in place:
/// they return its own arguments (the last `count` of them when `matching`),
/// and stop being returned. Fails (with an error naming `what`) where such
/// a result is not its argument, which would leave the caller's buffers
/// unchanged.
static LogicalResult dropInPlaceResults(func::FuncOp fn, unsigned count,
                                        bool matching, StringRef what) {
  SmallVector<func::ReturnOp> returns;
  fn.walk([&](func::ReturnOp r) { returns.push_back(r); });
  Block &entry = fn.getBody().front();
  unsigned firstResult = fn.getNumResults() - count;
  unsigned firstArg = matching ? fn.getNumArguments() - count : 0;
  for (func::ReturnOp ret : returns)
    for (unsigned i = firstResult, e = ret.getNumOperands(); i < e; ++i) {
      auto arg = dyn_cast<BlockArgument>(ret.getOperand(i));
      if (!arg || arg.getOwner() != &entry ||
          (matching && arg.getArgNumber() != firstArg + i - firstResult))
        return fn.emitError(what)
               << ": result " << i << " was not updated in place (it is not "
               << (matching ? "its argument" : "one of the arguments") << ")";
    }
  for (func::ReturnOp ret : returns)
    ret->setOperands(ret.getOperands().take_front(firstResult));
  fn.setFunctionType(
      FunctionType::get(fn.getContext(), fn.getArgumentTypes(),
                        fn.getResultTypes().take_front(firstResult)));
  return success();
}

namespace {
struct UniqueResultsPass : zb::impl::ZBUniqueResultsBase<UniqueResultsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbols;
    SymbolUserMap users(symbols, module);
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      allocateInReturnedShape(fn);
      // An optimizer update (--zb-emit-optimizer) returns its parameters
      // and state, a gradient function its sums (`zb.grad_sums`).
      if (fn->hasAttr(zb::ZBDialect::kOptimizerAttrName)) {
        if (failed(dropInPlaceResults(fn, fn.getNumResults(),
                                      /*matching=*/false, "optimizer update")))
          return signalPassFailure();
        continue;
      }
      if (auto sums = fn->getAttrOfType<IntegerAttr>(
              zb::ZBDialect::kGradSumsAttrName)) {
        if (sums.getInt() > fn.getNumResults()) {
          fn.emitError("gradient sums: ") << sums.getInt() << " sums but "
                                          << fn.getNumResults() << " results";
          return signalPassFailure();
        }
        if (failed(dropInPlaceResults(fn, sums.getInt(), /*matching=*/true,
                                      "gradient sums")))
          return signalPassFailure();
        continue;
      }
      if (fn.isPublic()) {
        copyRepeatedResults(fn);
        continue;
      }
      SmallVector<func::ReturnOp> returns;
      fn.walk([&](func::ReturnOp r) { returns.push_back(r); });
      if (returns.size() != 1)
        continue;
      func::ReturnOp ret = returns.front();
      // firstOf[i]: the first result returning the same value as result i.
      SmallVector<unsigned> firstOf;
      llvm::BitVector repeated(ret.getNumOperands());
      for (unsigned i = 0, e = ret.getNumOperands(); i < e; ++i) {
        unsigned first = i;
        for (unsigned j = 0; j < i; ++j)
          if (ret.getOperand(j) == ret.getOperand(i)) {
            first = j;
            break;
          }
        firstOf.push_back(first);
        if (first != i)
          repeated.set(i);
      }
      if (repeated.none())
        continue;
      for (Operation *user : users.getUsers(fn)) {
        auto call = dyn_cast<func::CallOp>(user);
        if (!call) {
          fn.emitError("has a repeated result and a use that is not a call");
          return signalPassFailure();
        }
        for (unsigned i : repeated.set_bits())
          call.getResult(i).replaceAllUsesWith(call.getResult(firstOf[i]));
        OpBuilder b(call);
        SmallVector<Type> types;
        for (unsigned i = 0, e = call.getNumResults(); i < e; ++i)
          if (!repeated.test(i))
            types.push_back(call.getResult(i).getType());
        auto newCall = func::CallOp::create(b, call.getLoc(), fn.getSymName(),
                                            types, call.getOperands());
        unsigned next = 0;
        for (unsigned i = 0, e = call.getNumResults(); i < e; ++i)
          if (!repeated.test(i))
            call.getResult(i).replaceAllUsesWith(newCall.getResult(next++));
        call.erase();
      }
      SmallVector<Value> kept;
      for (unsigned i = 0, e = ret.getNumOperands(); i < e; ++i)
        if (!repeated.test(i))
          kept.push_back(ret.getOperand(i));
      ret->setOperands(kept);
      fn.setFunctionType(FunctionType::get(&getContext(), fn.getArgumentTypes(),
                                           ValueRange(kept).getTypes()));
    }
  }
};
} // namespace
