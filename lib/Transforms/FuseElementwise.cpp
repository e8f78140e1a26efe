//===- FuseElementwise.cpp - Fuse elementwise linalg chains ---------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Passes.h"

#include "zb/Analysis/GroupedProduct.h"
#include "zb/Autodiff/Autodiff.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace zb {
#define GEN_PASS_DEF_ZBFUSEELEMENTWISE
#include "zb/Transforms/Passes.h.inc"
} // namespace zb

using namespace mlir;

/// Whether `op` computes a matrix product: out + a * b of two distinct
/// inputs over a reduction loop both index, each with a parallel loop the
/// other does not index (an m and an n), whatever unused inputs it still
/// carries (the canonicalizer drops them later). A row reduction such as
/// sum(dy * y), a contraction to linalg::isaContractionOpInterface, is not
/// one. A grouped product (a mixture of experts' products) is one as well.
static bool isContraction(linalg::LinalgOp op) {
  if (op.getNumReductionLoops() == 0 || op.getNumDpsInits() != 1)
    return false;
  if (zb::matchGroupedProduct(op))
    return true;
  Operation *mul = zb::autodiff::mulAddProduct(op.getBlock());
  if (!mul)
    return false;
  auto a = dyn_cast<BlockArgument>(mul->getOperand(0));
  auto b = dyn_cast<BlockArgument>(mul->getOperand(1));
  Value out = op.getBlock()->getArguments().back();
  if (!a || !b || a == b || a == out || b == out)
    return false;
  AffineMap mapA = op.getMatchingIndexingMap(op.getMatchingOpOperand(a));
  AffineMap mapB = op.getMatchingIndexingMap(op.getMatchingOpOperand(b));
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  bool m = false, n = false, k = false;
  for (unsigned d = 0, e = op.getNumLoops(); d < e; ++d) {
    bool inA = mapA.isFunctionOfDim(d), inB = mapB.isFunctionOfDim(d);
    if (iterators[d] == utils::IteratorType::reduction)
      k |= inA && inB;
    else {
      m |= inA && !inB;
      n |= inB && !inA;
    }
  }
  return m && n && k;
}

/// Whether `op`'s body reads its own output (an accumulation).
static bool readsOwnOutput(linalg::LinalgOp op) {
  return llvm::any_of(op.getDpsInitsMutable(), [&](OpOperand &init) {
    return op.payloadUsesValueFromOperand(&init);
  });
}

/// Whether `op` writes only fresh tensors (each init a tensor.empty), not
/// into an argument it updates in place.
static bool writesFreshTensors(linalg::LinalgOp op) {
  return llvm::all_of(op.getDpsInits(), [](Value init) {
    return init.getDefiningOp<tensor::EmptyOp>();
  });
}

/// Whether `op`'s body reads its loops' positions (linalg.index): a gather
/// (a convolution's patches, an embedding's rows) or a mask.
static bool readsPositions(linalg::LinalgOp op) {
  return !op.getBlock()->getOps<linalg::IndexOp>().empty();
}

/// Whether `op` narrows its one input's elements to its output's type
/// (--zb-narrow-stash's bf16 stash, but any arith.truncf copy): all loops
/// parallel, identity maps, a body that is one arith.truncf.
static bool isNarrowingCopy(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return false;
  Block *body = op.getBlock();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto trunc = yield.getValues()[0].getDefiningOp<arith::TruncFOp>();
  return body->getOperations().size() == 2 && trunc &&
         trunc.getIn() == body->getArgument(0);
}

/// Fuses the producer of `input` into its owner, `consumer`, at the
/// consumer's place: the fused op writes the consumer's results and those
/// of the producer that others read; the two ops go. Returns the fused op,
/// or null if the fusion failed (nothing changed).
static linalg::GenericOp
fuseInto(IRRewriter &rewriter, linalg::GenericOp consumer, OpOperand *input) {
  Operation *producer = input->get().getDefiningOp();
  rewriter.setInsertionPoint(consumer);
  FailureOr<linalg::ElementwiseOpFusionResult> fused =
      linalg::fuseElementwiseOps(rewriter, input);
  if (failed(fused))
    return nullptr;
  for (auto [original, replacement] : fused->replacements)
    rewriter.replaceAllUsesWith(original, replacement);
  rewriter.eraseOp(consumer);
  if (producer->use_empty())
    rewriter.eraseOp(producer);
  return cast<linalg::GenericOp>(fused->fusedOp);
}

/// Fuses each narrowing copy (isNarrowingCopy) of an all-parallel op's
/// result (a generic, or a named op such as a transpose, generalised) into
/// that op, which then writes both: the copy moves right
/// after its producer (it reads nothing else; its destination is a
/// tensor.empty it alone uses), so that the fused op, at the copy's place,
/// comes before the producer's other users and replaces it. A bf16 stash
/// is then written where its value is computed instead of read back from
/// memory by a kernel of its own at the end of the forward.
static void fuseNarrowingCopies(Operation *root) {
  SmallVector<linalg::GenericOp> copies;
  root->walk([&](linalg::GenericOp op) {
    if (op.hasPureTensorSemantics() && isNarrowingCopy(op))
      copies.push_back(op);
  });
  IRRewriter rewriter(root->getContext());
  for (linalg::GenericOp copy : copies) {
    OpOperand *input = copy.getDpsInputOperand(0);
    auto producer = input->get().getDefiningOp<linalg::GenericOp>();
    // A named op without reductions (a transpose into attention's heads)
    // fuses as its generic form.
    if (auto named = input->get().getDefiningOp<linalg::LinalgOp>();
        !producer && named && !isa<linalg::FillOp>(named) &&
        named.hasPureTensorSemantics() &&
        named.getNumParallelLoops() == named.getNumLoops() &&
        named->getBlock() == copy->getBlock()) {
      rewriter.setInsertionPoint(named);
      FailureOr<linalg::GenericOp> generic =
          linalg::generalizeNamedOp(rewriter, named);
      if (succeeded(generic))
        producer = *generic;
    }
    auto empty = copy.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>();
    if (!producer || !empty || empty->getNumOperands() != 0 ||
        !empty->hasOneUse() || empty->getBlock() != copy->getBlock() ||
        producer->getBlock() != copy->getBlock() ||
        producer.getNumParallelLoops() != producer.getNumLoops() ||
        readsOwnOutput(producer) || !linalg::areElementwiseOpsFusable(input))
      continue;
    rewriter.moveOpAfter(copy, producer);
    rewriter.moveOpBefore(empty, copy);
    // The fused op takes the copy's place.
    fuseInto(rewriter, copy, input);
  }
}

/// Fuses each all-parallel generic whose result one all-parallel generic
/// reads, element for element, and the function returns besides (the bias
/// add before GELU, which a forward stashes) into that reader, which then
/// writes both: the value is read back from memory by no one.
static void fuseReturnedProducers(Operation *root) {
  // The producer of one of `consumer`'s inputs that can join it, or null.
  auto joining = [](linalg::GenericOp consumer) -> OpOperand * {
    if (!consumer.hasPureTensorSemantics() ||
        consumer.getNumParallelLoops() != consumer.getNumLoops() ||
        !writesFreshTensors(consumer))
      return nullptr;
    for (OpOperand *input : consumer.getDpsInputOperands()) {
      auto producer = input->get().getDefiningOp<linalg::GenericOp>();
      // The reader reads each element once (no broadcast: the fused op
      // would write the producer's elements once per extra loop), and the
      // producer's other users are the function's return, after it.
      if (producer && !producer->hasOneUse() &&
          producer->getBlock() == consumer->getBlock() &&
          producer.getNumParallelLoops() == producer.getNumLoops() &&
          !readsOwnOutput(producer) &&
          consumer.getMatchingIndexingMap(input).isPermutation() &&
          llvm::all_of(producer->getUses(),
                       [&](OpOperand &use) {
                         return &use == input ||
                                (isa<func::ReturnOp>(use.getOwner()) &&
                                 use.getOwner()->getBlock() ==
                                     consumer->getBlock());
                       }) &&
          linalg::areElementwiseOpsFusable(input))
        return input;
    }
    return nullptr;
  };
  // In block order a producer comes before its reader: a fusion erases only
  // ops already visited (the reader and its producer), and the fused op
  // takes the reader's place for its other inputs.
  SmallVector<linalg::GenericOp> consumers;
  root->walk([&](linalg::GenericOp op) { consumers.push_back(op); });
  IRRewriter rewriter(root->getContext());
  for (linalg::GenericOp consumer : consumers)
    while (OpOperand *input = joining(consumer))
      if (!(consumer = fuseInto(rewriter, consumer, input)))
        break;
}

namespace {
struct FuseElementwisePass
    : zb::impl::ZBFuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    // Folded bodies first (autodiff's `x * 1.0`, its dead primal
    // recomputations), so that a contraction reads as one below.
    if (failed(applyPatternsGreedily(getOperation(),
                                     RewritePatternSet(&getContext()))))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    // Fuse only single-use producers: fusing a shared producer would
    // recompute it in every consumer. A producer whose body reads its own
    // output is not fused either: in a consumer with more loops that output
    // would be read back and rewritten once per extra iteration. Nothing is
    // fused into a matrix product written as a generic, such as a weight
    // gradient: it would stop being one and lower to loops instead of the
    // gemm (a ReLU's derivative, when no input gradient needs it
    // materialised; a bf16 stash read back in f32).
    linalg::populateElementwiseOpsFusionPatterns(
        patterns, [](OpOperand *fused) {
          auto producer = fused->get().getDefiningOp<linalg::LinalgOp>();
          if (!producer || !producer->hasOneUse())
            return false;
          if (auto consumer = dyn_cast<linalg::LinalgOp>(fused->getOwner());
              consumer && isContraction(consumer))
            return false;
          return !readsOwnOutput(producer);
        });
    // An elementwise op on the other side of a reshape takes the reshape's
    // shape, so that the two fuse: a bias add on a gemm's (token, feature)
    // rows and the residual add after it on (batch, token, feature). Only
    // an op that writes into a fresh tensor: a gradient sum updated in
    // place stays in its argument's shape, or bufferization no longer sees
    // it in place (and a contraction, which must stay a gemm, writes into a
    // fill; it is excluded by name as well). Nor an op that reads its
    // positions: collapsed, it would recover each one with a division and a
    // remainder per element (a convolution's 3 x 3 patches took four of
    // each, by constants, per element read, where its own loops need none).
    linalg::populateFoldReshapeOpsByCollapsingPatterns(
        patterns, [](OpOperand *fused) {
          auto op = dyn_cast<linalg::LinalgOp>(fused->getOwner());
          if (!op)
            op = fused->get().getDefiningOp<linalg::LinalgOp>();
          return op && !isContraction(op) && writesFreshTensors(op) &&
                 !readsPositions(op);
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    fuseNarrowingCopies(getOperation());
    fuseReturnedProducers(getOperation());
  }
};
} // namespace
