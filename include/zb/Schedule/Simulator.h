//===- Simulator.h - Event-driven execution of a schedule --------*- C++
//-*-===//
//
// Runs a schedule on the problem's cost model: each rank executes its list in
// order; an action starts as soon as its rank is free and its dependencies
// have finished (plus costComm for a dependency on another rank):
//   F(s,j)  after F(s-1,j)
//   B(s,j)  after F(s,j) and after the backward (B or BW) of (s+1,j)
//   BW(s,j) like B(s,j)
//   W(s,j)  after B(s,j)
// Sends are asynchronous and receives block, so a schedule whose implied
// send/recv order could deadlock never completes; simulate() reports it.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_SIMULATOR_H
#define ZB_SCHEDULE_SIMULATOR_H

#include "zb/Schedule/Problem.h"
#include "zb/Schedule/Result.h"
#include "zb/Schedule/Schedule.h"

#include <vector>

namespace zb::schedule {

/// One action with the times the simulator gave it.
struct TimedAction {
  Action action;
  double start = 0.0;
  double end = 0.0;
};

/// What a simulation measured.
struct SimulationResult {
  /// timeline[r] mirrors schedule.ranks[r], with times (empty when not
  /// asked for).
  std::vector<std::vector<TimedAction>> timeline;
  /// Latest end minus earliest start over all actions and gradient
  /// reductions (Problem::stageCostReduce).
  double makespan = 0.0;
  /// Per rank: when its last gradient reduction ends (0 without any).
  std::vector<double> reduceEnd;
  /// What the reductions add to the step: the makespan minus the latest end
  /// of an action (0 when they hide behind the remaining compute).
  double exposedReduction = 0.0;
  /// Per rank: end of its last action minus start of its first.
  std::vector<double> rankSpan;
  /// Per rank: time spent computing.
  std::vector<double> rankBusy;
  /// Per rank: highest activation memory reached (running sum of
  /// actionMemoryDelta in program order).
  std::vector<double> peakMemory;
  /// max(rankSpan).
  double maxSpan = 0.0;
  /// bubbleRate(rankSpan, rankBusy): the largest per-rank busy time is the
  /// largest per-rank total m*(T_F+T_B+T_W).
  double bubbleRate = 0.0;

  /// max(peakMemory).
  double maxPeakMemory() const;
};

/// The bubble rate of a step whose ranks spent `rankSpan` (first start to
/// last end) and `rankBusy` (computing) each: (maxSpan - work) / maxSpan
/// with work the largest busy time (DESIGN.md's definition). The one
/// definition: the simulator applies it to simulated times, zb-run to
/// measured ones.
double bubbleRate(const std::vector<double> &rankSpan,
                  const std::vector<double> &rankBusy);

/// Simulates `schedule`. Fails when the problem or the schedule is malformed
/// (see validate() for full diagnostics) or when execution deadlocks.
/// Without `timeline` the result's timeline stays empty (everything else is
/// the same): for callers that compare schedules by their figures.
Result<SimulationResult> simulate(const Problem &problem,
                                  const Schedule &schedule,
                                  bool timeline = true);

/// Per rank, the highest running sum of actionMemoryDelta in program order.
std::vector<double> peakMemoryPerRank(const Problem &problem,
                                      const Schedule &schedule);

} // namespace zb::schedule

#endif // ZB_SCHEDULE_SIMULATOR_H
