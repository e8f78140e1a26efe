//===- MapToGPU.cpp - Buffers to the device, linalg to mapped loops -------===//
//
// Part of ZeroBubble MLIR.
//
// Prepares bufferized host functions for --convert-parallel-loops-to-gpu:
// device buffers, one collapsed and tiled scf.parallel per linalg op.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/GPUPasses.h"

#include "RowReduction.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/Support/Debug.h"

#include <numeric>

#define DEBUG_TYPE "zb-map-to-gpu"

namespace zb {
#define GEN_PASS_DEF_ZBMAPTOGPU
#include "zb/Conversion/GPUPasses.h.inc"
} // namespace zb

using namespace mlir;
using namespace zb::detail;

/// Whether `op` is device code already (inside a launch or a GPU module).
static bool isDeviceCode(Operation *op) {
  return op->getParentOfType<gpu::LaunchOp>() ||
         op->getParentOfType<gpu::GPUModuleOp>();
}

/// The host-level ops of type `OpTy` in `fn`, in program order.
template <typename OpTy>
static SmallVector<OpTy> collectHostOps(func::FuncOp fn) {
  SmallVector<OpTy> ops;
  fn.walk([&](OpTy op) {
    if (!isDeviceCode(op))
      ops.push_back(op);
  });
  return ops;
}

/// The memref `value` views (through casts, views and reshapes).
static Value viewedBuffer(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (auto view = dyn_cast<ViewLikeOpInterface>(def)) {
      value = view.getViewSource();
      continue;
    }
    if (auto cast = dyn_cast<memref::CastOp>(def)) {
      value = cast.getSource();
      continue;
    }
    break;
  }
  return value;
}

/// Whether `global`'s uses are all loads that stay host code (outside every
/// loop a kernel will run, once the ops are loops): the loop of a step
/// function reading its action table, not a kernel's input. Such a global
/// stays in host memory.
static bool readOnHost(memref::GetGlobalOp global) {
  SmallVector<Value> values{global.getResult()};
  while (!values.empty()) {
    Value value = values.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (isa<ViewLikeOpInterface, memref::CastOp>(user)) {
        values.append(user->result_begin(), user->result_end());
        continue;
      }
      if (!isa<memref::LoadOp>(user) ||
          user->getParentOfType<scf::ParallelOp>())
        return false;
    }
  }
  return true;
}

/// Frees `buffer` on the device right before the terminator of the block
/// that holds `op`.
static void deallocAtBlockEnd(RewriterBase &rewriter, Operation *op,
                              Value buffer) {
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op->getBlock()->getTerminator());
  gpu::DeallocOp::create(rewriter, op->getLoc(), /*asyncToken=*/Type(),
                         ValueRange(), buffer);
}

/// Allocations, frees and copies on the device.
static void moveBuffersToDevice(RewriterBase &rewriter, func::FuncOp fn) {
  for (auto alloc : collectHostOps<memref::AllocOp>(fn)) {
    rewriter.setInsertionPoint(alloc);
    auto device = gpu::AllocOp::create(
        rewriter, alloc.getLoc(), alloc.getType(), /*asyncToken=*/Type(),
        ValueRange(), alloc.getDynamicSizes(), alloc.getSymbolOperands());
    rewriter.replaceOp(alloc, device.getMemref());
  }
  for (auto alloca : collectHostOps<memref::AllocaOp>(fn)) {
    rewriter.setInsertionPoint(alloca);
    auto device = gpu::AllocOp::create(
        rewriter, alloca.getLoc(), alloca.getType(), /*asyncToken=*/Type(),
        ValueRange(), alloca.getDynamicSizes(), alloca.getSymbolOperands());
    deallocAtBlockEnd(rewriter, alloca, device.getMemref());
    rewriter.replaceOp(alloca, device.getMemref());
  }
  for (auto dealloc : collectHostOps<memref::DeallocOp>(fn)) {
    rewriter.setInsertionPoint(dealloc);
    gpu::DeallocOp::create(rewriter, dealloc.getLoc(), /*asyncToken=*/Type(),
                           ValueRange(), dealloc.getMemref());
    rewriter.eraseOp(dealloc);
  }
  // A copy is a kernel, whatever the strides.
  for (auto copy : collectHostOps<memref::CopyOp>(fn)) {
    rewriter.setInsertionPoint(copy);
    linalg::makeMemRefCopyOp(rewriter, copy.getLoc(), copy.getSource(),
                             copy.getTarget());
    rewriter.eraseOp(copy);
  }
}

/// Constants stay host globals; each use reads a device copy, unless only
/// host code reads them (a step function's action table). Runs once every
/// op that becomes a kernel is a loop, so that those uses are known.
static void moveGlobalsToDevice(RewriterBase &rewriter, func::FuncOp fn) {
  for (auto global : collectHostOps<memref::GetGlobalOp>(fn)) {
    if (readOnHost(global))
      continue;
    rewriter.setInsertionPointAfter(global);
    auto device = gpu::AllocOp::create(
        rewriter, global.getLoc(), global.getType(), /*asyncToken=*/Type(),
        ValueRange(), ValueRange(), ValueRange());
    rewriter.replaceAllUsesWith(global.getResult(), device.getMemref());
    gpu::MemcpyOp::create(rewriter, global.getLoc(), /*asyncToken=*/Type(),
                          ValueRange(), device.getMemref(), global.getResult());
    deallocAtBlockEnd(rewriter, global, device.getMemref());
  }
}

/// The mapping of a one-dimensional scf.parallel to `processor`.
static gpu::ParallelLoopDimMappingAttr loopMapping(MLIRContext *ctx,
                                                   gpu::Processor processor) {
  AffineMap identity = AffineMap::getMultiDimIdentityMap(1, ctx);
  return gpu::ParallelLoopDimMappingAttr::get(ctx, processor, identity,
                                              identity);
}

/// `acc` combined with `op`'s element at loop indices `ivs` (its inputs
/// loaded there, its body but the combiner cloned).
static Value foldElement(OpBuilder &b, Location loc, linalg::LinalgOp op,
                         const RowReduction &match, ArrayRef<Value> ivs,
                         Value acc) {
  IRMapping values;
  Block *body = op.getBlock();
  for (OpOperand *input : op.getDpsInputOperands()) {
    Value element = input->get();
    if (isa<MemRefType>(element.getType()))
      element = memref::LoadOp::create(
          b, loc, element, indicesOf(op.getMatchingIndexingMap(input), ivs));
    values.map(body->getArgument(input->getOperandNumber()), element);
  }
  for (Operation &inner : body->without_terminator())
    if (&inner != match.combiner)
      b.clone(inner, values);
  return combine(b, match, acc, values.lookupOrDefault(match.element));
}

/// A row reduction as one block per row: the rows (its parallel loops,
/// collapsed) over blocks, the row's elements over `threads` threads, each
/// summing a strided share, then a tree over the block (an scf.reduce in a
/// loop mapped to threads: gpu.all_reduce), combined with the output's
/// initial value.
static void lowerRowReduction(RewriterBase &rewriter, linalg::LinalgOp op,
                              const RowReduction &match, int64_t threads) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  ArrayRef<int64_t> ranges = match.ranges;
  int64_t length = ranges.back();
  int64_t rows = match.outputElements();
  threads = std::min(threads, length);
  auto constant = [&](int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v).getResult();
  };
  auto mapping = [&](gpu::Processor processor) {
    return ArrayAttr::get(ctx, {loopMapping(ctx, processor)});
  };
  Value zero = constant(0), one = constant(1);
  Value lengthValue = constant(length), threadsValue = constant(threads);
  auto rowLoop =
      scf::ParallelOp::create(rewriter, loc, ValueRange{zero},
                              ValueRange{constant(rows)}, ValueRange{one});
  rowLoop->setAttr(gpu::getMappingAttrName(), mapping(gpu::Processor::BlockX));
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(rowLoop.getBody()->getTerminator());
  // The row's indices, delinearised (row-major over the parallel loops).
  SmallVector<Value> ivs(ranges.size());
  Value rest = rowLoop.getInductionVars()[0];
  for (int64_t d = static_cast<int64_t>(ranges.size()) - 2; d > 0; --d) {
    Value extent = constant(ranges[d]);
    ivs[d] = arith::RemUIOp::create(rewriter, loc, rest, extent);
    rest = arith::DivUIOp::create(rewriter, loc, rest, extent);
  }
  if (ranges.size() > 1)
    ivs[0] = rest;
  Value identity = arith::ConstantOp::create(rewriter, loc, match.identity);
  // The output's initial value enters through thread 0's share, read before
  // the block's tree (whose barriers come before any store).
  OpOperand *output = op.getDpsInitOperand(0);
  SmallVector<Value> outIndices =
      indicesOf(op.getMatchingIndexingMap(output), ivs);
  auto threadLoop = scf::ParallelOp::create(
      rewriter, loc, ValueRange{zero}, ValueRange{threadsValue},
      ValueRange{one}, ValueRange{identity},
      [&](OpBuilder &b, Location nested, ValueRange thread, ValueRange) {
        Value first = arith::CmpIOp::create(b, nested, arith::CmpIPredicate::eq,
                                            thread[0], zero);
        Value init =
            memref::LoadOp::create(b, nested, output->get(), outIndices);
        Value start = arith::SelectOp::create(b, nested, first, init, identity);
        // The thread's share: elements thread, thread + threads, ...
        auto share = scf::ForOp::create(
            b, nested, thread[0], lengthValue, threadsValue, ValueRange{start},
            [&](OpBuilder &fb, Location floc, Value j, ValueRange args) {
              SmallVector<Value> all(ivs);
              all.back() = j;
              scf::YieldOp::create(
                  fb, floc, foldElement(fb, floc, op, match, all, args[0]));
            });
        // The block's tree over the threads' shares.
        auto reduce = scf::ReduceOp::create(b, nested, share.getResult(0));
        Block &tree = reduce.getReductions()[0].front();
        OpBuilder tb = OpBuilder::atBlockEnd(&tree);
        scf::ReduceReturnOp::create(
            tb, nested,
            combine(tb, match, tree.getArgument(0), tree.getArgument(1)));
      });
  threadLoop->setAttr(gpu::getMappingAttrName(),
                      mapping(gpu::Processor::ThreadX));

  // Every thread stores the block's result, the same value.
  rewriter.setInsertionPoint(rowLoop.getBody()->getTerminator());
  memref::StoreOp::create(rewriter, loc, threadLoop.getResult(0), output->get(),
                          outIndices);
}

/// A column reduction (its reduced loop not the innermost: a bias
/// gradient's sum over the rows) in two kernels, so that short outputs
/// still fill the device: chunks of max(kColumnChunk, sqrt(length)) rows
/// fold into a partial result per chunk and output element (a thread each,
/// over the chunks and the output's elements, the innermost fastest), then
/// a thread per output element folds its partial results into the output's
/// initial value, in chunk order.
constexpr int64_t kColumnChunk = 64;

static void lowerColumnReduction(RewriterBase &rewriter, linalg::LinalgOp op,
                                 const RowReduction &match) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  ArrayRef<int64_t> ranges = match.ranges;
  int64_t length = ranges[match.dim];
  // Both kernels' sequential loops grow as the square root of the length.
  int64_t chunkLength = kColumnChunk;
  while (chunkLength * chunkLength < length)
    ++chunkLength;
  int64_t chunks = (length + chunkLength - 1) / chunkLength;
  int64_t elements = match.outputElements();
  SmallVector<int64_t> outer;
  for (auto [d, range] : llvm::enumerate(ranges))
    if (d != match.dim)
      outer.push_back(range);
  auto constant = [&](OpBuilder &b, int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  Value zero = constant(rewriter, 0), one = constant(rewriter, 1);
  SmallVector<Value> lower(outer.size(), zero), steps(outer.size(), one);
  SmallVector<Value> upper;
  for (int64_t range : outer)
    upper.push_back(constant(rewriter, range));
  // The loop indices of the op from the output's (`parallel`, in loop
  // order) and the reduced loop's (`reduced`); and the output element's
  // row-major position.
  auto loopIndices = [&](ValueRange parallel, Value reduced) {
    SmallVector<Value> ivs(parallel.begin(), parallel.end());
    ivs.insert(ivs.begin() + match.dim, reduced);
    return ivs;
  };
  auto position = [&](OpBuilder &b, ValueRange parallel) {
    Value linear = zero;
    for (auto [iv, range] : llvm::zip(parallel, outer))
      linear = arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, linear, constant(b, range)),
          iv);
    return linear;
  };
  Type type = match.identity.getType();
  auto partials = gpu::AllocOp::create(
      rewriter, loc, MemRefType::get({chunks, elements}, type),
      /*asyncToken=*/Type(), ValueRange(), ValueRange(), ValueRange());
  Value partial = partials.getMemref();

  SmallVector<Value> chunkLower{zero}, chunkUpper{constant(rewriter, chunks)},
      chunkSteps{one};
  chunkLower.append(lower);
  chunkUpper.append(upper);
  chunkSteps.append(steps);
  scf::ParallelOp::create(
      rewriter, loc, chunkLower, chunkUpper, chunkSteps,
      [&](OpBuilder &b, Location nested, ValueRange ivs) {
        Value chunk = ivs.front();
        ValueRange parallel = ivs.drop_front();
        Value start =
            arith::MulIOp::create(b, nested, chunk, constant(b, chunkLength));
        Value end = arith::MinUIOp::create(
            b, nested,
            arith::AddIOp::create(b, nested, start, constant(b, chunkLength)),
            constant(b, length));
        Value identity = arith::ConstantOp::create(b, nested, match.identity);
        auto fold = scf::ForOp::create(
            b, nested, start, end, one, ValueRange{identity},
            [&](OpBuilder &fb, Location floc, Value row, ValueRange acc) {
              scf::YieldOp::create(fb, floc,
                                   foldElement(fb, floc, op, match,
                                               loopIndices(parallel, row),
                                               acc[0]));
            });
        memref::StoreOp::create(b, nested, fold.getResult(0), partial,
                                ValueRange{chunk, position(b, parallel)});
      });

  OpOperand *output = op.getDpsInitOperand(0);
  scf::ParallelOp::create(
      rewriter, loc, lower, upper, steps,
      [&](OpBuilder &b, Location nested, ValueRange parallel) {
        SmallVector<Value> outIndices = indicesOf(
            op.getMatchingIndexingMap(output), loopIndices(parallel, zero));
        Value init =
            memref::LoadOp::create(b, nested, output->get(), outIndices);
        Value at = position(b, parallel);
        auto fold = scf::ForOp::create(
            b, nested, zero, constant(b, chunks), one, ValueRange{init},
            [&](OpBuilder &fb, Location floc, Value chunk, ValueRange acc) {
              Value element = memref::LoadOp::create(fb, floc, partial,
                                                     ValueRange{chunk, at});
              scf::YieldOp::create(fb, floc,
                                   combine(fb, match, acc[0], element));
            });
        memref::StoreOp::create(b, nested, fold.getResult(0), output->get(),
                                outIndices);
      });
  gpu::DeallocOp::create(rewriter, loc, /*asyncToken=*/Type(), ValueRange(),
                         partial);
}

/// Rows shorter than this keep one thread per row.
constexpr int64_t kMinBlockRowLength = 32;

/// Column reductions of fewer rows than this keep one thread per output
/// element.
constexpr int64_t kMinColumns = 2 * kColumnChunk;

/// Whether `op`, a column reduction, takes the two-kernel form: it would
/// leave the device idle as a thread per output element (fewer of them than
/// 64 blocks' threads); each output element is one of its parallel
/// iterations and no input views the output; it sits in the function's
/// body (not in a loop that may then run in one thread).
static bool columnReductionPays(linalg::LinalgOp op, const RowReduction &match,
                                int64_t blockSize) {
  OpOperand *output = op.getDpsInitOperand(0);
  if (match.outputElements() >= 64 * blockSize ||
      !isa<func::FuncOp>(op->getParentOp()) ||
      op.getMatchingIndexingMap(output).getNumResults() + 1 !=
          match.ranges.size())
    return false;
  Value written = viewedBuffer(output->get());
  return llvm::none_of(op.getDpsInputOperands(), [&](OpOperand *input) {
    return viewedBuffer(input->get()) == written;
  });
}

/// Lowers each linalg op to one scf.parallel over its parallel dimensions
/// (a one-iteration loop when it has none) with its reductions inside; a
/// reduction of long rows with a tree-shaped combiner to a block per row
/// (lowerRowReduction), one of many rows into few elements to two kernels
/// (lowerColumnReduction).
static LogicalResult lowerLinalgToParallelLoops(RewriterBase &rewriter,
                                                func::FuncOp fn,
                                                int64_t blockSize) {
  for (auto op : collectHostOps<linalg::LinalgOp>(fn)) {
    if (!op.hasPureBufferSemantics())
      return op->emitOpError("zb-map-to-gpu: expected an op on buffers");
    if (std::optional<RowReduction> match =
            matchRowReduction(op, kMinBlockRowLength)) {
      lowerRowReduction(rewriter, op, *match, blockSize);
      rewriter.eraseOp(op);
      continue;
    }
    if (std::optional<RowReduction> match = matchReduction(op, kMinColumns);
        match && columnReductionPays(op, *match, blockSize)) {
      lowerColumnReduction(rewriter, op, *match);
      rewriter.eraseOp(op);
      continue;
    }
    Location loc = op.getLoc();
    if (op.getNumParallelLoops() == 0) {
      rewriter.setInsertionPoint(op);
      Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
      Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
      auto wrapper = scf::ParallelOp::create(rewriter, loc, ValueRange{zero},
                                             ValueRange{one}, ValueRange{one});
      rewriter.moveOpBefore(op, wrapper.getBody()->getTerminator());
    }
    rewriter.setInsertionPoint(op);
    if (failed(linalg::linalgOpToParallelLoops(rewriter, op)))
      return op->emitOpError("zb-map-to-gpu: cannot lower to loops");
    rewriter.eraseOp(op);
  }
  return success();
}

/// Whether `op` can run inside a kernel as it is: scalar arithmetic, math,
/// structured control flow and loads and stores of buffers.
static bool isKernelSafe(Operation *op) {
  if (isa<memref::LoadOp, memref::StoreOp>(op))
    return true;
  StringRef dialect = op->getDialect() ? op->getDialect()->getNamespace() : "";
  return dialect == "arith" || dialect == "math" || dialect == "scf" ||
         dialect == "index";
}

/// Runs each outermost host-level scf.for that reads or writes buffers (the
/// scatter-add of a gather's gradient, say: sequential, since indices may
/// repeat) in one GPU thread: wraps it in a one-iteration scf.parallel.
/// Loops that carry values or hold anything a kernel cannot run stay, and
/// checkNoHostAccess names them.
static void wrapSequentialBufferLoops(RewriterBase &rewriter, func::FuncOp fn) {
  SmallVector<scf::ForOp> roots;
  for (auto loop : collectHostOps<scf::ForOp>(fn)) {
    if (loop->getParentOfType<scf::ParallelOp>() ||
        loop->getParentOfType<scf::ForOp>() || loop.getNumResults() != 0)
      continue;
    bool touches = false, safe = true;
    loop.getBody()->walk([&](Operation *op) {
      touches |= isa<memref::LoadOp, memref::StoreOp>(op);
      safe &= isKernelSafe(op);
    });
    if (touches && safe)
      roots.push_back(loop);
  }
  for (scf::ForOp loop : roots) {
    rewriter.setInsertionPoint(loop);
    Location loc = loop.getLoc();
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    auto wrapper = scf::ParallelOp::create(rewriter, loc, ValueRange{zero},
                                           ValueRange{one}, ValueRange{one});
    rewriter.moveOpBefore(loop, wrapper.getBody()->getTerminator());
  }
}

/// Collapses each outermost host-level scf.parallel to one dimension, tiles
/// it by `blockSize` and maps tiles to blocks, iterations to threads.
static void tileAndMapParallelLoops(RewriterBase &rewriter, func::FuncOp fn,
                                    int64_t blockSize) {
  SmallVector<scf::ParallelOp> roots;
  // Loops mapped already (a block per row) stay as they are.
  for (auto loop : collectHostOps<scf::ParallelOp>(fn))
    if (!loop->getParentOfType<scf::ParallelOp>() &&
        !loop->hasAttr(gpu::getMappingAttrName()))
      roots.push_back(loop);
  MLIRContext *ctx = fn.getContext();
  auto mapping = [&](gpu::Processor processor) {
    return loopMapping(ctx, processor);
  };
  for (scf::ParallelOp loop : roots) {
    if (loop.getNumLoops() > 1) {
      // The collapsed loop replaces `loop` right before its successor.
      Operation *next = loop->getNextNode();
      std::vector<unsigned> dims(loop.getNumLoops());
      std::iota(dims.begin(), dims.end(), 0);
      rewriter.setInsertionPoint(loop);
      collapseParallelLoops(rewriter, loop, {dims});
      loop = cast<scf::ParallelOp>(next->getPrevNode());
    }
    auto [outer, inner] =
        scf::tileParallelLoop(loop, {blockSize}, /*noMinMaxBounds=*/true);
    outer->setAttr(gpu::getMappingAttrName(),
                   ArrayAttr::get(ctx, {mapping(gpu::Processor::BlockX)}));
    inner->setAttr(gpu::getMappingAttrName(),
                   ArrayAttr::get(ctx, {mapping(gpu::Processor::ThreadX)}));
    // Loops nested deeper (none come from linalg) run in each thread.
    inner.getBody()->walk([&](scf::ParallelOp nested) {
      SmallVector<Attribute> sequential(nested.getNumLoops(),
                                        mapping(gpu::Processor::Sequential));
      nested->setAttr(gpu::getMappingAttrName(),
                      ArrayAttr::get(ctx, sequential));
    });
  }
}

/// Fails on a host-level load or store of device memory, which the host
/// cannot read (host globals kept by readOnHost are host memory).
static LogicalResult checkNoHostAccess(func::FuncOp fn) {
  WalkResult result = fn.walk([&](Operation *op) {
    if (!isa<memref::LoadOp, memref::StoreOp>(op) || isDeviceCode(op) ||
        op->getParentOfType<scf::ParallelOp>())
      return WalkResult::advance();
    if (auto load = dyn_cast<memref::LoadOp>(op))
      if (viewedBuffer(load.getMemRef()).getDefiningOp<memref::GetGlobalOp>())
        return WalkResult::advance();
    op->emitOpError("zb-map-to-gpu: host code accesses a device buffer "
                    "outside a kernel");
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

namespace {
struct MapToGPUPass : zb::impl::ZBMapToGPUBase<MapToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    if (blockSize < 1 || blockSize > 1024) {
      getOperation().emitError("zb-map-to-gpu: block-size ")
          << blockSize.getValue() << " is not in [1, 1024]";
      return signalPassFailure();
    }
    IRRewriter rewriter(&getContext());
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      moveBuffersToDevice(rewriter, fn);
      if (failed(lowerLinalgToParallelLoops(rewriter, fn, blockSize)))
        return signalPassFailure();
      wrapSequentialBufferLoops(rewriter, fn);
      moveGlobalsToDevice(rewriter, fn);
      if (failed(checkNoHostAccess(fn)))
        return signalPassFailure();
      tileAndMapParallelLoops(rewriter, fn, blockSize);
    }
  }
};
} // namespace
