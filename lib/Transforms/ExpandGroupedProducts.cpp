//===- ExpandGroupedProducts.cpp - Grouped products over every group ------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Passes.h"

#include "zb/Analysis/GroupedProduct.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace zb {
#define GEN_PASS_DEF_ZBEXPANDGROUPEDPRODUCTS
#include "zb/Transforms/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {
/// A grouped product's forward form: rows of x times their group's w.
struct RowsForm {
  Value x, w, group, init;
  /// w is stored [e, n, k].
  bool transposed = false;
  int64_t rows, n, k, groups;
};
} // namespace

/// `op` as a grouped product's forward form on static tensors of one
/// float type: y (r, n), x (r, k), w (e, k, n) or (e, n, k), the group index
/// (r).
static std::optional<RowsForm> matchRowsForm(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics())
    return std::nullopt;
  std::optional<zb::GroupedLayout> layout = zb::matchGroupedLayout(op);
  if (!layout || layout->kind != zb::GroupedLayout::Rows)
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return std::nullopt;
  RowsForm form;
  form.x = op.getDpsInputOperand(layout->a)->get();
  form.w = op.getDpsInputOperand(layout->b)->get();
  form.group = op.getDpsInputOperand(layout->product.group)->get();
  form.init = op.getDpsInitOperand(0)->get();
  Type element = getElementTypeOrSelf(form.init.getType());
  if (getElementTypeOrSelf(form.x.getType()) != element ||
      getElementTypeOrSelf(form.w.getType()) != element)
    return std::nullopt;
  form.transposed = layout->transB;
  form.rows = ranges[layout->rowLoop];
  form.n = ranges[layout->loop0];
  form.k = ranges[layout->loop1];
  form.groups = ranges[layout->product.groupLoop];
  return form;
}

/// Builds the expansion of `form` before `op` and returns y.
static Value expand(RewriterBase &rewriter, linalg::GenericOp op,
                    const RowsForm &form) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  Type element = getElementTypeOrSelf(form.init.getType());
  auto parallel = utils::IteratorType::parallel;
  auto reduction = utils::IteratorType::reduction;
  auto map = [&](unsigned numDims, ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> results;
    for (unsigned d : dims)
      results.push_back(getAffineDimExpr(d, ctx));
    return AffineMap::get(numDims, 0, results, ctx);
  };
  Value zero = arith::ConstantOp::create(rewriter, loc, element,
                                         rewriter.getZeroAttr(element));

  // xb[e, r, k] = x[r, k].
  auto xbType =
      RankedTensorType::get({form.groups, form.rows, form.k}, element);
  Value xbInit =
      tensor::EmptyOp::create(rewriter, loc, xbType.getShape(), element);
  Value xb = linalg::GenericOp::create(
                 rewriter, loc, TypeRange{xbType}, ValueRange{form.x},
                 ValueRange{xbInit},
                 ArrayRef<AffineMap>{map(3, {1, 2}), map(3, {0, 1, 2})},
                 SmallVector<utils::IteratorType>(3, parallel),
                 [](OpBuilder &b, Location l, ValueRange args) {
                   linalg::YieldOp::create(b, l, args[0]);
                 })
                 .getResult(0);

  // t[e, r, n] = sum over k of xb[e, r, k] * w[e, k, n] (or w[e, n, k]).
  auto tType = RankedTensorType::get({form.groups, form.rows, form.n}, element);
  Value tInit =
      linalg::FillOp::create(rewriter, loc, zero,
                             ValueRange{tensor::EmptyOp::create(
                                 rewriter, loc, tType.getShape(), element)})
          .getResult(0);
  // Loops (e, r, n, k).
  Value t =
      linalg::GenericOp::create(
          rewriter, loc, TypeRange{tType}, ValueRange{xb, form.w},
          ValueRange{tInit},
          ArrayRef<AffineMap>{map(4, {0, 1, 3}),
                              form.transposed ? map(4, {0, 2, 3})
                                              : map(4, {0, 3, 2}),
                              map(4, {0, 1, 2})},
          SmallVector<utils::IteratorType>{parallel, parallel, parallel,
                                           reduction},
          [](OpBuilder &b, Location l, ValueRange args) {
            Value product = arith::MulFOp::create(b, l, args[0], args[1]);
            linalg::YieldOp::create(
                b, l, Value(arith::AddFOp::create(b, l, args[2], product)));
          })
          .getResult(0);

  // y[r, n] = init + sum over e of (g[r] == e ? t[e, r, n] : 0); loops
  // (r, n, e).
  Type groupType = getElementTypeOrSelf(form.group.getType());
  return linalg::GenericOp::create(
             rewriter, loc, TypeRange{form.init.getType()},
             ValueRange{t, form.group}, ValueRange{form.init},
             ArrayRef<AffineMap>{map(3, {2, 0, 1}), map(3, {0}),
                                 map(3, {0, 1})},
             SmallVector<utils::IteratorType>{parallel, parallel, reduction},
             [&](OpBuilder &b, Location l, ValueRange args) {
               Value e = linalg::IndexOp::create(b, l, 2);
               Value ei = arith::IndexCastOp::create(b, l, groupType, e);
               Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                                 args[1], ei);
               Value picked = arith::SelectOp::create(b, l, hit, args[0], zero);
               linalg::YieldOp::create(
                   b, l, Value(arith::AddFOp::create(b, l, args[2], picked)));
             })
      .getResult(0);
}

namespace {
struct ExpandGroupedProductsPass
    : zb::impl::ZBExpandGroupedProductsBase<ExpandGroupedProductsPass> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, RowsForm>> products;
    getOperation()->walk([&](linalg::GenericOp op) {
      if (std::optional<RowsForm> form = matchRowsForm(op))
        products.emplace_back(op, *form);
    });
    IRRewriter rewriter(&getContext());
    for (auto &[op, form] : products) {
      rewriter.setInsertionPoint(op);
      rewriter.replaceOp(op, expand(rewriter, op, form));
    }
  }
};
} // namespace
