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

/// A generic on buffers summing floats of at most 32 bits: its one output's
/// block argument read by one arith.addf alone, whose result the yield
/// alone reads; static loop ranges. Returns the number of elements each
/// output element adds (the product of the reduction loops' ranges), or 0.
int64_t sumLength(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1)
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

/// The blocks to cut reduction loop `dim` (of `range`) into, so that each
/// holds at most `chain` of the op's `length` elements: the smallest divisor
/// of `range` that does, else `range` itself.
int64_t blockCount(int64_t range, int64_t length, int64_t chain) {
  int64_t wanted = (length + chain - 1) / chain;
  for (int64_t f = 2; f < range; ++f)
    if (range % f == 0 && f >= wanted)
      return f;
  return range;
}

/// Rewrites `op`, a sum of `length` > `chain` elements per output element:
/// its outermost reduction loop d of range r > 1 becomes a parallel loop j
/// over f blocks and a reduction loop i within one (d = j * r / f + i); the
/// op sums each block into a zeroed buffer [output..., f], and a second
/// generic adds the f partial sums into the output, in order.
bool split(IRRewriter &rewriter, linalg::GenericOp op, int64_t length,
           int64_t chain) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  unsigned dim = 0;
  while (iterators[dim] != utils::IteratorType::reduction || ranges[dim] < 2)
    ++dim;
  int64_t blocks = blockCount(ranges[dim], length, chain);
  int64_t within = ranges[dim] / blocks;
  // One loop of a prime length: its blocks would be its elements, and their
  // sum the same sum again.
  if (within == 1 && length == ranges[dim])
    return false;

  Location loc = op.getLoc();
  MLIRContext *context = op.getContext();
  // Loop k of op is loop k (k < dim) or k + 1 (k > dim) of the first
  // generic; loop dim becomes j = dim (the block) and i = dim + 1 (the
  // place in it). An input that reads along dim is viewed with that
  // dimension expanded into [blocks, within], read at (j, i).
  unsigned numLoops = ranges.size() + 1;
  auto renumber = [&](AffineExpr expr) -> AffineExpr {
    unsigned k = cast<AffineDimExpr>(expr).getPosition();
    return getAffineDimExpr(k < dim ? k : k + 1, context);
  };
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
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
    expansions.emplace_back();
    if (!at)
      continue;
    auto type = cast<MemRefType>(operand->get().getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[*at] = within;
    shape.insert(shape.begin() + *at, blocks);
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
  for (auto [operand, expansion] :
       llvm::zip(op.getDpsInputOperands(), expansions)) {
    Value input = operand->get();
    if (expansion.first)
      input = memref::ExpandShapeOp::create(rewriter, loc, expansion.first,
                                            input, expansion.second);
    inputs.push_back(input);
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
  Type element = outType.getElementType();
  SmallVector<int64_t> partialShape(outType.getShape());
  partialShape.push_back(blocks);
  auto partialType = MemRefType::get(partialShape, element);
  Value partial = memref::AllocOp::create(rewriter, loc, partialType);
  Value zero =
      arith::ConstantOp::create(rewriter, loc, rewriter.getZeroAttr(element));
  linalg::FillOp::create(rewriter, loc, zero, partial);

  auto blocked =
      linalg::GenericOp::create(rewriter, loc, TypeRange(), inputs,
                                ValueRange{partial}, maps, newIterators);
  rewriter.cloneRegionBefore(op.getRegion(), blocked.getRegion(),
                             blocked.getRegion().end());
  // The body's loop indices, renumbered as the loops were.
  SmallVector<linalg::IndexOp> indices;
  blocked.getBlock()->walk(
      [&](linalg::IndexOp index) { indices.push_back(index); });
  for (linalg::IndexOp index : indices) {
    uint64_t k = index.getDim();
    rewriter.setInsertionPoint(index);
    if (k < dim)
      continue;
    if (k > dim) {
      rewriter.replaceOpWithNewOp<linalg::IndexOp>(index, k + 1);
      continue;
    }
    Value outer = linalg::IndexOp::create(rewriter, loc, dim);
    Value inner = linalg::IndexOp::create(rewriter, loc, dim + 1);
    Value step = arith::ConstantIndexOp::create(rewriter, loc, within);
    Value start = arith::MulIOp::create(rewriter, loc, outer, step);
    rewriter.replaceOpWithNewOp<arith::AddIOp>(index, start, inner);
  }

  // The partial sums, in block order, into the output.
  rewriter.setInsertionPoint(op);
  unsigned rank = outType.getRank();
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
    // Sums that cannot be cut (along one loop of a prime length, or with an
    // input whose layout expand_shape cannot view in blocks) stay as they
    // are.
    llvm::DenseSet<Operation *> kept;
    // Each split leaves two shorter sums; split those again until none is
    // longer than the chain.
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
