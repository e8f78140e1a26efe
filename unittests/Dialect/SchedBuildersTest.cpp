//===- SchedBuildersTest.cpp - Building sched ops from C++ ----------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Dialect/Sched/SchedDialect.h"
#include "zb/Dialect/Sched/SchedOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace zb::sched;

namespace {

class SchedBuildersTest : public ::testing::Test {
protected:
  SchedBuildersTest() { context.loadDialect<SchedDialect>(); }

  /// A 2-rank, 2-stage, 1-microbatch program: F0 → send → F1, B1 → send → B0.
  /// When `dropRecv`, rank 0 never receives the gradient.
  OwningOpRef<ModuleOp> buildProgram(bool dropRecv) {
    OpBuilder b(&context);
    Location loc = b.getUnknownLoc();
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    b.setInsertionPointToEnd(module->getBody());
    auto program = ProgramOp::create(
        b, loc, /*num_ranks=*/2, /*num_stages=*/2, /*num_microbatches=*/1,
        b.getStringAttr("1f1b"), b.getDenseI64ArrayAttr({0, 1}),
        /*param_stages=*/DictionaryAttr(), /*replicas=*/IntegerAttr(),
        /*forward_only=*/false, /*ranksCount=*/2);
    auto mb = b.getI64IntegerAttr(0);

    b.createBlock(&program.getRanks()[0]);
    ComputeOp::create(b, loc, Phase::F, 0, mb);
    SendOp::create(b, loc, Phase::F, 0, 0, /*peer=*/1, /*channel=*/0, 0);
    if (!dropRecv)
      RecvOp::create(b, loc, Phase::B, 1, 0, /*peer=*/1, /*channel=*/1, 0);
    ComputeOp::create(b, loc, Phase::B, 0, mb);
    ComputeOp::create(b, loc, Phase::W, 0, mb);

    b.createBlock(&program.getRanks()[1]);
    RecvOp::create(b, loc, Phase::F, 0, 0, /*peer=*/0, /*channel=*/0, 0);
    ComputeOp::create(b, loc, Phase::F, 1, mb);
    ComputeOp::create(b, loc, Phase::B, 1, mb);
    SendOp::create(b, loc, Phase::B, 1, 0, /*peer=*/0, /*channel=*/1, 0);
    ComputeOp::create(b, loc, Phase::W, 1, mb);
    return module;
  }

  MLIRContext context;
};

TEST_F(SchedBuildersTest, MatchedProgramVerifies) {
  OwningOpRef<ModuleOp> module = buildProgram(/*dropRecv=*/false);
  ASSERT_TRUE(succeeded(verify(*module)));
  auto program = cast<ProgramOp>(module->getBody()->front());
  EXPECT_EQ(program.getNumRanks(), 2);
  EXPECT_EQ(program.getSchedule(), "1f1b");
  auto ops = program.getRanks()[1].front().getOps<ComputeOp>();
  EXPECT_EQ(std::distance(ops.begin(), ops.end()), 3);
  EXPECT_EQ(ProgramOp::getRankOf((*ops.begin()).getOperation()), 1);
}

TEST_F(SchedBuildersTest, SendWithoutRecvIsRejected) {
  OwningOpRef<ModuleOp> module = buildProgram(/*dropRecv=*/true);
  std::string diagnostic;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    diagnostic = diag.str();
    return success();
  });
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_NE(diagnostic.find("has no matching 'sched.recv' on rank 0"),
            std::string::npos)
      << diagnostic;
}

} // namespace
