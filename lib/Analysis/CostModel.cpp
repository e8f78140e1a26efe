//===- CostModel.cpp - FLOPs and bytes of ops -----------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Analysis/CostModel.h"
#include "zb/Analysis/GroupedProduct.h"

#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

/// Scalar float arithmetic counts one FLOP.
static bool isScalarArithmetic(Operation *op) {
  if (op->getNumResults() != 1 || !isa<FloatType>(op->getResult(0).getType()))
    return false;
  StringRef ns = op->getDialect() ? op->getDialect()->getNamespace() : "";
  return (ns == "arith" || ns == "math") && !isa<arith::ConstantOp>(op);
}

static double bodyFlops(Block &body) {
  double flops = 0;
  for (Operation &op : body)
    flops += isScalarArithmetic(&op) ? 1 : zb::estimateFlops(&op);
  return flops;
}

/// The points of a loop nest with ranges `ranges` at which loop c is at most
/// loop r (`zb.skip_terms = array<i64: r, c>`: the terms a marked product
/// computes), or every point without such loops.
static double pointsComputed(ArrayRef<int64_t> ranges, DenseI64ArrayAttr skip) {
  auto known = [&](int64_t loop) {
    return loop >= 0 && loop < int64_t(ranges.size()) &&
           !ShapedType::isDynamic(ranges[loop]);
  };
  bool triangle = skip && skip.size() == 2 && skip[0] != skip[1] &&
                  known(skip[0]) && known(skip[1]);
  double points = 1;
  for (auto [loop, range] : llvm::enumerate(ranges)) {
    if (triangle && (int64_t(loop) == skip[0] || int64_t(loop) == skip[1]))
      continue;
    points *= ShapedType::isDynamic(range) ? 1 : range;
  }
  if (!triangle)
    return points;
  // Pairs (r, c) with c <= r: r + 1 of them for each r below C, C above.
  double r = ranges[skip[0]], c = ranges[skip[1]];
  double below = std::min(r, c);
  return points * (below * (below + 1) / 2 + (r - below) * c);
}

int64_t zb::estimateBytes(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  int64_t bits = shaped.getElementTypeBitWidth();
  return shaped.getNumElements() * ((bits + 7) / 8);
}

double zb::estimateFlops(Operation *op) {
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    double points = pointsComputed(linalgOp.getStaticLoopRanges(),
                                   op->getAttrOfType<DenseI64ArrayAttr>(
                                       zb::ZBDialect::kSkipTermsAttrName));
    // A grouped product computes each point's term for one group only.
    if (std::optional<GroupedProduct> grouped = matchGroupedProduct(linalgOp))
      if (int64_t groups = linalgOp.getStaticLoopRanges()[grouped->groupLoop];
          !ShapedType::isDynamic(groups) && groups > 0)
        return 2 * points / groups;
    double perPoint = bodyFlops(*linalgOp.getBlock());
    return points * std::max(perPoint, 0.0);
  }
  if (auto softmax = dyn_cast<linalg::SoftmaxOp>(op)) {
    auto type = cast<ShapedType>(softmax.getResult()[0].getType());
    // max, subtract, exp, sum, divide per element.
    return 5.0 * type.getNumElements();
  }
  if (auto loop = dyn_cast<scf::ForOp>(op)) {
    std::optional<APInt> trips = loop.getStaticTripCount();
    double count = trips ? static_cast<double>(trips->getZExtValue()) : 1.0;
    return count * bodyFlops(*loop.getBody());
  }
  if (isScalarArithmetic(op))
    return 1;
  if (op->getNumResults() == 1) {
    StringRef ns = op->getDialect() ? op->getDialect()->getNamespace() : "";
    if (auto shaped = dyn_cast<ShapedType>(op->getResult(0).getType()))
      if ((ns == "arith" || ns == "math") && shaped.hasStaticShape() &&
          !isa<arith::ConstantOp>(op))
        return shaped.getNumElements();
  }
  double flops = 0;
  for (Region &region : op->getRegions())
    flops += estimateFlops(region);
  return flops;
}

double zb::estimateFlops(Region &region) {
  double flops = 0;
  for (Block &block : region)
    for (Operation &op : block)
      flops += estimateFlops(&op);
  return flops;
}
