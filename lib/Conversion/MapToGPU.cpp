//===- MapToGPU.cpp - Buffers to the device, linalg to mapped loops -------===//
//
// Part of ZeroBubble MLIR.
//
// Prepares bufferized host functions for --convert-parallel-loops-to-gpu:
// device buffers, one collapsed and tiled scf.parallel per linalg op, and a
// gpu.launch of a block per row for each long row reduction with the
// row-wise ops around it (a row kernel).
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
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/Support/Debug.h"

#include <map>
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
      if (!isa<memref::LoadOp>(user) || isDeviceCode(user) ||
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

namespace {
/// How a thread block runs one op of a row kernel for its row.
enum class StageKind {
  /// An op over the rows alone (a fill of a row's statistic): thread 0.
  Row,
  /// An op with one more parallel loop: the threads stride over it.
  Elements,
  /// A reduction of that loop: strided shares, then a block-wide tree.
  Reduction,
};

/// One op of a row kernel.
struct Stage {
  linalg::LinalgOp op;
  StageKind kind;
  std::optional<RowReduction> reduction;
  /// The range of the loop inside the row (1 for a Row stage).
  int64_t length = 1;
};

/// Ops that run as one kernel with a thread block per row: the loop ranges
/// that every op starts with (the rows), and the ops in program order.
struct RowKernel {
  SmallVector<int64_t> rows;
  SmallVector<Stage> stages;

  /// The rows' count: the product of their loop ranges.
  int64_t numRows() const {
    int64_t count = 1;
    for (int64_t range : rows)
      count *= range;
    return count;
  }
};
} // namespace

/// `op` as a stage of a kernel over `rows`: on buffers with static ranges,
/// its loops the rows (all parallel) and at most one more loop; projected
/// permutation maps; a body that touches no memory; the outputs of a Row or
/// Elements stage written at the identity (one thread per element).
static std::optional<Stage> matchStage(linalg::LinalgOp op,
                                       ArrayRef<int64_t> rows) {
  size_t k = rows.size();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (!op.hasPureBufferSemantics() || op->getNumRegions() != 1 ||
      (ranges.size() != k && ranges.size() != k + 1) ||
      !llvm::equal(ArrayRef(ranges).take_front(k), rows) ||
      llvm::any_of(ranges, ShapedType::isDynamic))
    return std::nullopt;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (llvm::any_of(ArrayRef(iterators).take_front(k),
                   [](utils::IteratorType t) {
                     return t != utils::IteratorType::parallel;
                   }) ||
      llvm::any_of(op.getIndexingMapsArray(),
                   [](AffineMap map) { return !map.isProjectedPermutation(); }))
    return std::nullopt;
  for (Operation &inner : op.getBlock()->without_terminator())
    if (inner.getNumRegions() != 0 || !isMemoryEffectFree(&inner))
      return std::nullopt;
  Stage stage{op, StageKind::Row, std::nullopt, 1};
  if (ranges.size() == k + 1) {
    stage.length = ranges[k];
    stage.kind = iterators[k] == utils::IteratorType::parallel
                     ? StageKind::Elements
                     : StageKind::Reduction;
  }
  if (stage.kind == StageKind::Reduction) {
    stage.reduction = matchRowReduction(op, /*minLength=*/1);
    if (!stage.reduction)
      return std::nullopt;
    return stage;
  }
  for (OpOperand &init : op.getDpsInitsMutable())
    if (!op.getMatchingIndexingMap(&init).isIdentity())
      return std::nullopt;
  return stage;
}

/// Whether `map` addresses a row's elements alone: its results are the
/// rows' `k` loops in order, then the inner loop or nothing.
static bool isRowLocal(AffineMap map, size_t k) {
  if (map.getNumResults() != k && map.getNumResults() != k + 1)
    return false;
  for (auto [i, expr] : llvm::enumerate(map.getResults())) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (!dim || dim.getPosition() != i)
      return false;
  }
  return true;
}

/// Whether `buffer` is known apart from every other buffer of its function
/// unless it views the same one: a function argument (the runtime passes
/// distinct, non-overlapping buffers, the arena's slots), a device
/// allocation or a global's.
static bool isDistinctBuffer(Value buffer) {
  if (auto arg = dyn_cast<BlockArgument>(buffer))
    return isa<func::FuncOp>(arg.getOwner()->getParentOp());
  return isa_and_nonnull<gpu::AllocOp, memref::GetGlobalOp>(
      buffer.getDefiningOp());
}

/// Whether `kernel`'s blocks touch their own rows alone where it matters:
/// every buffer its ops use is a distinct one (isDistinctBuffer) seen
/// through views; every one they write, all of them access through one
/// value and row-locally (isRowLocal), so that block r reads and writes row
/// r of it and nothing another block writes. Buffers they only read may be
/// read anywhere. A kernel of one op runs as that op would.
static bool keepsRowsApart(const RowKernel &kernel) {
  if (kernel.stages.size() == 1)
    return true;
  DenseMap<Value, Value> written;
  for (const Stage &stage : kernel.stages)
    for (Value init : linalg::LinalgOp(stage.op).getDpsInits())
      written.try_emplace(viewedBuffer(init), init);
  for (const Stage &stage : kernel.stages) {
    linalg::LinalgOp op = stage.op;
    for (OpOperand &operand : op->getOpOperands()) {
      if (!isa<MemRefType>(operand.get().getType()))
        continue;
      Value buffer = viewedBuffer(operand.get());
      if (!isDistinctBuffer(buffer))
        return false;
      auto it = written.find(buffer);
      if (it != written.end() &&
          (it->second != operand.get() ||
           !isRowLocal(op.getMatchingIndexingMap(&operand),
                       kernel.rows.size())))
        return false;
    }
  }
  return true;
}

/// Whether `op`, between two ops of a row kernel, lets both run in the
/// kernel at the later one's place: it touches no buffer's contents (views,
/// constants, index arithmetic), allocates a buffer, or frees one (then
/// moved after the kernel).
static bool mayRunAcross(Operation *op) {
  if (isa<gpu::AllocOp, gpu::DeallocOp>(op))
    return true;
  return op->getNumRegions() == 0 && isMemoryEffectFree(op);
}

/// A row kernel takes no other ops when it has fewer rows than this and its
/// reduction is longer than kMaxLoneRowLength.
constexpr int64_t kMinRowKernelRows = 128;
constexpr int64_t kMaxLoneRowLength = 1024;

/// Each reduction of rows at least `minLength` long among `ops` (host code
/// in program order), with the ops around it that fit (matchStage, no
/// longer rows than its own, rows kept apart), as a row kernel: softmax's
/// fills, maxima, exponentials, sums and division; LayerNorm's mean,
/// variance and normalisation, forward or backward.
static SmallVector<RowKernel> collectRowKernels(ArrayRef<linalg::LinalgOp> ops,
                                                int64_t minLength) {
  DenseSet<Operation *> taken;
  SmallVector<RowKernel> kernels;
  for (linalg::LinalgOp anchor : ops) {
    // An op in a loop stays one (wrapSequentialBufferLoops may run the loop
    // in one thread).
    if (taken.contains(anchor) ||
        anchor->getParentOfType<LoopLikeOpInterface>())
      continue;
    std::optional<RowReduction> match = matchRowReduction(anchor, minLength);
    if (!match)
      continue;
    RowKernel kernel;
    kernel.rows.assign(match->ranges.begin(), match->ranges.end() - 1);
    std::optional<Stage> first = matchStage(anchor, kernel.rows);
    if (!first)
      continue;
    kernel.stages.push_back(*first);
    // Earlier ops, then later ones, while they fit; unless the kernel has
    // few rows, each long, when the others would run faster on their own.
    for (bool before : {true, false}) {
      if (kernel.numRows() < kMinRowKernelRows &&
          first->length > kMaxLoneRowLength)
        break;
      auto step = [&](Operation *op) {
        return before ? op->getPrevNode() : op->getNextNode();
      };
      for (Operation *op = step(anchor); op; op = step(op)) {
        if (mayRunAcross(op))
          continue;
        auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
        if (!linalgOp || taken.contains(op))
          break;
        std::optional<Stage> stage = matchStage(linalgOp, kernel.rows);
        if (!stage || stage->length > first->length)
          break;
        auto at = before ? kernel.stages.begin() : kernel.stages.end();
        at = kernel.stages.insert(at, *stage);
        if (!keepsRowsApart(kernel)) {
          kernel.stages.erase(at);
          break;
        }
      }
    }
    for (const Stage &stage : kernel.stages)
      taken.insert(stage.op);
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

/// The loop indices of the row-major position `linear` in `ranges`.
static SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                                      ArrayRef<int64_t> ranges) {
  SmallVector<Value> ivs(ranges.size());
  for (int64_t d = static_cast<int64_t>(ranges.size()) - 1; d > 0; --d) {
    Value extent = arith::ConstantIndexOp::create(b, loc, ranges[d]);
    ivs[d] = arith::RemUIOp::create(b, loc, linear, extent);
    linear = arith::DivUIOp::create(b, loc, linear, extent);
  }
  if (!ranges.empty())
    ivs[0] = linear;
  return ivs;
}

/// `op`'s element at loop indices `ivs`: its body cloned there on its
/// operands (cloneBodyAt) and its yields stored.
static void emitElement(OpBuilder &b, Location loc, linalg::LinalgOp op,
                        ArrayRef<Value> ivs) {
  SmallVector<OpOperand *> operands = llvm::to_vector(
      llvm::map_range(op->getOpOperands(), [](OpOperand &o) { return &o; }));
  IRMapping values = cloneBodyAt(b, loc, op, operands, ivs);
  auto yield = cast<linalg::YieldOp>(op.getBlock()->getTerminator());
  for (auto [value, init] :
       llvm::zip(yield.getValues(), op.getDpsInitsMutable()))
    memref::StoreOp::create(b, loc, values.lookupOrDefault(value), init.get(),
                            indicesOf(op.getMatchingIndexingMap(&init), ivs));
}

/// `stage` run by thread `thread` of `threads` in the block of the row at
/// `ivs`: a loop over the thread's strided share of the row, or, given
/// `positions` (the share's positions, when every thread has the same
/// number of them), those positions one after another. A reduction's output
/// initial value enters through thread 0's share, read before the block's
/// tree (whose barriers come before any store); then every thread stores the
/// result, the same value.
static void emitStage(OpBuilder &b, Location loc, const Stage &stage,
                      ArrayRef<Value> ivs, Value thread, int64_t threads,
                      ArrayRef<Value> positions) {
  auto constant = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  auto withInner = [&](Value j) {
    SmallVector<Value> all(ivs);
    all.push_back(j);
    return all;
  };
  auto isFirst = [&] {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, thread,
                                 constant(0))
        .getResult();
  };
  linalg::LinalgOp op = stage.op;
  switch (stage.kind) {
  case StageKind::Row:
    scf::IfOp::create(b, loc, isFirst(), [&](OpBuilder &ib, Location nested) {
      emitElement(ib, nested, op, ivs);
      scf::YieldOp::create(ib, nested);
    });
    return;
  case StageKind::Elements:
    if (!positions.empty()) {
      for (Value j : positions)
        emitElement(b, loc, op, withInner(j));
      return;
    }
    scf::ForOp::create(
        b, loc, thread, constant(stage.length), constant(threads), ValueRange{},
        [&](OpBuilder &fb, Location nested, Value j, ValueRange) {
          emitElement(fb, nested, op, withInner(j));
          scf::YieldOp::create(fb, nested);
        });
    return;
  case StageKind::Reduction: {
    const RowReduction &match = *stage.reduction;
    Value identity = arith::ConstantOp::create(b, loc, match.identity);
    OpOperand *output = op.getDpsInitOperand(0);
    SmallVector<Value> outIndices =
        indicesOf(op.getMatchingIndexingMap(output), ivs);
    Value init = memref::LoadOp::create(b, loc, output->get(), outIndices);
    Value share = arith::SelectOp::create(b, loc, isFirst(), init, identity);
    if (!positions.empty()) {
      for (Value j : positions)
        share = foldElement(b, loc, op, match, withInner(j), share);
    } else {
      share = scf::ForOp::create(
                  b, loc, thread, constant(stage.length), constant(threads),
                  ValueRange{share},
                  [&](OpBuilder &fb, Location nested, Value j, ValueRange acc) {
                    scf::YieldOp::create(fb, nested,
                                         foldElement(fb, nested, op, match,
                                                     withInner(j), acc[0]));
                  })
                  .getResult(0);
    }
    Type type = identity.getType();
    auto tree =
        gpu::AllReduceOp::create(b, loc, share, gpu::AllReduceOperationAttr(),
                                 /*uniform=*/true);
    Block *combiner = new Block();
    tree.getBody().push_back(combiner);
    combiner->addArguments({type, type}, {loc, loc});
    OpBuilder cb = OpBuilder::atBlockEnd(combiner);
    gpu::YieldOp::create(cb, loc,
                         ValueRange{combine(cb, match, combiner->getArgument(0),
                                            combiner->getArgument(1))});
    memref::StoreOp::create(b, loc, tree.getResult(), output->get(),
                            outIndices);
    return;
  }
  }
}

/// A row kernel's stages run each thread's share of the row one position
/// after another (rather than in a loop) when it is at most this long.
constexpr int64_t kMaxRowShare = 8;

/// In a row kernel whose stages run each thread's positions one after
/// another (`positions`), a buffer element at a position is touched by
/// that thread alone: every stage gives the thread the same positions, the
/// kernel's buffers are distinct (function arguments do not overlap: the
/// runtime's arena slots), kept apart by row and written through one value
/// each (keepsRowsApart; a kernel of one op is a reduction, whose only
/// store is its row's result, after all its loads). So within the kernel's body
/// a load of such an element is the value the thread last stored or loaded
/// there, and a store that a later one overwrites is dead: a row's elements
/// stay in registers from stage to stage instead of going through memory
/// (softmax reads its scores once instead of three times, LayerNorm its input
/// once instead of three times).
static void forwardOwnElements(Block &body, ArrayRef<Value> positions) {
  DenseSet<Value> own(positions.begin(), positions.end());
  // An element: its buffer value, then its indices; none for a load or
  // store at another place (a row's statistic).
  using Key = SmallVector<const void *, 6>;
  auto element = [&](Value memref, ValueRange indices) {
    Key key;
    if (indices.empty() || !own.contains(indices.back()))
      return key;
    key.push_back(memref.getAsOpaquePointer());
    for (Value index : indices)
      key.push_back(index.getAsOpaquePointer());
    return key;
  };
  // Each element's value, and the store that wrote it last.
  std::map<Key, Value> known;
  std::map<Key, memref::StoreOp> lastStore;
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      Key key = element(store.getMemRef(), store.getIndices());
      if (key.empty())
        continue;
      known[key] = store.getValueToStore();
      auto [it, inserted] = lastStore.try_emplace(key, store);
      if (!inserted) {
        it->second.erase();
        it->second = store;
      }
    } else if (auto load = dyn_cast<memref::LoadOp>(op)) {
      Key key = element(load.getMemRef(), load.getIndices());
      if (key.empty())
        continue;
      auto [it, inserted] = known.try_emplace(key, load.getResult());
      if (inserted)
        continue;
      load.getResult().replaceAllUsesWith(it->second);
      load.erase();
    }
  }
}

/// `kernel` as one gpu.launch at its last op's place: a block per row (the
/// rows' indices delinearised, row-major), up to `blockSize` threads; its
/// ops in program order with a barrier between two. Frees between its ops
/// move after it.
static void lowerRowKernel(RewriterBase &rewriter, const RowKernel &kernel,
                           int64_t blockSize) {
  Operation *firstOp = kernel.stages.front().op;
  Operation *lastOp = kernel.stages.back().op;
  SmallVector<Location> locs;
  int64_t threads = 1;
  for (const Stage &stage : kernel.stages) {
    locs.push_back(stage.op->getLoc());
    threads = std::max(threads, std::min(blockSize, stage.length));
  }
  Location loc = rewriter.getFusedLoc(locs);
  rewriter.setInsertionPoint(lastOp);
  auto constant = [&](int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v).getResult();
  };
  Value one = constant(1);
  auto launch = gpu::LaunchOp::create(rewriter, loc, constant(kernel.numRows()),
                                      one, one, constant(threads), one, one);
  for (Operation *op = firstOp; op != lastOp;) {
    Operation *next = op->getNextNode();
    if (isa<gpu::DeallocOp>(op))
      rewriter.moveOpAfter(op, launch);
    op = next;
  }
  OpBuilder b = OpBuilder::atBlockEnd(&launch.getBody().front());
  SmallVector<Value> ivs =
      delinearize(b, loc, launch.getBlockIds().x, kernel.rows);
  // Each thread's positions in the row, when every stage gives every thread
  // the same few: the stages then run them one after another.
  SmallVector<Value> positions;
  int64_t share = 0;
  for (const Stage &stage : kernel.stages)
    if (stage.kind != StageKind::Row)
      share = std::max(share, stage.length / threads);
  bool unroll =
      share <= kMaxRowShare && llvm::all_of(kernel.stages, [&](const Stage &s) {
        return s.kind == StageKind::Row || s.length == share * threads;
      });
  Value thread = launch.getThreadIds().x;
  if (unroll)
    for (int64_t k = 0; k < share; ++k)
      positions.push_back(
          k == 0 ? thread
                 : arith::AddIOp::create(
                       b, loc, thread,
                       arith::ConstantIndexOp::create(b, loc, k * threads))
                       .getResult());
  for (auto [i, stage] : llvm::enumerate(kernel.stages)) {
    if (i != 0)
      gpu::BarrierOp::create(b, loc);
    emitStage(b, stage.op->getLoc(), stage, ivs, thread, threads, positions);
  }
  gpu::TerminatorOp::create(b, loc);
  if (unroll)
    forwardOwnElements(launch.getBody().front(), positions);
  for (const Stage &stage : kernel.stages)
    rewriter.eraseOp(stage.op);
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

/// The reassociation that collapses, in the operand `map` reads, the dims
/// of each run of `runs` (loops of the op, adjacent in the map where it
/// reads them) into one.
static SmallVector<ReassociationIndices>
operandReassociation(AffineMap map, ArrayRef<ReassociationIndices> runs) {
  auto runOf = [&](unsigned loop) -> int {
    for (auto [i, run] : llvm::enumerate(runs))
      if (llvm::is_contained(run, loop))
        return i;
    return -1;
  };
  SmallVector<ReassociationIndices> groups;
  int previous = -1;
  for (auto [position, expr] : llvm::enumerate(map.getResults())) {
    int run = runOf(cast<AffineDimExpr>(expr).getPosition());
    if (run >= 0 && run == previous)
      groups.back().push_back(position);
    else
      groups.push_back({static_cast<int64_t>(position)});
    previous = run;
  }
  return groups;
}

/// Each run of two or more adjacent reduction loops of a linalg op (a
/// loss's mean over [batch, tokens], a bias gradient's sum over them) as
/// one loop, where every operand reads the run's dims adjacent, in order,
/// in a buffer that collapses without a copy: the reduction then takes the
/// row-kernel or the two-kernel form (lowerLinalgToParallelLoops) instead
/// of one thread per output element summing every term.
static void collapseReductionLoops(RewriterBase &rewriter, func::FuncOp fn) {
  for (auto op : collectHostOps<linalg::LinalgOp>(fn)) {
    if (!op.hasPureBufferSemantics() || op.getNumReductionLoops() < 2 ||
        op->getParentOfType<LoopLikeOpInterface>())
      continue;
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    SmallVector<ReassociationIndices> runs;
    for (unsigned d = 0; d < iterators.size(); ++d) {
      unsigned end = d;
      while (end < iterators.size() &&
             iterators[end] == utils::IteratorType::reduction)
        ++end;
      if (end - d >= 2)
        runs.push_back(llvm::to_vector(llvm::seq<int64_t>(d, end)));
      d = std::max(d, end);
    }
    if (runs.empty() ||
        !linalg::areDimSequencesPreserved(op.getIndexingMapsArray(), runs))
      continue;
    if (!llvm::all_of(op->getOpOperands(), [&](OpOperand &operand) {
          auto type = dyn_cast<MemRefType>(operand.get().getType());
          return !type ||
                 memref::CollapseShapeOp::isGuaranteedCollapsible(
                     type, operandReassociation(
                               op.getMatchingIndexingMap(&operand), runs));
        }))
      continue;
    rewriter.setInsertionPoint(op);
    linalg::LinalgOp generic = op;
    if (!isa<linalg::GenericOp>(op)) {
      FailureOr<linalg::GenericOp> generalized =
          linalg::generalizeNamedOp(rewriter, op);
      if (failed(generalized))
        continue;
      generic = *generalized;
    }
    FailureOr<linalg::CollapseResult> collapsed =
        linalg::collapseOpIterationDims(generic, runs, rewriter);
    if (succeeded(collapsed))
      rewriter.eraseOp(generic);
  }
}

/// Lowers each long row reduction, with the row-wise ops around it, to a
/// kernel of a block per row (collectRowKernels, lowerRowKernel); a
/// reduction of many rows into few elements to two kernels
/// (lowerColumnReduction); every other linalg op to one scf.parallel over
/// its parallel dimensions (a one-iteration loop when it has none) with its
/// reductions inside.
static LogicalResult lowerLinalgToParallelLoops(RewriterBase &rewriter,
                                                func::FuncOp fn,
                                                int64_t blockSize) {
  collapseReductionLoops(rewriter, fn);
  for (const RowKernel &kernel : collectRowKernels(
           collectHostOps<linalg::LinalgOp>(fn), kMinBlockRowLength))
    lowerRowKernel(rewriter, kernel, blockSize);
  for (auto op : collectHostOps<linalg::LinalgOp>(fn)) {
    if (!op.hasPureBufferSemantics())
      return op->emitOpError("zb-map-to-gpu: expected an op on buffers");
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

/// A perfect nest of scf.for loops rooted at `root` whose every store is
/// indexed directly by some of its loops' induction variables (and whose
/// loads of a stored buffer read the element a store writes) becomes an
/// scf.parallel over those loops around the others, in their order: the
/// scatter-add of an embedding's gradient, table[idx[t], d] += dy[t, d],
/// runs one thread per d. Iterations that differ in those loops touch other
/// elements, and each element sees its updates in the order of the
/// sequential nest, so the result is bitwise the same. Fails (changing
/// nothing) when no loop qualifies.
static LogicalResult parallelizeDisjointLoops(RewriterBase &rewriter,
                                              scf::ForOp root) {
  SmallVector<scf::ForOp> nest;
  getPerfectlyNestedLoops(nest, root);
  for (scf::ForOp loop : nest)
    if (!getConstantIntValue(loop.getLowerBound()) ||
        !getConstantIntValue(loop.getUpperBound()) ||
        !getConstantIntValue(loop.getStep()) || loop.getNumResults() != 0)
      return failure();
  Block *innermost = nest.back().getBody();
  SmallVector<memref::StoreOp> stores;
  bool nested = false;
  innermost->walk([&](Operation *op) {
    if (auto store = dyn_cast<memref::StoreOp>(op))
      stores.push_back(store);
    nested |= op->getNumRegions() > 0;
  });
  if (stores.empty() || nested)
    return failure();
  // A load of a stored buffer must read an element a store writes.
  DenseSet<Value> stored;
  for (memref::StoreOp store : stores)
    stored.insert(store.getMemRef());
  bool loadsOk = true;
  innermost->walk([&](memref::LoadOp load) {
    if (!stored.contains(load.getMemRef()))
      return;
    loadsOk &= llvm::any_of(stores, [&](memref::StoreOp store) {
      return store.getMemRef() == load.getMemRef() &&
             llvm::equal(store.getIndices(), load.getIndices());
    });
  });
  if (!loadsOk)
    return failure();
  SmallVector<bool> parallel;
  for (scf::ForOp loop : nest)
    parallel.push_back(llvm::all_of(stores, [&](memref::StoreOp store) {
      return llvm::is_contained(store.getIndices(), loop.getInductionVar());
    }));
  if (llvm::none_of(parallel, [](bool p) { return p; }))
    return failure();

  Location loc = root.getLoc();
  rewriter.setInsertionPoint(root);
  SmallVector<Value> lbs, ubs, steps;
  for (auto [loop, isParallel] : llvm::zip(nest, parallel))
    if (isParallel) {
      lbs.push_back(loop.getLowerBound());
      ubs.push_back(loop.getUpperBound());
      steps.push_back(loop.getStep());
    }
  auto outer = scf::ParallelOp::create(rewriter, loc, lbs, ubs, steps);
  IRMapping mapping;
  unsigned next = 0;
  for (auto [loop, isParallel] : llvm::zip(nest, parallel))
    if (isParallel)
      mapping.map(loop.getInductionVar(), outer.getInductionVars()[next++]);
  rewriter.setInsertionPoint(outer.getBody()->getTerminator());
  for (auto [loop, isParallel] : llvm::zip(nest, parallel)) {
    if (isParallel)
      continue;
    auto seq = scf::ForOp::create(rewriter, loop.getLoc(), loop.getLowerBound(),
                                  loop.getUpperBound(), loop.getStep());
    mapping.map(loop.getInductionVar(), seq.getInductionVar());
    rewriter.setInsertionPoint(seq.getBody()->getTerminator());
  }
  for (Operation &op : innermost->without_terminator())
    rewriter.clone(op, mapping);
  rewriter.eraseOp(root);
  return success();
}

/// Runs each outermost host-level scf.for that reads or writes buffers (the
/// scatter-add of a gather's gradient, say: sequential, since indices may
/// repeat) in one GPU thread: wraps it in a one-iteration scf.parallel,
/// unless parallelizeDisjointLoops finds loops it can run in parallel.
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
    if (succeeded(parallelizeDisjointLoops(rewriter, loop)))
      continue;
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
  for (auto loop : collectHostOps<scf::ParallelOp>(fn))
    if (!loop->getParentOfType<scf::ParallelOp>())
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
      // A copy becomes a kernel of its shape: unranked ones have none.
      WalkResult unranked = fn.walk([](memref::CopyOp copy) {
        if (isa<MemRefType>(copy.getSource().getType()) &&
            isa<MemRefType>(copy.getTarget().getType()))
          return WalkResult::advance();
        copy.emitOpError("zb-map-to-gpu: a copy of unranked memrefs has no "
                         "kernel form; copy ranked buffers");
        return WalkResult::interrupt();
      });
      if (unranked.wasInterrupted())
        return signalPassFailure();
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
