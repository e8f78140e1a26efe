//===- EmulateLaunches.cpp - gpu.launch as loops on the host --------------===//
//
// Part of ZeroBubble MLIR.
//
// --zb-emulate-launches: each kernel as sequential loops, its body cut into
// phases at its barriers and block-wide reductions, so that what a kernel
// computes can be checked on a machine without a GPU.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/GPUPasses.h"

#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

namespace zb {
#define GEN_PASS_DEF_ZBEMULATELAUNCHES
#include "zb/Conversion/GPUPasses.h.inc"
} // namespace zb

using namespace mlir;

namespace {
/// The ops of a launch's body between two barriers or reductions, run by
/// every thread of a block before the next phase starts; and the
/// block-wide reduction that ends the phase, if one does.
struct Phase {
  SmallVector<Operation *> ops;
  gpu::AllReduceOp reduction;
};
} // namespace

/// `launch`'s body cut into phases at its top-level barriers and
/// reductions; failure (reported) for one it cannot run.
static FailureOr<SmallVector<Phase>> splitIntoPhases(gpu::LaunchOp launch) {
  if (launch.getAsyncToken() || launch.getDynamicSharedMemorySize() ||
      launch.getNumWorkgroupAttributions() ||
      launch.getNumPrivateAttributions())
    return launch.emitOpError(
        "zb-emulate-launches: expected a synchronous launch without "
        "shared memory or private attributions");
  SmallVector<Phase> phases(1);
  for (Operation &op : launch.getBody().front().without_terminator()) {
    WalkResult nested = op.walk([&](Operation *inner) {
      if (inner != &op && isa<gpu::BarrierOp, gpu::AllReduceOp>(inner)) {
        inner->emitOpError("zb-emulate-launches: expected at the top level "
                           "of the launch's body");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (nested.wasInterrupted())
      return failure();
    if (isa<gpu::BarrierOp>(op)) {
      phases.emplace_back();
      continue;
    }
    if (auto reduction = dyn_cast<gpu::AllReduceOp>(op)) {
      if (reduction.getOp() || reduction.getBody().empty())
        return reduction.emitOpError(
            "zb-emulate-launches: expected a reduction with a region");
      phases.back().reduction = reduction;
      phases.emplace_back();
      continue;
    }
    phases.back().ops.push_back(&op);
  }
  return phases;
}

/// Maps `value`, used in a phase, to a value there: its mapping, or a
/// recomputation of its pure op (defined in an earlier phase of `launch`),
/// or itself (defined outside the launch); failure (reported) when an
/// earlier phase's effectful op defines it.
static LogicalResult materialize(OpBuilder &b, gpu::LaunchOp launch,
                                 Value value, IRMapping &map) {
  if (map.contains(value) ||
      !launch.getBody().isAncestor(value.getParentRegion()))
    return success();
  Operation *def = value.getDefiningOp();
  if (!def || def->getNumRegions() != 0 || !isMemoryEffectFree(def))
    return (def ? def : launch.getOperation())
        ->emitOpError("zb-emulate-launches: a value crosses a barrier or "
                      "reduction and is not pure to recompute");
  for (Value operand : def->getOperands())
    if (failed(materialize(b, launch, operand, map)))
      return failure();
  b.clone(*def, map);
  return success();
}

/// Clones `op` into a phase's thread loop, the values it uses from earlier
/// phases recomputed first.
static LogicalResult clonePhaseOp(OpBuilder &b, gpu::LaunchOp launch,
                                  Operation *op, IRMapping &map) {
  llvm::SetVector<Value> used;
  for (Region &region : op->getRegions())
    getUsedValuesDefinedAbove(region, used);
  used.insert(op->operand_begin(), op->operand_end());
  for (Value value : used)
    if (failed(materialize(b, launch, value, map)))
      return failure();
  b.clone(*op, map);
  return success();
}

/// Replaces `launch` by loops over its blocks and, for each phase, over its
/// threads; a reduction's values go to a buffer of one element per thread,
/// folded in thread order with its region.
static LogicalResult emulate(RewriterBase &rewriter, gpu::LaunchOp launch) {
  FailureOr<SmallVector<Phase>> phases = splitIntoPhases(launch);
  if (failed(phases))
    return failure();
  Location loc = launch.getLoc();
  rewriter.setInsertionPoint(launch);
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  Value threads = arith::MulIOp::create(
      rewriter, loc, arith::MulIOp::create(rewriter, loc, block.x, block.y),
      block.z);
  DenseMap<Operation *, Value> scratch;
  for (Phase &phase : *phases)
    if (phase.reduction)
      scratch[phase.reduction] = memref::AllocOp::create(
          rewriter, loc,
          MemRefType::get({ShapedType::kDynamic}, phase.reduction.getType()),
          ValueRange{threads});

  IRMapping base;
  gpu::KernelDim3 gridArgs = launch.getGridSize();
  gpu::KernelDim3 blockArgs = launch.getBlockSize();
  base.map(ValueRange{gridArgs.x, gridArgs.y, gridArgs.z},
           ValueRange{grid.x, grid.y, grid.z});
  base.map(ValueRange{blockArgs.x, blockArgs.y, blockArgs.z},
           ValueRange{block.x, block.y, block.z});
  gpu::KernelDim3 blockIds = launch.getBlockIds();
  gpu::KernelDim3 threadIds = launch.getThreadIds();
  LogicalResult result = success();
  scf::buildLoopNest(
      rewriter, loc, {zero, zero, zero}, {grid.z, grid.y, grid.x},
      {one, one, one}, [&](OpBuilder &b, Location nested, ValueRange ids) {
        IRMapping inBlock = base;
        inBlock.map(ValueRange{blockIds.z, blockIds.y, blockIds.x}, ids);
        for (Phase &phase : *phases) {
          scf::buildLoopNest(
              b, nested, {zero, zero, zero}, {block.z, block.y, block.x},
              {one, one, one},
              [&](OpBuilder &tb, Location inner, ValueRange tids) {
                IRMapping map = inBlock;
                map.map(ValueRange{threadIds.z, threadIds.y, threadIds.x},
                        tids);
                for (Operation *op : phase.ops)
                  if (failed(clonePhaseOp(tb, launch, op, map)))
                    result = failure();
                if (!phase.reduction || failed(result))
                  return;
                Value value = phase.reduction.getValue();
                if (failed(materialize(tb, launch, value, map))) {
                  result = failure();
                  return;
                }
                // The thread's place: x fastest, then y, then z.
                Value linear = arith::AddIOp::create(
                    tb, inner, tids[2],
                    arith::MulIOp::create(
                        tb, inner, block.x,
                        arith::AddIOp::create(tb, inner, tids[1],
                                              arith::MulIOp::create(tb, inner,
                                                                    block.y,
                                                                    tids[0]))));
                memref::StoreOp::create(tb, inner, map.lookup(value),
                                        scratch[phase.reduction], linear);
              });
          if (!phase.reduction || failed(result))
            continue;
          Value buffer = scratch[phase.reduction];
          Value first = memref::LoadOp::create(b, nested, buffer, zero);
          Block &combiner = phase.reduction.getBody().front();
          auto fold = scf::ForOp::create(
              b, nested, one, threads, one, ValueRange{first},
              [&](OpBuilder &fb, Location floc, Value t, ValueRange acc) {
                IRMapping pair;
                pair.map(combiner.getArgument(0), acc[0]);
                pair.map(combiner.getArgument(1),
                         memref::LoadOp::create(fb, floc, buffer, t));
                for (Operation &op : combiner.without_terminator())
                  fb.clone(op, pair);
                auto yield = cast<gpu::YieldOp>(combiner.getTerminator());
                scf::YieldOp::create(fb, floc,
                                     pair.lookup(yield.getValues()[0]));
              });
          inBlock.map(phase.reduction.getResult(), fold.getResult(0));
        }
      });
  if (failed(result))
    return failure();
  for (auto &[reduction, buffer] : scratch)
    memref::DeallocOp::create(rewriter, loc, buffer);
  rewriter.eraseOp(launch);
  return success();
}

namespace {
struct EmulateLaunchesPass
    : zb::impl::ZBEmulateLaunchesBase<EmulateLaunchesPass> {
  void runOnOperation() override {
    SmallVector<gpu::LaunchOp> launches;
    getOperation().walk([&](gpu::LaunchOp launch) {
      if (!launch->getParentOfType<gpu::LaunchOp>())
        launches.push_back(launch);
    });
    IRRewriter rewriter(&getContext());
    for (gpu::LaunchOp launch : launches)
      if (failed(emulate(rewriter, launch)))
        return signalPassFailure();
  }
};
} // namespace
