//===- OutlineLoopNests.cpp - Functions of fewer loops --------------------===//
//
// Part of ZeroBubble MLIR.
//
// LLVM's loop passes take time growing with the square of a function's
// loops; a model's whole gradient as one function of thousands of loop
// nests took minutes to optimise. This pass cuts such functions into parts
// of a bounded number of loops, each a function of its own.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace zb {
#define GEN_PASS_DEF_ZBOUTLINELOOPNESTS
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {

/// The scf.for ops in `op`, itself included.
int64_t countLoops(Operation *op) {
  int64_t count = 0;
  op->walk([&](scf::ForOp) { ++count; });
  return count;
}

/// Whether `op` may stay in the function while the ops around it move into
/// a part called after them: it defines values, holds no region, and has
/// no effect but allocating (memref.alloc, a view, index arithmetic).
bool mayStayBehind(Operation *op) {
  if (op->getNumRegions() != 0 || op->getNumResults() == 0)
    return false;
  if (isMemoryEffectFree(op))
    return true;
  auto interface = dyn_cast<MemoryEffectOpInterface>(op);
  if (!interface)
    return false;
  SmallVector<MemoryEffects::EffectInstance> effects;
  interface.getEffects(effects);
  return llvm::all_of(effects, [](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Allocate>(e.getEffect());
  });
}

struct OutlineLoopNestsPass
    : zb::impl::ZBOutlineLoopNestsBase<OutlineLoopNestsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (loops < 1) {
      module.emitError("--zb-outline-loop-nests needs 'loops' of at least "
                       "1, got ")
          << static_cast<int64_t>(loops);
      return signalPassFailure();
    }
    SymbolTable symbols(module);
    for (func::FuncOp fn : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (!fn.isExternal() && fn.getBody().hasOneBlock() &&
          countLoops(fn) > loops)
        cut(fn, symbols);
  }

  /// Moves runs of `fn`'s top-level ops of about `loops` loops each into
  /// functions of their own.
  void cut(func::FuncOp fn, SymbolTable &symbols) {
    Block &body = fn.getBody().front();
    SmallVector<Operation *> run;
    llvm::SmallPtrSet<Operation *, 32> inRun;
    int64_t runLoops = 0;
    int64_t parts = 0;
    for (Operation &op :
         llvm::make_early_inc_range(body.without_terminator())) {
      bool readsRun = llvm::any_of(op.getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return def && inRun.contains(def);
      });
      if (!readsRun && mayStayBehind(&op))
        continue;
      run.push_back(&op);
      inRun.insert(&op);
      runLoops += countLoops(&op);
      if (runLoops >= loops) {
        outline(fn, run, inRun, parts++, symbols);
        run.clear();
        inRun.clear();
        runLoops = 0;
      }
    }
  }

  /// Moves the ops of `run` (in order) into a new private function, called
  /// after the last of them; what they define that is read after them
  /// becomes its results.
  void outline(func::FuncOp fn, ArrayRef<Operation *> run,
               const llvm::SmallPtrSetImpl<Operation *> &inRun, int64_t index,
               SymbolTable &symbols) {
    Block &body = fn.getBody().front();
    auto definedInRun = [&](Value v) {
      Operation *owner = isa<BlockArgument>(v)
                             ? cast<BlockArgument>(v).getOwner()->getParentOp()
                             : v.getDefiningOp();
      Operation *top = owner ? body.findAncestorOpInBlock(*owner) : nullptr;
      return top && inRun.contains(top);
    };
    // What the run reads from before it: constants are cloned into the
    // part, the rest become its arguments.
    llvm::SetVector<Value> read;
    for (Operation *op : run)
      op->walk([&](Operation *inner) {
        for (Value v : inner->getOperands())
          if (!definedInRun(v))
            read.insert(v);
      });
    SmallVector<Value> arguments;
    SmallVector<Operation *> constants;
    for (Value v : read) {
      Operation *def = v.getDefiningOp();
      if (def && def->hasTrait<OpTrait::ConstantLike>())
        constants.push_back(def);
      else
        arguments.push_back(v);
    }
    // What the ops after the run read of it.
    SmallVector<Value> results;
    for (Operation *op : run)
      for (Value v : op->getResults())
        if (llvm::any_of(v.getUsers(), [&](Operation *user) {
              return !inRun.contains(body.findAncestorOpInBlock(*user));
            }))
          results.push_back(v);

    MLIRContext *ctx = fn.getContext();
    Location loc = fn.getLoc();
    auto part = func::FuncOp::create(
        loc, (fn.getSymName() + "_part" + Twine(index)).str(),
        FunctionType::get(ctx, ValueRange(arguments).getTypes(),
                          ValueRange(results).getTypes()));
    part.setPrivate();
    // LLVM's inliner would make the function whole again.
    Builder attrs(ctx);
    part->setAttr("passthrough",
                  attrs.getArrayAttr({attrs.getStringAttr("noinline")}));
    symbols.insert(part, std::next(fn->getIterator()));
    Block *entry = part.addEntryBlock();

    OpBuilder b(run.back()->getBlock(), std::next(run.back()->getIterator()));
    auto call = func::CallOp::create(b, run.back()->getLoc(), part, arguments);
    for (auto [value, result] : llvm::zip(results, call.getResults()))
      value.replaceUsesWithIf(result, [&](OpOperand &use) {
        return !inRun.contains(body.findAncestorOpInBlock(*use.getOwner()));
      });

    OpBuilder inner = OpBuilder::atBlockEnd(entry);
    IRMapping map;
    for (Operation *constant : constants)
      map.map(constant->getResults(), inner.clone(*constant)->getResults());
    for (auto [value, argument] : llvm::zip(arguments, entry->getArguments()))
      map.map(value, argument);
    for (Operation *op : run)
      op->moveBefore(entry, entry->end());
    for (Value v : read)
      v.replaceUsesWithIf(map.lookup(v), [&](OpOperand &use) {
        return part->isProperAncestor(use.getOwner());
      });
    inner.setInsertionPointToEnd(entry);
    func::ReturnOp::create(inner, loc, results);
  }
};

} // namespace
