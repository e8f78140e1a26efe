//===- LowerBound.cpp - Provable lower bound on the makespan ----*- C++ -*-===//
//
// Notation: S = p*v stages, c(s,s') the transfer cost between stages, and
// f(s), b(s), w(s) the stage costs. Every schedule starts at time 0 (F(0,j)
// has no dependency, and the simulator starts actions as early as allowed).
//
//   headF(s) = sum_{t<s} (f(t) + c(t,t+1))       earliest start of any F(s,j)
//   headB(s) = headF(S-1) + f(S-1)
//              + sum_{t>s} (b(t) + c(t,t-1))     earliest start of any B(s,j)
//   chain(s) = sum_{t<s} (c(t+1,t) + b(t))       B's that follow B(s,j)
//   tail(s)  = max(w(s), chain(s) + [s>0] w(0))  work forced after B(s,j)
//
// For rank r with stages St(r), total work WF_r + WB_r + WW_r (sums of f, b,
// w over its stages times m):
//
// (1) Critical path: makespan >= headB(0) + b(0) + w(0), since the chain
//     F(0,j)..F(S-1,j), B(S-1,j)..B(0,j), W(0,j) is totally ordered.
// (2) Ramp and work: every action on r is (after) an F of one of its stages,
//     so nothing runs on r before h_r = min_{s in St(r)} headF(s); r runs one
//     action at a time, so makespan >= h_r + WF_r + WB_r + WW_r.
// (3) Ramp, work and tail: let X(s,j) be the action containing the last B
//     part to finish on r (a B or a fused BW). Every F and B part of r ends
//     by then (each F precedes its own B), so X ends at E >= h_r + WF_r +
//     WB_r. After E: if X is a split B, W(s,j) still runs on r (w(s)) and,
//     for s > 0, B(s-1,j)..B(0,j) and W(0,j) run in sequence (chain(s) +
//     w(0)); so makespan >= E + tail(s). If X is a fused BW, its own W part
//     adds w(s) to E and the fused chain below it costs at least chain(s) +
//     [s>0] w(0), which again is >= tail(s). Minimising over s in St(r):
//     makespan >= h_r + WF_r + WB_r + min_s tail(s).
// (4) First gradient: no B part runs on r before g_r = min_s headB(s), and
//     every W part follows a B part of r, so makespan >= g_r + WB_r + WW_r;
//     likewise (as in (3)) makespan >= g_r + WB_r + min_s tail(s).
//
// Every term only uses facts true of all schedules, so their maximum is a
// lower bound on every makespan.
//
//===----------------------------------------------------------------------===//

#include "zb/Schedule/LowerBound.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace zb::schedule {

LowerBound makespanLowerBound(const Problem &problem) {
  int numStages = problem.numStages();
  double m = problem.numMicrobatches;
  std::vector<double> headF(numStages, 0.0), headB(numStages, 0.0),
      chain(numStages, 0.0), tail(numStages, 0.0);
  for (int s = 1; s < numStages; ++s)
    headF[s] =
        headF[s - 1] + problem.forwardCost(s - 1) + problem.commCost(s - 1, s);
  headB[numStages - 1] =
      headF[numStages - 1] + problem.forwardCost(numStages - 1);
  for (int s = numStages - 2; s >= 0; --s)
    headB[s] = headB[s + 1] + problem.backwardInputCost(s + 1) +
               problem.commCost(s + 1, s);
  for (int s = 1; s < numStages; ++s)
    chain[s] = chain[s - 1] + problem.commCost(s, s - 1) +
               problem.backwardInputCost(s - 1);
  for (int s = 0; s < numStages; ++s)
    tail[s] = std::max(problem.backwardWeightCost(s),
                       chain[s] + (s > 0 ? problem.backwardWeightCost(0) : 0));

  LowerBound best;
  best.makespan =
      headB[0] + problem.backwardInputCost(0) + problem.backwardWeightCost(0);
  auto consider = [&](double value, BoundReason reason, int rank) {
    if (value > best.makespan)
      best = {value, reason, rank};
  };
  for (int rank = 0; rank < problem.numRanks; ++rank) {
    double ramp = std::numeric_limits<double>::infinity();
    double gradient = ramp, minTail = ramp;
    double workF = 0, workB = 0, workW = 0;
    for (int s : problem.stagesOfRank(rank)) {
      ramp = std::min(ramp, headF[s]);
      gradient = std::min(gradient, headB[s]);
      minTail = std::min(minTail, tail[s]);
      workF += m * problem.forwardCost(s);
      workB += m * problem.backwardInputCost(s);
      workW += m * problem.backwardWeightCost(s);
    }
    consider(ramp + workF + workB + workW, BoundReason::RampAndWork, rank);
    consider(ramp + workF + workB + minTail, BoundReason::RampWorkAndTail,
             rank);
    consider(gradient + workB + workW, BoundReason::FirstGradientAndWork, rank);
    consider(gradient + workB + minTail, BoundReason::FirstGradientAndWork,
             rank);
  }
  return best;
}

double gapToLowerBound(double makespan, double bound) {
  return bound > 0 ? (makespan - bound) / bound : 0.0;
}

} // namespace zb::schedule
