//===- OptimalTest.cpp - The exact solver ---------------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Schedule/Optimal.h"

#include "zb/Schedule/Generators.h"
#include "zb/Schedule/LowerBound.h"
#include "zb/Schedule/Simulator.h"
#include "zb/Schedule/Validator.h"

#include "Problems.h"

#include <gtest/gtest.h>

using namespace zb::schedule;

namespace {

Problem makeProblem(int p, int m, double f, double b, double w, double comm,
                    double memW, double memLimit, int chunks = 1) {
  Problem problem = test::makeProblem(p, m, f, b, w, comm, memW);
  problem.numChunks = chunks;
  problem.placement = chunks == 2 ? Placement::V : Placement::Loop;
  problem.memLimit = memLimit;
  return problem;
}

} // namespace

TEST(Optimal, ClosedFormUnderOneMicrobatchOfMemory) {
  // Two ranks that may each hold one microbatch (M_W = 0): rank 0's next F
  // waits for its B, so every microbatch runs the chain F0, F1, B1, B0 with
  // two transfers, m times over, and the last W follows: m (2F + 2B + 2c)
  // + W. Ws fill the waits. The analytic bound knows nothing of memory.
  for (int m : {2, 3, 4}) {
    Problem problem = makeProblem(2, m, 1, 1.5, 0.7, 0.1, 0, 1);
    Result<OptimalSchedule> solved = solveOptimal(problem, 20);
    ASSERT_TRUE(solved.ok()) << solved.error();
    EXPECT_TRUE(solved->proven) << "m=" << m;
    EXPECT_NEAR(solved->makespan, 5.2 * m + 0.7, 1e-6) << "m=" << m;
    EXPECT_TRUE(validate(problem, solved->schedule).empty());
    EXPECT_GT(solved->makespan, makespanLowerBound(problem).makespan + 1);
  }
}

TEST(Optimal, OneMicrobatchIsTheChain) {
  // One microbatch leaves no order to choose (no integer variable): the
  // chain F0 .. F(p-1), B(p-1) .. B0 with its transfers, then W0.
  for (int p : {1, 2, 3, 4}) {
    Problem problem = makeProblem(p, 1, 1, 2, 0.5, 0.1, 0, 0);
    Result<OptimalSchedule> solved = solveOptimal(problem, 20);
    ASSERT_TRUE(solved.ok()) << solved.error();
    EXPECT_TRUE(solved->proven) << "p=" << p;
    EXPECT_NEAR(solved->makespan, 3.0 * p + 0.2 * (p - 1) + 0.5, 1e-6)
        << "p=" << p;
    EXPECT_TRUE(validate(problem, solved->schedule).empty());
  }
}

TEST(Optimal, BelowEveryGeneratorAboveTheBound) {
  // Small problems (p <= 4, m <= 8), with and without a memory limit, loop
  // and V: the optimum (or, where the time limit stops the solver, its
  // bound) is at most every generator's makespan among the schedules that
  // fit the limit, and at least the analytic lower bound.
  struct Case {
    int p, m;
    double f, b, w, comm, memW, limit;
    int chunks;
  };
  const Case cases[] = {
      {1, 3, 1, 2, 1, 0, 0.5, 0, 1},       {2, 4, 1, 1, 1, 0.1, 0.5, 0, 1},
      {2, 4, 1, 1.5, 0.7, 0.1, 0.5, 2, 1}, {3, 6, 1, 2, 1, 0.2, 0.3, 0, 1},
      {2, 4, 1, 1, 1, 0, 0.5, 2, 2},       {4, 8, 1, 1, 1, 0.1, 0.5, 0, 1},
      {2, 5, 2, 1, 1, 0.3, 0.8, 1.5, 1},
  };
  int proven = 0;
  for (const Case &c : cases) {
    Problem problem =
        makeProblem(c.p, c.m, c.f, c.b, c.w, c.comm, c.memW, c.limit, c.chunks);
    Result<OptimalSchedule> solved = solveOptimal(problem, 5);
    ASSERT_TRUE(solved.ok()) << solved.error();
    proven += solved->proven;
    double bound = makespanLowerBound(problem).makespan;
    EXPECT_GE(solved->bound, bound - 1e-9) << "p=" << c.p << " m=" << c.m;
    EXPECT_LE(solved->bound, solved->makespan + 1e-9);
    EXPECT_TRUE(validate(problem, solved->schedule).empty());
    for (const ScheduleInfo &info : knownSchedules()) {
      Problem layout = problem;
      if (info.fixedLayout && (layout.numChunks != info.defaultChunks ||
                               layout.placement != info.defaultPlacement))
        continue;
      Result<Schedule> schedule = generateSchedule(info.name, layout);
      if (!schedule || !validate(layout, *schedule).empty())
        continue;
      Result<SimulationResult> sim = simulate(layout, *schedule);
      ASSERT_TRUE(sim.ok());
      EXPECT_GE(sim->makespan, solved->bound - 1e-9)
          << info.name << " p=" << c.p << " m=" << c.m;
      if (solved->proven) {
        EXPECT_GE(sim->makespan, solved->makespan - 1e-6)
            << info.name << " p=" << c.p << " m=" << c.m;
      }
    }
  }
  // Without a memory limit the solver meets the analytic bound here, which
  // proves it; the limited ones it proves within the time limit.
  EXPECT_GE(proven, 6);
}

TEST(Optimal, RefusesLargeProblems) {
  Problem problem = makeProblem(8, 16, 1, 1, 1, 0, 0.5, 0);
  Result<OptimalSchedule> solved = solveOptimal(problem, 1);
  ASSERT_FALSE(solved.ok());
  EXPECT_NE(solved.error().find("at most 240 actions"), std::string::npos)
      << solved.error();
}
