//===- EmulateGPU.cpp - The GPU lowering's code run on the host -----------===//
//
// Part of ZeroBubble MLIR.
//
// --zb-emulate-gpu: each kernel as sequential loops (its body cut into
// phases at its barriers and block-wide reductions), device buffers and
// the runtime's cuBLAS gemm as the host's, so that what the GPU lowering
// computes can be checked on a machine without a GPU.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/GPUPasses.h"
#include "zb/Conversion/Transforms.h"

#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

namespace zb {
#define GEN_PASS_DEF_ZBEMULATEGPU
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
        "zb-emulate-gpu: expected a synchronous launch without "
        "shared memory or private attributions");
  if (!launch.getBody().hasOneBlock())
    return launch.emitOpError(
        "zb-emulate-gpu: expected a launch body of one block");
  SmallVector<Phase> phases(1);
  for (Operation &op : launch.getBody().front().without_terminator()) {
    WalkResult nested = op.walk([&](Operation *inner) {
      if (inner != &op && isa<gpu::BarrierOp, gpu::AllReduceOp>(inner)) {
        inner->emitOpError("zb-emulate-gpu: expected at the top level "
                           "of the launch's body");
        return WalkResult::interrupt();
      }
      // Block and thread ids come from the launch's arguments; other GPU
      // ops (gpu.thread_id, shuffles, ...) have no host meaning here.
      if (isa_and_nonnull<gpu::GPUDialect>(inner->getDialect()) &&
          !isa<gpu::BarrierOp, gpu::AllReduceOp, gpu::YieldOp>(inner)) {
        inner->emitOpError("zb-emulate-gpu: not supported in a launch");
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
            "zb-emulate-gpu: expected a reduction with a region");
      phases.back().reduction = reduction;
      phases.emplace_back();
      continue;
    }
    phases.back().ops.push_back(&op);
  }
  return phases;
}

/// Whether the emulation recomputes `op` in a later phase that uses its
/// results: a pure op without regions.
static bool isRecomputable(Operation *op) {
  return op->getNumRegions() == 0 && isMemoryEffectFree(op);
}

/// The values `op` uses: its operands and what its regions use from above.
static llvm::SetVector<Value> usedValues(Operation *op) {
  llvm::SetVector<Value> used;
  for (Region &region : op->getRegions())
    getUsedValuesDefinedAbove(region, used);
  used.insert(op->operand_begin(), op->operand_end());
  return used;
}

namespace {
/// A thread's view of the values earlier phases defined: the values an
/// effectful op or one with regions defined (a load: a thread's own row
/// elements kept in registers across a row kernel's barriers) are in
/// `buffers`, a buffer of one element per thread each, at `thread`.
struct Carried {
  const llvm::MapVector<Value, Value> &buffers;
  Value thread;
};
} // namespace

/// Maps `value`, used in a phase, to a value there: its mapping, its
/// thread's element of its carried buffer, a recomputation of its pure op
/// (defined in an earlier phase of `launch`), or itself (defined outside
/// the launch); failure (reported) when an earlier phase's effectful op
/// defines it and it is not carried.
static LogicalResult materialize(OpBuilder &b, gpu::LaunchOp launch,
                                 Value value, IRMapping &map,
                                 const Carried &carried) {
  if (map.contains(value) ||
      !launch.getBody().isAncestor(value.getParentRegion()))
    return success();
  if (Value buffer = carried.buffers.lookup(value)) {
    map.map(value,
            memref::LoadOp::create(b, launch.getLoc(), buffer, carried.thread));
    return success();
  }
  Operation *def = value.getDefiningOp();
  if (!def || !isRecomputable(def))
    return (def ? def : launch.getOperation())
        ->emitOpError("zb-emulate-gpu: a value crosses a barrier or "
                      "reduction and is neither carried nor pure to "
                      "recompute");
  for (Value operand : def->getOperands())
    if (failed(materialize(b, launch, operand, map, carried)))
      return failure();
  b.clone(*def, map);
  return success();
}

/// Clones `op` into a phase's thread loop, the values it uses from earlier
/// phases recomputed or reloaded first, and stores its carried results.
static LogicalResult clonePhaseOp(OpBuilder &b, gpu::LaunchOp launch,
                                  Operation *op, IRMapping &map,
                                  const Carried &carried) {
  for (Value value : usedValues(op))
    if (failed(materialize(b, launch, value, map, carried)))
      return failure();
  Operation *clone = b.clone(*op, map);
  for (auto [result, cloned] : llvm::zip(op->getResults(), clone->getResults()))
    if (Value buffer = carried.buffers.lookup(result))
      memref::StoreOp::create(b, op->getLoc(), cloned, buffer, carried.thread);
  return success();
}

/// The results of effectful ops in `phases` that a later phase uses,
/// directly or through pure ops it recomputes.
static SetVector<Value> crossingValues(gpu::LaunchOp launch,
                                       ArrayRef<Phase> phases) {
  Block &body = launch.getBody().front();
  DenseMap<Operation *, size_t> phaseOf;
  for (auto [i, phase] : llvm::enumerate(phases)) {
    for (Operation *op : phase.ops)
      phaseOf[op] = i;
    if (phase.reduction)
      phaseOf[phase.reduction] = i;
  }
  SetVector<Value> crossing;
  DenseSet<Value> seen;
  // `value`, used in phase `user`: carried when an effectful op of an
  // earlier phase defines it; the operands of a pure one, likewise.
  std::function<void(Value, size_t)> visit = [&](Value value, size_t user) {
    Operation *def = value.getDefiningOp();
    if (!def || def->getBlock() != &body || !seen.insert(value).second)
      return;
    auto it = phaseOf.find(def);
    if (it == phaseOf.end() || it->second >= user)
      return;
    if (isa<gpu::AllReduceOp>(def))
      return;
    if (!isRecomputable(def)) {
      crossing.insert(value);
      return;
    }
    for (Value operand : def->getOperands())
      visit(operand, user);
  };
  for (auto [i, phase] : llvm::enumerate(phases)) {
    SmallVector<Operation *> ops(phase.ops);
    if (phase.reduction)
      ops.push_back(phase.reduction);
    for (Operation *op : ops)
      for (Value value : usedValues(op))
        visit(value, i);
    seen.clear();
  }
  return crossing;
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
  auto perThread = [&](Type type) {
    return memref::AllocOp::create(
               rewriter, loc, MemRefType::get({ShapedType::kDynamic}, type),
               ValueRange{threads})
        .getResult();
  };
  DenseMap<Operation *, Value> scratch;
  for (Phase &phase : *phases)
    if (phase.reduction)
      scratch[phase.reduction] = perThread(phase.reduction.getType());
  llvm::MapVector<Value, Value> carriedBuffers;
  for (Value value : crossingValues(launch, *phases))
    carriedBuffers[value] = perThread(value.getType());

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
                // The thread's place: x fastest, then y, then z.
                Value linear = arith::AddIOp::create(
                    tb, inner, tids[2],
                    arith::MulIOp::create(
                        tb, inner, block.x,
                        arith::AddIOp::create(tb, inner, tids[1],
                                              arith::MulIOp::create(tb, inner,
                                                                    block.y,
                                                                    tids[0]))));
                Carried carried{carriedBuffers, linear};
                for (Operation *op : phase.ops)
                  if (failed(clonePhaseOp(tb, launch, op, map, carried)))
                    result = failure();
                if (!phase.reduction || failed(result))
                  return;
                Value value = phase.reduction.getValue();
                if (failed(materialize(tb, launch, value, map, carried))) {
                  result = failure();
                  return;
                }
                memref::StoreOp::create(tb, inner, map.lookupOrDefault(value),
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
  for (auto &[value, buffer] : carriedBuffers)
    memref::DeallocOp::create(rewriter, loc, buffer);
  rewriter.eraseOp(launch);
  return success();
}

/// Device buffers as host ones: gpu.alloc, gpu.dealloc and gpu.memcpy as
/// their memref counterparts. A new float buffer is filled with NaN, as
/// device memory holds garbage, so that code reading what it never wrote
/// shows.
static void hostBuffers(RewriterBase &rewriter, ModuleOp module) {
  SmallVector<Operation *> ops;
  module.walk([&](Operation *op) {
    if (isa<gpu::AllocOp, gpu::DeallocOp, gpu::MemcpyOp>(op))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    rewriter.setInsertionPoint(op);
    if (auto alloc = dyn_cast<gpu::AllocOp>(op)) {
      Location loc = alloc.getLoc();
      auto host = memref::AllocOp::create(rewriter, loc, alloc.getType(),
                                          alloc.getDynamicSizes(),
                                          alloc.getSymbolOperands());
      if (auto type = dyn_cast<FloatType>(alloc.getType().getElementType())) {
        Value poison = arith::ConstantOp::create(
            rewriter, loc,
            FloatAttr::get(type, APFloat::getQNaN(type.getFloatSemantics())));
        linalg::FillOp::create(rewriter, loc, poison, host.getResult());
      }
      rewriter.replaceOp(alloc, host);
    } else if (auto dealloc = dyn_cast<gpu::DeallocOp>(op))
      rewriter.replaceOpWithNewOp<memref::DeallocOp>(dealloc,
                                                     dealloc.getMemref());
    else if (auto copy = dyn_cast<gpu::MemcpyOp>(op))
      rewriter.replaceOpWithNewOp<memref::CopyOp>(copy, copy.getSrc(),
                                                  copy.getDst());
  }
}

/// The runtime's cuBLAS gemms as their host counterparts (the same
/// signatures): the BLAS one for f32, and for bf16 products the one that
/// rounds the inputs to bf16 first.
static LogicalResult hostGemms(ModuleOp module) {
  for (auto [gpuName, hostName] :
       {std::pair{zb::kGPUGemmFn, zb::kHostGemmFn},
        std::pair{zb::kGPUGemmBF16Fn, zb::kHostGemmBF16Fn}}) {
    auto gpu = module.lookupSymbol<func::FuncOp>(gpuName);
    if (!gpu)
      continue;
    if (module.lookupSymbol(hostName))
      return gpu.emitOpError("zb-emulate-gpu: ")
             << hostName << " is declared already";
    if (failed(SymbolTable::replaceAllSymbolUses(
            gpu, StringAttr::get(module.getContext(), hostName), module)))
      return gpu.emitOpError("zb-emulate-gpu: cannot rename the gemm's calls");
    gpu.setSymName(hostName);
  }
  return success();
}

namespace {
struct EmulateGPUPass : zb::impl::ZBEmulateGPUBase<EmulateGPUPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::LaunchOp> launches;
    module.walk([&](gpu::LaunchOp launch) {
      if (!launch->getParentOfType<gpu::LaunchOp>())
        launches.push_back(launch);
    });
    IRRewriter rewriter(&getContext());
    for (gpu::LaunchOp launch : launches)
      if (failed(emulate(rewriter, launch)))
        return signalPassFailure();
    hostBuffers(rewriter, module);
    if (failed(hostGemms(module)))
      return signalPassFailure();
  }
};
} // namespace
