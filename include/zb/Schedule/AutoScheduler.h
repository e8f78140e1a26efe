//===- AutoScheduler.h - Memory-limited greedy scheduler ----*- C++ -*-===//
//
// The automatic scheduler of the zero-bubble paper, as an event-driven list
// scheduler that works for any placement and chunk count:
//  * warm-up: a rank issues Fs while they fit in the memory limit until its
//    first B arrives (optionally not letting an F overrun that arrival);
//  * steady state: B first (it is on the critical path), then F, and a
//    pending W whenever the rank would otherwise idle and the W fits before
//    the next input arrives, or when memory must be freed for the next F;
//    optionally one W even if it does not fit, when waiting would raise this
//    rank's accumulated idle above the worst rank's;
//  * optionally a rank more than `maxLead` Fs ahead of its successor runs a
//    pending W instead of another F;
//  * the remaining Ws at the end.
// Memory admission keeps room for one activation of each later chunk, so the
// scheduler never deadlocks at any limit that holds one microbatch (memB).
// autoSchedule() tries every combination of the binary choices (and, for one
// chunk per rank, the paper's round-by-round variant) and keeps the schedule
// with the smallest max span.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_AUTOSCHEDULER_H
#define ZB_SCHEDULE_AUTOSCHEDULER_H

#include "zb/Schedule/Problem.h"
#include "zb/Schedule/Result.h"
#include "zb/Schedule/Schedule.h"

namespace zb::schedule {

/// When an idle rank runs a pending W that does not fit before the next
/// input arrives.
enum class WeightFill {
  /// Only when it fits (or memory requires it).
  IfFits,
  /// Also when at least half of it fits.
  MostlyFits,
  /// Also when waiting would raise this rank's idle above the worst rank's.
  BalanceIdle,
  /// Always rather than idle.
  Always,
};

/// One point of the heuristic's search space.
struct GreedyOptions {
  /// Peak activation memory per rank; must be at least problem.memB.
  double memLimit = 0.0;
  /// Let an F start even though it delays a B that arrives during it.
  bool allowOverrun = true;
  /// With allowOverrun false: still let rank 0 overrun (it delays no other
  /// rank's first B when it holds stage 0 only).
  bool firstRankOverruns = false;
  WeightFill weightFill = WeightFill::IfFits;
  /// Run a W instead of an F when the rank is more than this many Fs ahead
  /// of the next stage's rank; negative disables the rule.
  int maxLead = -1;
  /// Among ready Fs (Bs) of several chunks, prefer the later stage.
  bool forwardPreferLaterStage = true;
  bool backwardPreferLaterStage = false;
};

/// Runs the heuristic once with `options`.
Result<Schedule> greedySchedule(const Problem &problem,
                                const GreedyOptions &options);

/// Grid search over the binary choices of GreedyOptions at `memLimit`, and
/// for one chunk per rank also over the choices of the paper's own
/// round-by-round heuristic (warm-up counts and W fills from its time
/// estimates, T_comm included); returns the schedule with the smallest max
/// span (the bubble rate's numerator), ties broken by makespan.
Result<Schedule> autoSchedule(const Problem &problem, double memLimit);

} // namespace zb::schedule

#endif // ZB_SCHEDULE_AUTOSCHEDULER_H
