//===- DeallocateBuffers.cpp - Free allocations after their last use ------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SetVector.h"

namespace zb {
#define GEN_PASS_DEF_ZBDEALLOCATEBUFFERS
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;

/// Whether a value may carry (a view of) a buffer.
static bool mayAlias(Value v) {
  return isa<BaseMemRefType, TensorType>(v.getType());
}

/// Inserts the dealloc of `alloc` after the last use of any of its aliases
/// in its own block. Fails (with a diagnostic) when an alias escapes.
static LogicalResult deallocate(memref::AllocOp alloc) {
  Block *block = alloc->getBlock();
  llvm::SetVector<Value> aliases;
  aliases.insert(alloc.getResult());
  Operation *last = alloc;
  for (unsigned i = 0; i < aliases.size(); ++i) {
    for (OpOperand &use : aliases[i].getUses()) {
      Operation *user = use.getOwner();
      if (isa<memref::DeallocOp>(user))
        return success(); // Already freed by the input.
      if (user->hasTrait<OpTrait::IsTerminator>())
        return user->emitOpError("takes a buffer allocated at ")
               << alloc.getLoc()
               << " out of its block; --zb-deallocate-buffers handles "
                  "buffers that stay in the block that allocates them";
      Operation *ancestor = block->findAncestorOpInBlock(*user);
      if (!ancestor)
        return user->emitOpError("uses a buffer outside the block that "
                                 "allocates it");
      if (last->isBeforeInBlock(ancestor))
        last = ancestor;
      for (Value result : user->getResults())
        if (mayAlias(result))
          aliases.insert(result);
    }
  }
  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  memref::DeallocOp::create(b, alloc.getLoc(), alloc.getResult());
  return success();
}

namespace {
struct DeallocateBuffersPass
    : zb::impl::ZBDeallocateBuffersBase<DeallocateBuffersPass> {
  void runOnOperation() override {
    SmallVector<memref::AllocOp> allocs;
    getOperation().walk([&](memref::AllocOp op) { allocs.push_back(op); });
    for (memref::AllocOp alloc : allocs)
      if (failed(deallocate(alloc)))
        return signalPassFailure();
  }
};
} // namespace
