//===- SplitLongSums.cpp - Float sums in blocks ---------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace zb {
#define GEN_PASS_DEF_ZBSPLITLONGSUMS
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {

/// A generic on static buffers summing floats of at most 32 bits: its one
/// output's block argument read by one arith.addf alone, whose result the
/// yield alone reads. Returns the number of elements each output element
/// adds (the product of the reduction loops' ranges), or 0.
int64_t sumLength(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1)
    return 0;
  // The blocks are views of static shapes.
  if (!llvm::all_of(op->getOperandTypes(), [](Type type) {
        auto shaped = dyn_cast<ShapedType>(type);
        return !shaped || shaped.hasStaticShape();
      }))
    return 0;
  auto type = dyn_cast<FloatType>(
      getElementTypeOrSelf(op.getDpsInitOperand(0)->get().getType()));
  if (!type || type.getWidth() > 32)
    return 0;
  Block *body = op.getBlock();
  Value acc = body->getArguments().back();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != body || !acc.hasOneUse() ||
      *acc.getUsers().begin() != add.getOperation() || !add->hasOneUse())
    return 0;
  if (!llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isProjectedPermutation(); }))
    return 0;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t length = 1;
  for (auto [range, iterator] : llvm::zip(ranges, op.getIteratorTypesArray()))
    if (iterator == utils::IteratorType::reduction) {
      if (ShapedType::isDynamic(range))
        return 0;
      length *= range;
    }
  return length;
}

/// How reduction loop `dim` (of `range`) is cut so that each block holds at
/// most about `chain` of the op's `length` elements: `full` blocks of
/// `within` iterations, then `tail` < `within` iterations more (a shorter
/// last block) where no divisor of `range` gives blocks that small.
struct Blocks {
  int64_t within, full, tail;
};

Blocks cutLoop(int64_t range, int64_t length, int64_t chain) {
  int64_t wanted = (length + chain - 1) / chain;
  // The smallest divisor of `range` that gives `wanted` blocks or more.
  for (int64_t f = 2; f < range; ++f)
    if (range % f == 0 && f >= wanted)
      return {range / f, f, 0};
  // The loop is shorter than the blocks wanted: one block per iteration
  // (another reduction loop is cut next).
  if (wanted >= range)
    return {1, range, 0};
  // A prime length, or one whose divisors give too few blocks: blocks of
  // ceil(range / wanted) >= 2 iterations, the last one shorter.
  int64_t within = (range + wanted - 1) / wanted;
  return {within, range / within, range % within};
}

/// The offsets, sizes and strides of the view of a `type` buffer along
/// dimension `at` from `offset` for `size` elements.
struct View {
  SmallVector<int64_t> offsets, sizes, strides;
};

View viewAlong(MemRefType type, unsigned at, int64_t offset, int64_t size) {
  View view{SmallVector<int64_t>(type.getRank(), 0),
            SmallVector<int64_t>(type.getShape()),
            SmallVector<int64_t>(type.getRank(), 1)};
  view.offsets[at] = offset;
  view.sizes[at] = size;
  return view;
}

/// The type of that view (`type` itself where it is all of it).
MemRefType viewTypeAlong(MemRefType type, unsigned at, int64_t offset,
                         int64_t size) {
  if (offset == 0 && size == type.getDimSize(at))
    return type;
  View view = viewAlong(type, at, offset, size);
  return memref::SubViewOp::inferResultType(type, view.offsets, view.sizes,
                                            view.strides);
}

/// `input` viewed so (itself where that is all of it).
Value viewAlong(IRRewriter &rewriter, Location loc, Value input, unsigned at,
                int64_t offset, int64_t size) {
  auto type = cast<MemRefType>(input.getType());
  if (offset == 0 && size == type.getDimSize(at))
    return input;
  View view = viewAlong(type, at, offset, size);
  MLIRContext *context = rewriter.getContext();
  return memref::SubViewOp::create(
      rewriter, loc, viewTypeAlong(type, at, offset, size), input,
      getAsIndexOpFoldResult(context, view.offsets),
      getAsIndexOpFoldResult(context, view.sizes),
      getAsIndexOpFoldResult(context, view.strides));
}

/// Replaces, in `op`'s body, each `linalg.index` of a loop k by the value
/// `rebuild(k)` builds in its place (no value: left as it is).
void rebuildIndices(IRRewriter &rewriter, linalg::GenericOp op,
                    function_ref<Value(uint64_t)> rebuild) {
  SmallVector<linalg::IndexOp> indices;
  op.getBlock()->walk([&](linalg::IndexOp index) { indices.push_back(index); });
  for (linalg::IndexOp index : indices) {
    rewriter.setInsertionPoint(index);
    if (Value value = rebuild(index.getDim()))
      rewriter.replaceOp(index, value);
  }
}

/// Rewrites `op`, a sum of `length` > `chain` elements per output element:
/// its outermost reduction loop d of range r > 1 becomes a parallel loop j
/// over the blocks and a reduction loop i within one (d = j * within + i);
/// the op sums each block into a zeroed buffer [output..., blocks], a
/// shorter last block (iterations full * within to r) by a copy of the op
/// of its own, and a second generic adds the partial sums into the output,
/// in order.
bool split(IRRewriter &rewriter, linalg::GenericOp op, int64_t length,
           int64_t chain) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  unsigned dim = 0;
  while (iterators[dim] != utils::IteratorType::reduction || ranges[dim] < 2)
    ++dim;
  auto [within, full, tail] = cutLoop(ranges[dim], length, chain);
  int64_t blocks = full + (tail ? 1 : 0);

  Location loc = op.getLoc();
  MLIRContext *context = op.getContext();
  // Loop k of op is loop k (k < dim) or k + 1 (k > dim) of the first
  // generic; loop dim becomes j = dim (the block) and i = dim + 1 (the
  // place in it). An input that reads along dim is viewed (its first full *
  // within elements there) with that dimension expanded into [full,
  // within], read at (j, i).
  unsigned numLoops = ranges.size() + 1;
  auto renumber = [&](AffineExpr expr) -> AffineExpr {
    unsigned k = cast<AffineDimExpr>(expr).getPosition();
    return getAffineDimExpr(k < dim ? k : k + 1, context);
  };
  SmallVector<AffineMap> maps;
  SmallVector<std::optional<unsigned>> along;
  SmallVector<std::pair<MemRefType, SmallVector<ReassociationIndices>>>
      expansions;
  for (OpOperand *operand : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(operand);
    SmallVector<AffineExpr> results;
    std::optional<unsigned> at;
    for (auto [q, expr] : llvm::enumerate(map.getResults())) {
      if (cast<AffineDimExpr>(expr).getPosition() == dim) {
        at = q;
        results.push_back(getAffineDimExpr(dim, context));
        results.push_back(getAffineDimExpr(dim + 1, context));
        continue;
      }
      results.push_back(renumber(expr));
    }
    maps.push_back(AffineMap::get(numLoops, 0, results, context));
    along.push_back(at);
    expansions.emplace_back();
    if (!at)
      continue;
    // The expansion of the view viewAlong() takes below.
    auto type = viewTypeAlong(cast<MemRefType>(operand->get().getType()), *at,
                              0, full * within);
    SmallVector<int64_t> shape(type.getShape());
    shape[*at] = within;
    shape.insert(shape.begin() + *at, full);
    SmallVector<ReassociationIndices> groups;
    for (unsigned q = 0; q < type.getRank(); ++q) {
      unsigned first = q <= *at ? q : q + 1;
      groups.push_back(q == *at ? ReassociationIndices{first, first + 1}
                                : ReassociationIndices{first});
    }
    FailureOr<MemRefType> expanded =
        memref::ExpandShapeOp::computeExpandedType(type, shape, groups);
    if (failed(expanded))
      return false;
    expansions.back() = {*expanded, groups};
  }
  rewriter.setInsertionPoint(op);
  SmallVector<Value> inputs, tailInputs;
  for (auto [operand, at, expansion] :
       llvm::zip(op.getDpsInputOperands(), along, expansions)) {
    Value input = operand->get();
    if (!at) {
      inputs.push_back(input);
      tailInputs.push_back(input);
      continue;
    }
    Value head = viewAlong(rewriter, loc, input, *at, 0, full * within);
    inputs.push_back(memref::ExpandShapeOp::create(
        rewriter, loc, expansion.first, head, expansion.second));
    if (tail)
      tailInputs.push_back(
          viewAlong(rewriter, loc, input, *at, full * within, tail));
  }
  SmallVector<AffineExpr> outResults = llvm::to_vector(
      llvm::map_range(op.getIndexingMapsArray().back().getResults(), renumber));
  outResults.push_back(getAffineDimExpr(dim, context));
  maps.push_back(AffineMap::get(numLoops, 0, outResults, context));
  SmallVector<utils::IteratorType> newIterators(iterators);
  newIterators.insert(newIterators.begin() + dim,
                      utils::IteratorType::parallel);

  Value out = op.getDpsInitOperand(0)->get();
  auto outType = cast<MemRefType>(out.getType());
  unsigned rank = outType.getRank();
  Type element = outType.getElementType();
  SmallVector<int64_t> partialShape(outType.getShape());
  partialShape.push_back(blocks);
  auto partialType = MemRefType::get(partialShape, element);
  Value partial = memref::AllocOp::create(rewriter, loc, partialType);
  Value zero =
      arith::ConstantOp::create(rewriter, loc, rewriter.getZeroAttr(element));
  linalg::FillOp::create(rewriter, loc, zero, partial);

  auto blocked = linalg::GenericOp::create(
      rewriter, loc, TypeRange(), inputs,
      ValueRange{viewAlong(rewriter, loc, partial, rank, 0, full)}, maps,
      newIterators);
  rewriter.cloneRegionBefore(op.getRegion(), blocked.getRegion(),
                             blocked.getRegion().end());
  // The body's loop indices, renumbered as the loops were.
  rebuildIndices(rewriter, blocked, [&](uint64_t k) -> Value {
    if (k < dim)
      return {};
    if (k > dim)
      return linalg::IndexOp::create(rewriter, loc, k + 1);
    Value outer = linalg::IndexOp::create(rewriter, loc, dim);
    Value inner = linalg::IndexOp::create(rewriter, loc, dim + 1);
    Value step = arith::ConstantIndexOp::create(rewriter, loc, within);
    Value start = arith::MulIOp::create(rewriter, loc, outer, step);
    return arith::AddIOp::create(rewriter, loc, start, inner);
  });

  // The last, shorter block: the op itself over the rest of loop d, into
  // the last partial sum.
  if (tail) {
    rewriter.setInsertionPoint(op);
    SmallVector<int64_t> offsets(rank + 1, 0), sizes(partialShape),
        strides(rank + 1, 1);
    offsets.back() = full;
    sizes.back() = 1;
    MemRefType lastType = memref::SubViewOp::inferRankReducedResultType(
        outType.getShape(), partialType, offsets, sizes, strides);
    Value last =
        memref::SubViewOp::create(rewriter, loc, lastType, partial,
                                  getAsIndexOpFoldResult(context, offsets),
                                  getAsIndexOpFoldResult(context, sizes),
                                  getAsIndexOpFoldResult(context, strides));
    auto rest = linalg::GenericOp::create(rewriter, loc, TypeRange(),
                                          tailInputs, ValueRange{last},
                                          op.getIndexingMapsArray(), iterators);
    rewriter.cloneRegionBefore(op.getRegion(), rest.getRegion(),
                               rest.getRegion().end());
    rebuildIndices(rewriter, rest, [&](uint64_t k) -> Value {
      if (k != dim)
        return {};
      Value place = linalg::IndexOp::create(rewriter, loc, dim);
      Value start =
          arith::ConstantIndexOp::create(rewriter, loc, full * within);
      return arith::AddIOp::create(rewriter, loc, start, place);
    });
  }

  // The partial sums, in block order, into the output.
  rewriter.setInsertionPoint(op);
  AffineMap all = AffineMap::getMultiDimIdentityMap(rank + 1, context);
  SmallVector<AffineMap> sumMaps = {
      all, AffineMap::get(rank + 1, 0, all.getResults().drop_back(), context)};
  SmallVector<utils::IteratorType> sumIterators(rank,
                                                utils::IteratorType::parallel);
  sumIterators.push_back(utils::IteratorType::reduction);
  linalg::GenericOp::create(
      rewriter, loc, TypeRange(), ValueRange{partial}, ValueRange{out}, sumMaps,
      sumIterators, [](OpBuilder &b, Location bodyLoc, ValueRange args) {
        Value sum = arith::AddFOp::create(b, bodyLoc, args[1], args[0]);
        linalg::YieldOp::create(b, bodyLoc, sum);
      });
  memref::DeallocOp::create(rewriter, loc, partial);
  rewriter.eraseOp(op);
  return true;
}

struct SplitLongSumsPass : zb::impl::ZBSplitLongSumsBase<SplitLongSumsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (chain < 2) {
      getOperation()->emitError("--zb-split-long-sums: chain must be at "
                                "least 2, not ")
          << static_cast<int64_t>(chain);
      return signalPassFailure();
    }
    IRRewriter rewriter(&getContext());
    // Sums that cannot be cut (with an input whose layout expand_shape
    // cannot view in blocks) stay as they are.
    llvm::DenseSet<Operation *> kept;
    // Each split leaves shorter sums (the blocks, a shorter last block,
    // the partial sums); split those again until none is longer than the
    // chain.
    while (true) {
      SmallVector<std::pair<linalg::GenericOp, int64_t>> found;
      getOperation()->walk([&](linalg::GenericOp op) {
        int64_t length = sumLength(op);
        // More than chain >= 2 terms: some reduction loop is longer than 1.
        if (length > chain && !kept.contains(op))
          found.emplace_back(op, length);
      });
      if (found.empty())
        return;

      for (auto [op, length] : found)
        if (!split(rewriter, op, length, chain))
          kept.insert(op);
    }
  }
};

} // namespace
