//===- ResultsToSlots.cpp - Calls write results into arena slots ----------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"

#include "StepFunctions.h"

namespace zb {
#define GEN_PASS_DEF_ZBRESULTSTOSLOTS
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;

/// Whether `copy` copies into a marked arena slot that is defined before
/// `call` and not used by it.
static memref::ViewOp slotOf(memref::CopyOp copy, func::CallOp call) {
  auto view = copy.getTarget().getDefiningOp<memref::ViewOp>();
  if (!view || !view->hasAttr(zb::detail::kOutSlotAttr) ||
      view.getType() != copy.getSource().getType() ||
      view->getBlock() != call->getBlock() || !view->isBeforeInBlock(call) ||
      llvm::is_contained(call->getOperands(), view.getResult()))
    return {};
  return view;
}

/// Rewrites `alloc; call(..., alloc, ...); copy(alloc, view)...` into
/// `call(..., view, ...)` (and copies from that view to any further
/// slots), where `view` is a marked arena slot defined before the call and
/// of the alloc's type, and nothing between the call and the copies uses
/// either. Returns whether it did.
static bool forwardToSlot(memref::AllocOp alloc) {
  if (!alloc.getDynamicSizes().empty())
    return false;
  func::CallOp call;
  SmallVector<memref::CopyOp> copies;
  for (Operation *user : alloc->getUsers()) {
    if (auto copy = dyn_cast<memref::CopyOp>(user);
        copy && copy.getSource() == alloc.getResult()) {
      copies.push_back(copy);
      continue;
    }
    auto c = dyn_cast<func::CallOp>(user);
    if (!c || call)
      return false;
    call = c;
  }
  if (!call || copies.empty())
    return false;
  SmallVector<memref::ViewOp> views;
  for (memref::CopyOp copy : copies)
    if (copy->getBlock() != call->getBlock() || !call->isBeforeInBlock(copy))
      return false;
  llvm::sort(copies, [](memref::CopyOp a, memref::CopyOp b) {
    return a->isBeforeInBlock(b);
  });
  for (memref::CopyOp copy : copies) {
    memref::ViewOp view = slotOf(copy, call);
    if (!view)
      return false;
    views.push_back(view);
  }
  // Nothing between the call and the last copy may touch the slots.
  for (Operation *op = call->getNextNode(); op != copies.back();
       op = op->getNextNode()) {
    if (isa<memref::CopyOp>(op) && llvm::is_contained(copies, op))
      continue;
    bool touches = false;
    op->walk([&](Operation *nested) {
      for (memref::ViewOp view : views)
        touches |= llvm::is_contained(nested->getOperands(), view.getResult());
    });
    if (touches)
      return false;
  }
  Value first = views.front().getResult();
  alloc.getResult().replaceAllUsesExcept(
      first, SmallPtrSet<Operation *, 4>(copies.begin(), copies.end()));
  copies.front()->erase();
  for (memref::CopyOp copy : ArrayRef(copies).drop_front())
    copy.getSourceMutable().assign(first);
  alloc->erase();
  return true;
}

namespace {
struct ResultsToSlotsPass : zb::impl::ZBResultsToSlotsBase<ResultsToSlotsPass> {
  void runOnOperation() override {
    SmallVector<memref::AllocOp> allocs;
    getOperation().walk([&](memref::AllocOp op) { allocs.push_back(op); });
    for (memref::AllocOp alloc : allocs)
      (void)forwardToSlot(alloc);
    // A sum updated in place is copied onto itself.
    getOperation().walk([](memref::CopyOp copy) {
      if (copy.getSource() == copy.getTarget())
        copy->erase();
    });
  }
};
} // namespace
