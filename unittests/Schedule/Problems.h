//===- Problems.h - Problems the schedule tests share -----------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_UNITTESTS_SCHEDULE_PROBLEMS_H
#define ZB_UNITTESTS_SCHEDULE_PROBLEMS_H

#include "zb/Schedule/Problem.h"

namespace zb::schedule::test {

/// p ranks, m microbatches, uniform F/B/W costs, transfer cost `comm`, one
/// microbatch's activations the memory unit (M_B = 1) and M_W = `memW`.
inline Problem makeProblem(int p, int m, double f, double b, double w,
                           double comm = 0.0, double memW = 0.5) {
  Problem problem;
  problem.numRanks = p;
  problem.numMicrobatches = m;
  problem.costF = f;
  problem.costB = b;
  problem.costW = w;
  problem.costComm = comm;
  problem.memB = 1.0;
  problem.memW = memW;
  return problem;
}

} // namespace zb::schedule::test

#endif // ZB_UNITTESTS_SCHEDULE_PROBLEMS_H
