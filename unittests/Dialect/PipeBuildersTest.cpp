//===- PipeBuildersTest.cpp - Building pipe ops from C++ ------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Dialect/Pipe/PipeDialect.h"
#include "zb/Dialect/Pipe/PipeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace zb::pipe;

namespace {

class PipeBuildersTest : public ::testing::Test {
protected:
  PipeBuildersTest() {
    context.loadDialect<PipeDialect, arith::ArithDialect>();
  }

  /// Builds a stage computing y = x * w with the forward stash (x, w) and,
  /// when `withBackward`, the fused backward (dx = dy * w, dw = dy * x).
  StageOp buildStage(OpBuilder &b, Value x, Value w, bool withBackward) {
    Type t = x.getType();
    auto stage =
        StageOp::create(b, b.getUnknownLoc(), TypeRange{t}, ValueRange{x},
                        ValueRange{}, ValueRange{w}, /*stage=*/2, /*rank=*/1);
    Location loc = b.getUnknownLoc();
    OpBuilder::InsertionGuard guard(b);
    Block *fwd = b.createBlock(&stage.getForward(), {}, {t, t}, {loc, loc});
    Value y =
        arith::MulFOp::create(b, loc, fwd->getArgument(0), fwd->getArgument(1));
    YieldOp::create(b, loc, ValueRange{y}, fwd->getArguments());
    if (withBackward) {
      Block *bwd =
          b.createBlock(&stage.getBackward(), {}, {t, t, t}, {loc, loc, loc});
      Value dy = bwd->getArgument(2);
      Value dx = arith::MulFOp::create(b, loc, dy, bwd->getArgument(1));
      Value dw = arith::MulFOp::create(b, loc, dy, bwd->getArgument(0));
      YieldOp::create(b, loc, ValueRange{dx, dw}, ValueRange{});
    }
    return stage;
  }

  /// A tensor<2xf32> of `value`s (stages pass ranked tensors).
  Value splat(OpBuilder &b, float value) {
    auto type = RankedTensorType::get({2}, b.getF32Type());
    return arith::ConstantOp::create(b, b.getUnknownLoc(),
                                     DenseElementsAttr::get(type, value));
  }

  MLIRContext context;
};

TEST_F(PipeBuildersTest, StageWithBackwardVerifiesAndRoundTrips) {
  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  Value x = splat(b, 3.0f);
  Value w = splat(b, 2.0f);
  StageOp stage = buildStage(b, x, w, /*withBackward=*/true);
  auto cut = CutOp::create(b, loc, stage.getResult(0));

  ASSERT_TRUE(succeeded(verify(*module)));
  EXPECT_EQ(stage.getStage(), 2);
  EXPECT_EQ(stage.getRank(), 1);
  EXPECT_TRUE(stage.hasBackward());
  EXPECT_FALSE(stage.isSplit());
  EXPECT_EQ(stage.getForwardYield().getStash().size(), 2u);
  EXPECT_FALSE(cut.getAdjoint());

  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  OwningOpRef<ModuleOp> reparsed = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(reparsed);
  std::string again;
  llvm::raw_string_ostream os2(again);
  reparsed->print(os2);
  EXPECT_EQ(text, again);
}

TEST_F(PipeBuildersTest, VerifierRejectsBackwardWithWrongSignature) {
  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  Value x = splat(b, 3.0f);
  Value w = splat(b, 2.0f);
  StageOp stage = buildStage(b, x, w, /*withBackward=*/true);
  // Drop the cotangent argument: the backward no longer matches.
  stage.getBackward().front().getArgument(2).replaceAllUsesWith(
      stage.getBackward().front().getArgument(0));
  stage.getBackward().front().eraseArgument(2);

  std::string diagnostic;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    diagnostic = diag.str();
    return success();
  });
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_NE(diagnostic.find("region 'backward' must take 3 arguments"),
            std::string::npos)
      << diagnostic;
}

} // namespace
