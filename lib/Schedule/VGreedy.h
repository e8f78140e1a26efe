//===- VGreedy.h - The greedy ZB-V construction -----------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// Internal to lib/Schedule: the greedy that builds a V-shaped zero-bubble
// schedule pass by pass with times (the construction of the ZB-V paper's
// scheduler, see PAPERS.md), and the small search around it. The zb-v
// generator takes its best result next to the automatic heuristic's.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_LIB_VGREEDY_H
#define ZB_SCHEDULE_LIB_VGREEDY_H

#include "zb/Schedule/Problem.h"
#include "zb/Schedule/Result.h"
#include "zb/Schedule/Schedule.h"

namespace zb::schedule::detail {

/// The best schedule the greedy finds for `problem` (two chunks on the V
/// placement) with at most `memLimit` activation memory per rank: over the
/// four ways of filling waits with W work (before a B, before an F), each
/// refined while the per-rank idle time it leaves improves. Fails when no
/// variant completes within the limit.
Result<Schedule> vGreedySchedule(const Problem &problem, double memLimit);

} // namespace zb::schedule::detail

#endif // ZB_SCHEDULE_LIB_VGREEDY_H
