//===- Optimal.h - The minimum-makespan schedule, proven --------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// An exact solver for small problems: the schedule with the least makespan
// among all schedules that split the backward into B and W (a fused BW is
// the case of a W right after its B, so no schedule of any generator does
// better) and keep every rank's activation memory within problem.memLimit
// (0: no limit). It is a mixed-integer program solved with CBC: a start
// time per action, precedence with the transfer cost between ranks, one
// order variable per pair of actions on a rank that no dependency orders,
// and per forward the memory of what its rank holds then. The search starts
// from the best generator's schedule that fits; a time limit stops it with
// the best schedule found and the solver's lower bound on the optimum.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_OPTIMAL_H
#define ZB_SCHEDULE_OPTIMAL_H

#include "zb/Schedule/Problem.h"
#include "zb/Schedule/Result.h"
#include "zb/Schedule/Schedule.h"

namespace zb::schedule {

struct OptimalSchedule {
  /// The best schedule found (named "optimal"), in start-time order.
  Schedule schedule;
  /// Its makespan (the simulator's), and the solver's lower bound on the
  /// optimum; equal when `proven`.
  double makespan = 0.0;
  double bound = 0.0;
  /// Whether the solver proved `schedule` optimal within the time limit.
  bool proven = false;
  /// Seconds the solver ran.
  double seconds = 0.0;
};

/// The largest problem the solver takes: actions (3 per stage and
/// microbatch) in all.
constexpr int kMaxOptimalActions = 240;

/// Solves `problem` (which must verify()) within `timeLimitSeconds`. Fails
/// on a problem with more than kMaxOptimalActions actions, or when no
/// schedule within the memory limit exists or is found.
Result<OptimalSchedule> solveOptimal(const Problem &problem,
                                     double timeLimitSeconds);

} // namespace zb::schedule

#endif // ZB_SCHEDULE_OPTIMAL_H
