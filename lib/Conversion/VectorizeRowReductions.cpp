//===- VectorizeRowReductions.cpp - Row reductions as vector code ---------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"

#include "RowReduction.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

namespace zb {
#define GEN_PASS_DEF_ZBVECTORIZEROWREDUCTIONS
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;
using namespace zb::detail;

static bool isLaneType(Type type) { return type.isF32() || type.isInteger(1); }

/// `op` as a row reduction the pass rewrites (see the pass description).
static std::optional<RowReduction> matchVectorizable(linalg::GenericOp op,
                                                     int64_t width) {
  if (!op.hasPureBufferSemantics())
    return std::nullopt;
  std::optional<RowReduction> match = matchRowReduction(op, width);
  if (!match || match->ranges.back() % width != 0)
    return std::nullopt;
  unsigned inner = match->ranges.size() - 1;
  // Every operand f32; an operand that reads the row (an input: the output
  // does not, matchRowReduction says) reads it contiguously.
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = cast<MemRefType>(operand.get().getType());
    AffineMap map = op.getMatchingIndexingMap(&operand);
    if (!type.getElementType().isF32() ||
        (map.isFunctionOfDim(inner) &&
         (map.getResults().back() != getAffineDimExpr(inner, op.getContext()) ||
          !type.isLastDimUnitStride())))
      return std::nullopt;
  }
  for (Operation &bodyOp : op.getBlock()->without_terminator())
    if (!isa<arith::ArithDialect, math::MathDialect>(bodyOp.getDialect()) ||
        isa<arith::ConstantOp>(bodyOp) || bodyOp.getNumRegions() != 0 ||
        !llvm::all_of(bodyOp.getOperandTypes(), isLaneType) ||
        !llvm::all_of(bodyOp.getResultTypes(), isLaneType))
      return std::nullopt;
  return match;
}

/// Rewrites `op`, matched as `match`, into loops of vector code.
static void vectorize(linalg::GenericOp op, const RowReduction &match,
                      int64_t width) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  ArrayRef<int64_t> ranges = match.ranges;
  unsigned inner = ranges.size() - 1;
  // Every constant before the loops.
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value zero = index(0), one = index(1), step = index(width);
  SmallVector<Value> bounds;
  for (int64_t range : ranges)
    bounds.push_back(index(range));
  auto lanes = [&](Type element) { return VectorType::get({width}, element); };
  Value start = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(lanes(b.getF32Type()), match.identity));

  SmallVector<Value> ivs(ranges.size());
  for (unsigned d = 0; d < inner; ++d) {
    auto loop = scf::ForOp::create(b, loc, zero, bounds[d], one);
    b.setInsertionPointToStart(loop.getBody());
    ivs[d] = loop.getInductionVar();
  }

  Block *body = op.getBlock();
  auto rows = scf::ForOp::create(
      b, loc, zero, bounds[inner], step, ValueRange{start},
      [&](OpBuilder &nb, Location nl, Value j, ValueRange iterArgs) {
        ivs[inner] = j;
        IRMapping mapping;
        for (OpOperand *input : op.getDpsInputOperands()) {
          AffineMap map = op.getMatchingIndexingMap(input);
          Value value;
          if (map.isFunctionOfDim(inner))
            value = vector::LoadOp::create(nb, nl, lanes(nb.getF32Type()),
                                           input->get(), indicesOf(map, ivs));
          else
            value = vector::BroadcastOp::create(
                nb, nl, lanes(nb.getF32Type()),
                memref::LoadOp::create(nb, nl, input->get(),
                                       indicesOf(map, ivs)));
          mapping.map(op.getMatchingBlockArgument(input), value);
        }
        mapping.map(match.accumulator, iterArgs[0]);
        for (Operation &bodyOp : body->without_terminator()) {
          // What the body takes from outside is the same in every lane.
          for (Value operand : bodyOp.getOperands())
            if (!mapping.contains(operand))
              mapping.map(operand,
                          vector::BroadcastOp::create(
                              nb, nl, lanes(operand.getType()), operand));
          Operation *clone = nb.clone(bodyOp, mapping);
          for (OpResult result : clone->getResults())
            result.setType(lanes(result.getType()));
        }
        scf::YieldOp::create(
            nb, nl, mapping.lookup(body->getTerminator()->getOperand(0)));
      });

  // The lanes folded as a tree, then into the output's value.
  Value folded = rows.getResult(0);
  for (int64_t half = width / 2; half >= 1; half /= 2) {
    SmallVector<int64_t> low = llvm::to_vector(llvm::seq<int64_t>(0, half));
    SmallVector<int64_t> high =
        llvm::to_vector(llvm::seq<int64_t>(half, 2 * half));
    Value lower = vector::ShuffleOp::create(b, loc, folded, folded, low);
    Value upper = vector::ShuffleOp::create(b, loc, folded, folded, high);
    folded = combine(b, match, lower, upper);
  }
  Value sum = vector::ExtractOp::create(b, loc, folded, ArrayRef<int64_t>{0});
  OpOperand *init = op.getDpsInitOperand(0);
  SmallVector<Value> at = indicesOf(op.getMatchingIndexingMap(init), ivs);
  Value before = memref::LoadOp::create(b, loc, init->get(), at);
  Value after = combine(b, match, before, sum);
  memref::StoreOp::create(b, loc, after, init->get(), at);
  op.erase();
}

namespace {
struct VectorizeRowReductionsPass
    : zb::impl::ZBVectorizeRowReductionsBase<VectorizeRowReductionsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (width < 1 || !llvm::isPowerOf2_64(width)) {
      getOperation()->emitError("--zb-vectorize-row-reductions: width must "
                                "be a power of two, not ")
          << static_cast<int64_t>(width);
      return signalPassFailure();
    }
    SmallVector<std::pair<linalg::GenericOp, RowReduction>> matched;
    getOperation()->walk([&](linalg::GenericOp op) {
      if (std::optional<RowReduction> match = matchVectorizable(op, width))
        matched.emplace_back(op, std::move(*match));
    });
    for (auto &[op, match] : matched)
      vectorize(op, match, width);
  }
};
} // namespace
