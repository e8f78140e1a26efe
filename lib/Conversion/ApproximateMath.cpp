//===- ApproximateMath.cpp - Inline polynomial math functions -------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"

#include "RewriteOnly.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLExtras.h"

namespace zb {
#define GEN_PASS_DEF_ZBAPPROXIMATEMATH
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {

/// erf on f32 (or a vector of f32) as x P(x^2) / Q(x^2), with x clamped to
/// [-kErfClamp, kErfClamp] (beyond which f32's erf is within an ulp of
/// +-1): ten fused multiply-adds, two multiplications and one division, no
/// branches or selects besides the clamp, where MLIR's approximation picks
/// one of three coefficient sets per element (twenty selects). P(0) is
/// 2 / sqrt(pi), erf's slope at 0; the other coefficients were fitted to the
/// smallest largest error relative to an f32 ulp, evaluated in f32: at most
/// 6 ulp (5.85 at 3.519), 3.5e-7 absolute (ApproximateMathTest: every f32 in
/// [0.5, 3.8], samples elsewhere; MLIR's: 4.8 ulp, and -0 became +0). NaN
/// stays NaN (the clamp's comparisons are false for it), -0 stays -0.
constexpr float kErfClamp = 3.8f;
constexpr float kErfP[] = {
    1.128379226e+00f, 1.900645196e-01f,  4.929539934e-02f, 3.312907415e-03f,
    1.351412066e-04f, -1.998130529e-06f, 2.136544808e-08f};
constexpr float kErfQ[] = {1.000000000e+00f, 5.017727017e-01f, 1.109505072e-01f,
                           1.353826746e-02f, 8.702023188e-04f};

struct ErfRationalApproximation : OpRewritePattern<math::ErfOp> {
  // Ahead of MLIR's erf pattern, which stays for f16.
  ErfRationalApproximation(MLIRContext *context)
      : OpRewritePattern(context, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(math::ErfOp op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getType();
    if (!getElementTypeOrSelf(type).isF32())
      return rewriter.notifyMatchFailure(op, "not f32");
    // Splat constants need a static shape: scalars and vectors (what the
    // CPU pipeline has after its loops).
    if (isa<ShapedType>(type) && !isa<VectorType>(type))
      return rewriter.notifyMatchFailure(op, "not a scalar or vector");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    auto constant = [&](float value) -> Value {
      TypedAttr attr = b.getF32FloatAttr(value);
      if (auto shaped = dyn_cast<ShapedType>(type))
        attr = SplatElementsAttr::get(shaped, attr);
      return arith::ConstantOp::create(b, attr);
    };
    auto clamp = [&](arith::CmpFPredicate beyond, Value x, float bound) {
      Value limit = constant(bound);
      Value past = arith::CmpFOp::create(b, beyond, x, limit);
      return arith::SelectOp::create(b, past, limit, x);
    };
    Value x = clamp(arith::CmpFPredicate::OGT, op.getOperand(), kErfClamp);
    x = clamp(arith::CmpFPredicate::OLT, x, -kErfClamp);
    Value x2 = arith::MulFOp::create(b, x, x);
    auto horner = [&](ArrayRef<float> coefficients) {
      Value sum = constant(coefficients.back());
      for (float c : llvm::reverse(coefficients.drop_back()))
        sum = math::FmaOp::create(b, sum, x2, constant(c));
      return sum;
    };
    Value numerator = arith::MulFOp::create(b, x, horner(kErfP));
    rewriter.replaceOpWithNewOp<arith::DivFOp>(op, numerator, horner(kErfQ));
    return success();
  }
};

struct ApproximateMathPass
    : zb::impl::ZBApproximateMathBase<ApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<std::string> names(ops.begin(), ops.end());
    if (names.empty())
      names = {"erf", "exp", "log", "tanh"};
    auto selected = [&](StringRef name) {
      name.consume_front("math.");
      return llvm::is_contained(names, name);
    };
    SmallVector<Operation *> targets;
    getOperation()->walk([&](Operation *op) {
      if (isa<math::MathDialect>(op->getDialect()) &&
          selected(op->getName().getStringRef()))
        targets.push_back(op);
    });
    if (targets.empty())
      return;
    RewritePatternSet patterns(&getContext());
    if (selected("erf"))
      patterns.add<ErfRationalApproximation>(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, selected);
    if (failed(zb::detail::rewriteOnly(targets, std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
