//===- CommunicationTest.cpp - Send/recv insertion and deadlock tests -----===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Schedule/Communication.h"
#include "zb/Schedule/Generators.h"
#include "zb/Schedule/Validator.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <tuple>

using namespace zb::schedule;

namespace {

Problem problemFor(const ScheduleInfo &info, int p, int m) {
  Problem problem;
  problem.numRanks = p;
  problem.numMicrobatches = m;
  problem.numChunks = info.defaultChunks;
  problem.placement = info.defaultPlacement;
  problem.memW = 0.5;
  return problem;
}

/// Checks the properties insertCommunication promises for `schedule`.
void checkProgram(const Problem &problem, const Schedule &schedule,
                  const CommProgram &program) {
  ASSERT_EQ(program.ranks.size(), schedule.ranks.size());
  int numTransfers = 0;
  // Sends and recvs per channel, in program order.
  std::map<int64_t, std::vector<CommOp>> sends, recvs;
  for (std::size_t rank = 0; rank < program.ranks.size(); ++rank) {
    const std::vector<CommOp> &ops = program.ranks[rank];
    std::vector<Action> computes;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const CommOp &op = ops[i];
      if (op.kind == CommOpKind::Compute) {
        computes.push_back(op.action);
        continue;
      }
      ++numTransfers;
      EXPECT_NE(op.peer, static_cast<int64_t>(rank));
      if (op.kind == CommOpKind::Send) {
        // Right after its producer.
        ASSERT_GT(i, 0u);
        EXPECT_EQ(ops[i - 1].kind, CommOpKind::Compute);
        EXPECT_EQ(ops[i - 1].action, op.action);
        sends[op.channel].push_back(op);
      } else {
        // Generated schedules consume in send order: the next op is the
        // consumer (no recv is hoisted).
        ASSERT_LT(i + 1, ops.size());
        const CommOp &consumer = ops[i + 1];
        EXPECT_EQ(consumer.kind, CommOpKind::Compute);
        EXPECT_EQ(consumer.action.microbatch, op.action.microbatch);
        int delta = op.action.kind == ActionKind::F ? 1 : -1;
        EXPECT_EQ(consumer.action.stage, op.action.stage + delta);
        EXPECT_EQ(op.channel,
                  channelOf(op.action.stage, consumer.action.stage));
        recvs[op.channel].push_back(op);
      }
    }
    EXPECT_EQ(computes, schedule.ranks[rank]) << "rank " << rank;
  }
  // Every channel's k-th send meets its k-th recv.
  ASSERT_EQ(sends.size(), recvs.size());
  for (const auto &[channel, channelSends] : sends) {
    const std::vector<CommOp> &channelRecvs = recvs[channel];
    ASSERT_EQ(channelSends.size(), channelRecvs.size()) << channel;
    for (std::size_t k = 0; k < channelSends.size(); ++k) {
      EXPECT_EQ(channelSends[k].seq, static_cast<int64_t>(k));
      EXPECT_EQ(channelRecvs[k].seq, static_cast<int64_t>(k));
      EXPECT_EQ(channelSends[k].action, channelRecvs[k].action);
    }
  }
  // One send and one recv per cross-rank edge: the F chain and the B chain
  // cross ranks at every stage boundary whose stages are on different ranks.
  int crossings = 0;
  for (int s = 0; s + 1 < problem.numStages(); ++s)
    crossings += problem.rankOfStage(s) != problem.rankOfStage(s + 1);
  EXPECT_EQ(numTransfers, 4 * crossings * problem.numMicrobatches);
}

} // namespace

TEST(Communication, EverySchedule) {
  for (const ScheduleInfo &info : knownSchedules()) {
    SCOPED_TRACE(info.name);
    Problem problem = problemFor(info, 4, 8);
    Result<Schedule> schedule = generateSchedule(info.name, problem);
    ASSERT_TRUE(schedule.ok()) << schedule.error();
    Result<CommProgram> program = insertCommunication(problem, *schedule);
    ASSERT_TRUE(program.ok()) << program.error();
    EXPECT_EQ(program->name, info.name);
    checkProgram(problem, *schedule, *program);
    std::optional<Deadlock> deadlock = checkDeadlock(*program);
    EXPECT_FALSE(deadlock) << deadlock->message();
  }
}

TEST(Communication, VPlacementKeepsTheTurnLocal) {
  const ScheduleInfo *info = lookupSchedule("zb-v");
  ASSERT_TRUE(info);
  Problem problem = problemFor(*info, 2, 4);
  Result<Schedule> schedule = generateSchedule("zb-v", problem);
  ASSERT_TRUE(schedule.ok()) << schedule.error();
  Result<CommProgram> program = insertCommunication(problem, *schedule);
  ASSERT_TRUE(program.ok()) << program.error();
  EXPECT_EQ(program->stageRanks, (std::vector<int>{0, 1, 1, 0}));
  // Stages 1 and 2 share rank 1: channels 2 (F 1->2) and 3 (B 2->1) unused.
  for (const std::vector<CommOp> &ops : program->ranks) {
    for (const CommOp &op : ops) {
      if (op.kind == CommOpKind::Compute)
        continue;
      EXPECT_TRUE(op.channel == 0 || op.channel == 1 || op.channel == 4 ||
                  op.channel == 5)
          << describe(op);
    }
  }
}

// A consumer that takes microbatch 1 before microbatch 0 still receives
// them in send order: both recvs go before its first consumer.
TEST(Communication, RecvsFollowSendOrder) {
  Problem problem;
  problem.numRanks = 2;
  problem.numMicrobatches = 2;
  Schedule schedule;
  schedule.ranks = {{{ActionKind::F, 0, 0},
                     {ActionKind::F, 0, 1},
                     {ActionKind::B, 0, 1},
                     {ActionKind::B, 0, 0},
                     {ActionKind::W, 0, 0},
                     {ActionKind::W, 0, 1}},
                    {{ActionKind::F, 1, 1},
                     {ActionKind::B, 1, 1},
                     {ActionKind::F, 1, 0},
                     {ActionKind::B, 1, 0},
                     {ActionKind::W, 1, 0},
                     {ActionKind::W, 1, 1}}};
  ASSERT_TRUE(validate(problem, schedule).empty());
  Result<CommProgram> program = insertCommunication(problem, schedule);
  ASSERT_TRUE(program.ok()) << program.error();
  const std::vector<CommOp> &rank1 = program->ranks[1];
  ASSERT_GE(rank1.size(), 3u);
  EXPECT_EQ(describe(rank1[0]), "recv F stage 0 microbatch 0 from 0");
  EXPECT_EQ(rank1[0].seq, 0);
  EXPECT_EQ(describe(rank1[1]), "recv F stage 0 microbatch 1 from 0");
  EXPECT_EQ(rank1[1].seq, 1);
  EXPECT_EQ(describe(rank1[2]), "compute F stage 1 microbatch 1");
  // Rank 0 consumes the gradients in send order: each recv is just in time.
  const std::vector<CommOp> &rank0 = program->ranks[0];
  EXPECT_EQ(describe(rank0[4]), "recv B stage 1 microbatch 1 from 1");
  EXPECT_EQ(describe(rank0[5]), "compute B stage 0 microbatch 1");
  EXPECT_FALSE(checkDeadlock(*program));
}

// The schedule of ValidatorTest's Deadlock case: rank 0 waits for B(1, 0)
// before sending F(0, 1), which rank 1 needs first.
TEST(Communication, DeadlockNamesTheCycle) {
  Problem problem;
  problem.numRanks = 2;
  problem.numMicrobatches = 2;
  Schedule schedule;
  schedule.ranks = {{{ActionKind::F, 0, 0},
                     {ActionKind::B, 0, 0},
                     {ActionKind::F, 0, 1},
                     {ActionKind::B, 0, 1},
                     {ActionKind::W, 0, 0},
                     {ActionKind::W, 0, 1}},
                    {{ActionKind::F, 1, 1},
                     {ActionKind::B, 1, 1},
                     {ActionKind::F, 1, 0},
                     {ActionKind::B, 1, 0},
                     {ActionKind::W, 1, 0},
                     {ActionKind::W, 1, 1}}};
  Result<CommProgram> program = insertCommunication(problem, schedule);
  ASSERT_TRUE(program.ok()) << program.error();
  std::optional<Deadlock> deadlock = checkDeadlock(*program);
  ASSERT_TRUE(deadlock);
  EXPECT_TRUE(deadlock->isCycle);
  ASSERT_EQ(deadlock->cycle.size(), 2u);
  EXPECT_EQ(deadlock->cycle[0].rank, 0);
  EXPECT_EQ(deadlock->cycle[1].rank, 1);
  EXPECT_EQ(deadlock->blocked.size(), 2u);
  // Both channels are received in send order: rank 1 takes both
  // activations before F(1, 1); rank 0 takes B(1, 1), sent first, before
  // B(0, 0).
  EXPECT_EQ(deadlock->message(),
            "deadlock: rank 0 waits in 'recv B stage 1 microbatch 1 from 1' "
            "while rank 1 waits in 'recv F stage 0 microbatch 1 from 0'");

  // The validator reports the same cycle.
  std::vector<Diagnostic> diagnostics = validate(problem, schedule);
  ASSERT_EQ(diagnostics.size(), 2u);
  EXPECT_EQ(diagnostics[0].kind, DiagnosticKind::Deadlock);
  EXPECT_EQ(diagnostics[0].message,
            "deadlock: B(stage 0, mb 0) at position 1 on rank 0 waits for "
            "B(stage 1, mb 0) from rank 1 (" +
                deadlock->cycleText + ")");
  EXPECT_EQ(diagnostics[1].rank, 1);
  EXPECT_EQ(diagnostics[1].index, 0);
}

TEST(Communication, ThreeRankCycle) {
  // Each rank first waits for the next one's message: 0 -> 1 -> 2 -> 0.
  auto send = [](int stage, int64_t peer, int64_t channel) {
    return CommOp{
        CommOpKind::Send, {ActionKind::F, stage, 0}, peer, channel, 0};
  };
  auto recv = [](int stage, int64_t peer, int64_t channel) {
    return CommOp{
        CommOpKind::Recv, {ActionKind::F, stage, 0}, peer, channel, 0};
  };
  CommProgram program;
  program.numStages = 3;
  program.numMicrobatches = 1;
  program.ranks = {{recv(1, 1, 1), send(0, 2, 0)},
                   {recv(2, 2, 2), send(1, 0, 1)},
                   {recv(0, 0, 0), send(2, 1, 2)}};
  std::optional<Deadlock> deadlock = checkDeadlock(program);
  ASSERT_TRUE(deadlock);
  EXPECT_EQ(deadlock->cycleText,
            "rank 0 waits in 'recv F stage 1 microbatch 0 from 1' while rank "
            "1 waits in 'recv F stage 2 microbatch 0 from 2' while rank 2 "
            "waits in 'recv F stage 0 microbatch 0 from 0'");

  // Swapping rank 2's ops breaks the cycle.
  std::swap(program.ranks[2][0], program.ranks[2][1]);
  EXPECT_FALSE(checkDeadlock(program));
}

TEST(Communication, RecvNeverSent) {
  CommProgram program;
  program.numStages = 2;
  program.numMicrobatches = 1;
  program.ranks = {
      {CommOp{CommOpKind::Compute, {ActionKind::F, 0, 0}, -1, -1, -1}},
      {CommOp{CommOpKind::Recv, {ActionKind::F, 0, 0}, 0, 0, 0}}};
  std::optional<Deadlock> deadlock = checkDeadlock(program);
  ASSERT_TRUE(deadlock);
  EXPECT_FALSE(deadlock->isCycle);
  EXPECT_EQ(deadlock->message(),
            "deadlock: rank 1 waits in 'recv F stage 0 microbatch 0 from 0', "
            "which rank 0 never sends");
}

TEST(Communication, SparseAndNegativeSequenceNumbers) {
  // Transfers numbered far apart, or below 0 (as hand-written sched IR may
  // number them), match by their exact numbers like dense ones do.
  auto op = [](CommOpKind kind, int64_t peer, int64_t channel, int64_t seq) {
    return CommOp{kind, {ActionKind::F, 0, 0}, peer, channel, seq};
  };
  CommProgram program;
  program.numStages = 2;
  program.numMicrobatches = 1;
  program.ranks = {
      {op(CommOpKind::Send, 1, 7, 1000000000), op(CommOpKind::Send, 1, 7, -3),
       op(CommOpKind::Recv, 1, 9, 5)},
      {op(CommOpKind::Recv, 0, 7, -3), op(CommOpKind::Recv, 0, 7, 1000000000),
       op(CommOpKind::Send, 0, 9, 5)}};
  EXPECT_FALSE(checkDeadlock(program));

  // A recv of a number never sent on that channel blocks, even when the
  // channel's other numbers are sent.
  program.ranks[1][1].seq = 999999999;
  std::optional<Deadlock> deadlock = checkDeadlock(program);
  ASSERT_TRUE(deadlock);
  ASSERT_EQ(deadlock->blocked.size(), 2u);
  EXPECT_EQ(deadlock->blocked[0].rank, 0);
  EXPECT_EQ(deadlock->blocked[0].index, 2);
  EXPECT_EQ(deadlock->blocked[1].rank, 1);
  EXPECT_EQ(deadlock->blocked[1].index, 1);
}

TEST(Communication, RejectsBrokenSchedules) {
  Problem problem;
  problem.numRanks = 2;
  problem.numMicrobatches = 1;
  Schedule schedule;
  schedule.ranks = {{{ActionKind::F, 0, 0}, {ActionKind::BW, 0, 0}},
                    {{ActionKind::F, 1, 0}}};
  Result<CommProgram> program = insertCommunication(problem, schedule);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.error(), "missing B(stage 1, mb 0) (expected on rank 1)");
}

TEST(Communication, InferPlacement) {
  PlacementFit loop = inferPlacement({0, 1, 0, 1}, 2);
  EXPECT_TRUE(loop.ok);
  EXPECT_EQ(loop.placement, Placement::Loop);
  EXPECT_EQ(loop.numChunks, 2);
  PlacementFit v = inferPlacement({0, 1, 1, 0}, 2);
  EXPECT_TRUE(v.ok);
  EXPECT_EQ(v.placement, Placement::V);
  PlacementFit neither = inferPlacement({0, 1, 0, 0}, 2);
  EXPECT_FALSE(neither.ok);
  EXPECT_EQ(neither.stage, 3);
  EXPECT_EQ(neither.message,
            "the stages fit neither placement: loop placement puts stage 3 on "
            "rank 1 (not 0), v placement puts stage 2 on rank 1 (not 0)");
  PlacementFit uneven = inferPlacement({0, 1, 0}, 2);
  EXPECT_FALSE(uneven.ok);
  EXPECT_EQ(uneven.message, "3 stages do not divide evenly over 2 ranks");
  // A layout both placements fit: the preferred one; a layout only one
  // fits: that one, whatever is preferred.
  EXPECT_EQ(inferPlacement({0, 0}, 1).placement, Placement::Loop);
  PlacementFit oneRank = inferPlacement({0, 0}, 1, Placement::V);
  EXPECT_TRUE(oneRank.ok);
  EXPECT_EQ(oneRank.placement, Placement::V);
  EXPECT_EQ(inferPlacement({0, 1, 0, 1}, 2, Placement::V).placement,
            Placement::Loop);
  EXPECT_EQ(inferPlacement({0, 1, 0, 0}, 2, Placement::V).message,
            neither.message);
}

TEST(Communication, WritesSchedProgram) {
  Problem problem;
  problem.numRanks = 2;
  problem.numMicrobatches = 1;
  Result<Schedule> schedule = generateSchedule("1f1b", problem);
  ASSERT_TRUE(schedule.ok()) << schedule.error();
  Result<CommProgram> program = insertCommunication(problem, *schedule);
  ASSERT_TRUE(program.ok()) << program.error();
  std::ostringstream os;
  writeSchedProgram(*program, os);
  EXPECT_EQ(os.str(),
            "sched.program ranks 2 stages 2 microbatches 1 attributes "
            "{schedule = \"1f1b\", stage_ranks = array<i64: 0, 1>}\n"
            "rank 0 {\n"
            "  sched.compute F stage 0 microbatch 0\n"
            "  sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0\n"
            "  sched.recv BW stage 1 microbatch 0 from 1 channel 1 seq 0\n"
            "  sched.compute BW stage 0 microbatch 0\n"
            "}\n"
            "rank 1 {\n"
            "  sched.recv F stage 0 microbatch 0 from 0 channel 0 seq 0\n"
            "  sched.compute F stage 1 microbatch 0\n"
            "  sched.compute BW stage 1 microbatch 0\n"
            "  sched.send BW stage 1 microbatch 0 to 0 channel 1 seq 0\n"
            "}\n");
}

// NCCL matches transfers per link in order: loop placements keep every
// link's order; V placements, whose links carry activations and gradients
// both ways, do not, and the check names the first pair out of order.
TEST(Communication, LinkOrder) {
  for (const char *name : {"1f1b", "zb-h1", "zb-h2", "interleaved-1f1b",
                           "zb-v"}) {
    SCOPED_TRACE(name);
    const ScheduleInfo *info = lookupSchedule(name);
    ASSERT_TRUE(info);
    Problem problem = problemFor(*info, 4, 8);
    Result<Schedule> schedule = generateSchedule(name, problem);
    ASSERT_TRUE(schedule.ok()) << schedule.error();
    Result<CommProgram> program = insertCommunication(problem, *schedule);
    ASSERT_TRUE(program.ok()) << program.error();
    std::optional<std::string> misorder = checkLinkOrder(*program);
    if (info->defaultPlacement == Placement::Loop) {
      EXPECT_FALSE(misorder) << *misorder;
    } else {
      ASSERT_TRUE(misorder);
      EXPECT_NE(misorder->find("rank 0 sends '"), std::string::npos)
          << *misorder;
      EXPECT_NE(misorder->find("which receives '"), std::string::npos)
          << *misorder;
    }
  }
}

// RecvOrder::PerLink receives every link in its send order, for every
// schedule (V placements included): the same computes and sends as per
// channel, each recv still before its consumer, and no deadlock.
TEST(Communication, PerLinkOrderForEverySchedule) {
  for (const ScheduleInfo &info : knownSchedules()) {
    for (auto [p, m] : {std::pair{2, 4}, std::pair{4, 8}, std::pair{4, 9}}) {
      SCOPED_TRACE(info.name + " p=" + std::to_string(p) +
                   " m=" + std::to_string(m));
      Problem problem = problemFor(info, p, m);
      Result<Schedule> schedule = generateSchedule(info.name, problem);
      if (!schedule.ok())
        continue; // dualpipev needs m >= 2p
      Result<CommProgram> channel = insertCommunication(problem, *schedule);
      Result<CommProgram> link =
          insertCommunication(problem, *schedule, RecvOrder::PerLink);
      ASSERT_TRUE(channel.ok() && link.ok());
      EXPECT_FALSE(checkLinkOrder(*link)) << *checkLinkOrder(*link);
      std::optional<Deadlock> deadlock = checkDeadlock(*link);
      EXPECT_FALSE(deadlock) << deadlock->message();
      for (std::size_t rank = 0; rank < link->ranks.size(); ++rank) {
        // Without the recvs both programs are the same.
        auto withoutRecvs = [](const std::vector<CommOp> &ops) {
          std::vector<CommOp> kept;
          for (const CommOp &op : ops)
            if (op.kind != CommOpKind::Recv)
              kept.push_back(op);
          return kept;
        };
        EXPECT_EQ(withoutRecvs(link->ranks[rank]),
                  withoutRecvs(channel->ranks[rank]));
        // Every recv comes before the compute that consumes it.
        const std::vector<CommOp> &ops = link->ranks[rank];
        for (std::size_t i = 0; i < ops.size(); ++i) {
          if (ops[i].kind != CommOpKind::Recv)
            continue;
          int delta = ops[i].action.kind == ActionKind::F ? 1 : -1;
          bool consumedLater = false;
          for (std::size_t j = i + 1; j < ops.size() && !consumedLater; ++j)
            consumedLater =
                ops[j].kind == CommOpKind::Compute &&
                ops[j].action.microbatch == ops[i].action.microbatch &&
                ops[j].action.stage == ops[i].action.stage + delta;
          EXPECT_TRUE(consumedLater)
              << "rank " << rank << ": " << describe(ops[i]);
        }
      }
    }
  }
}
