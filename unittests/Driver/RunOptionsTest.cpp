//===- RunOptionsTest.cpp - The rules of zb-run's options -----------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/RunOptions.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace zb;

namespace {

TEST(RunOptions, DefaultsAreAOneProcessTrainingRun) {
  RunOptions options;
  EXPECT_EQ(options.check(), "");
  EXPECT_TRUE(options.training());
  EXPECT_FALSE(options.pipelined());
  EXPECT_EQ(options.worldSize(), 1);
  TrainingOptions loop = options.trainingOptions("model", 0);
  EXPECT_TRUE(loop.update);
  EXPECT_EQ(loop.steps, 1);
}

TEST(RunOptions, NamesTheFlagThatIsWrong) {
  auto problem = [](auto change) {
    RunOptions options;
    change(options);
    return options.check();
  };
  EXPECT_NE(problem([](RunOptions &o) {
              o.eval = o.grads = true;
            }).find("at most one of --eval and --grads"),
            std::string::npos);
  EXPECT_NE(problem([](RunOptions &o) {
              o.microbatches = 0;
            }).find("--microbatches must be at least 1, got 0"),
            std::string::npos);
  // One process or many: a step's microbatches within the schedules' limit
  // (one process would otherwise loop over them all, keeping each loss).
  EXPECT_NE(problem([](RunOptions &o) {
              o.microbatches = 99999999999;
            }).find("--microbatches must be at most 1000000, got 99999999999"),
            std::string::npos);
  EXPECT_EQ(problem([](RunOptions &o) { o.microbatches = 1000000; }), "");
  EXPECT_NE(problem([](RunOptions &o) {
              o.clipGradNorm = -1;
            }).find("--clip-grad-norm must be a positive number"),
            std::string::npos);
  // A NaN or infinite rate would write NaN into every parameter (the
  // step's check reads gradients, not updates).
  for (double lr : {std::nan(""), double(INFINITY), -1e-3})
    EXPECT_NE(problem([&](RunOptions &o) {
                o.learningRate = lr;
              }).find("--lr must be a finite number, 0 or more"),
              std::string::npos)
        << lr;
  EXPECT_EQ(problem([](RunOptions &o) { o.learningRate = 0; }), "");
  EXPECT_NE(problem([](RunOptions &o) {
              o.gradTol = std::nan("");
            }).find("--grad-tol must be a positive number"),
            std::string::npos);
  EXPECT_NE(problem([](RunOptions &o) {
              o.gradSamples = 0;
            }).find("--grad-samples must be at least 1, got 0"),
            std::string::npos);
  EXPECT_NE(problem([](RunOptions &o) {
              o.ranks = 2;
              o.schedule = "nope";
            }).find("unknown --schedule 'nope'; known: "),
            std::string::npos);
  EXPECT_NE(problem([](RunOptions &o) {
              o.optimizer = "lamb";
            }).find("unknown --optimizer 'lamb'"),
            std::string::npos);
  EXPECT_NE(problem([](RunOptions &o) {
              o.tracePath = "t.json";
            }).find("need --np 2 or more"),
            std::string::npos);
  EXPECT_NE(problem([](RunOptions &o) {
              o.grads = true;
              o.checkpointDir = "ckpt";
            }).find("--checkpoint and --resume are for training"),
            std::string::npos);
  EXPECT_NE(problem([](RunOptions &o) {
              o.balance = true;
            }).find("--balance cuts the stages of a pipeline: it needs --np 2"),
            std::string::npos);
  EXPECT_NE(problem([](RunOptions &o) {
              o.balance = true;
              o.ranks = 2;
              o.backend = "nccl";
            }).find("not supported with --backend nccl"),
            std::string::npos);
  EXPECT_NE(problem([](RunOptions &o) {
              o.ranks = 2;
              o.dtype = "fp8";
            }).find("unknown --dtype 'fp8' (expected f32 or bf16)"),
            std::string::npos);
  EXPECT_NE(problem([](RunOptions &o) { o.dtype = "bf16"; })
                .find("--dtype bf16 keeps a pipeline's stashes in bf16: it "
                      "needs --np 2 or more"),
            std::string::npos);
  EXPECT_EQ(problem([](RunOptions &o) {
              o.dtype = "bf16";
              o.backend = "nccl";
            }),
            "");
  // An unknown schedule matters only to a pipelined run.
  EXPECT_EQ(problem([](RunOptions &o) { o.schedule = "nope"; }), "");
}

TEST(RunOptions, LaunchMismatchNamesBothCounts) {
  RunOptions options;
  options.ranks = 2;
  options.replicas = 2;
  EXPECT_EQ(options.launchMismatch(1), "");
  EXPECT_EQ(options.launchMismatch(4), "");
  std::string message = options.launchMismatch(3);
  EXPECT_NE(message.find("one of 3 processes"), std::string::npos) << message;
  EXPECT_NE(message.find("--np 2 --dp 2 needs 4"), std::string::npos)
      << message;
  options.compileOnly = true;
  EXPECT_EQ(options.launchMismatch(3), "");
}

TEST(RunOptions, RankProgramKeysDifferInEveryChoice) {
  RunOptions base;
  base.ranks = 2;
  std::string key = base.rankProgramKey("model", 0);
  EXPECT_NE(key, base.rankProgramKey("model", 1));
  EXPECT_NE(key, base.rankProgramKey("model2", 0));
  // Stages cut at measured times: another program per cut program.
  EXPECT_NE(key, base.rankProgramKey("model", 0, "{\"stages\": []}"));
  EXPECT_NE(base.rankProgramKey("model", 0, "a"),
            base.rankProgramKey("model", 0, "b"));
  auto differs = [&](auto change) {
    RunOptions options = base;
    change(options);
    return options.rankProgramKey("model", 0) != key;
  };
  EXPECT_TRUE(differs([](RunOptions &o) { o.schedule = "1f1b"; }));
  EXPECT_TRUE(differs([](RunOptions &o) { o.microbatches = 4; }));
  EXPECT_TRUE(differs([](RunOptions &o) { o.replicas = 2; }));
  EXPECT_TRUE(differs([](RunOptions &o) { o.eval = true; }));
  EXPECT_TRUE(differs([](RunOptions &o) { o.backend = "nccl"; }));
  EXPECT_TRUE(differs([](RunOptions &o) { o.dtype = "bf16"; }));
  // The schedule's own chunk count, asked for or not, is the same program.
  EXPECT_FALSE(differs([](RunOptions &o) { o.chunks = 1; }));
}

TEST(RunOptions, ScheduleLayoutTakesTheSchedulesChunksAndPlacement) {
  RunOptions options;
  options.ranks = 4;
  options.microbatches = 8;
  options.schedule = "zb-v";
  zb::schedule::Problem layout = options.scheduleLayout();
  EXPECT_EQ(layout.numRanks, 4);
  EXPECT_EQ(layout.numChunks, 2);
  EXPECT_EQ(layout.placement, zb::schedule::Placement::V);
  EXPECT_EQ(layout.numMicrobatches, 8);
}

} // namespace
