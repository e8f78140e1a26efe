//===- ScheduleInterop.h - sched IR <-> schedule library --------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The sched dialect's phases in the schedule library's terms and back, for
// the verifier's deadlock check and the passes that build sched programs.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_SCHED_SCHEDULEINTEROP_H
#define ZB_DIALECT_SCHED_SCHEDULEINTEROP_H

#include "zb/Dialect/Sched/SchedOps.h"
#include "zb/Schedule/Schedule.h"

namespace zb::sched {

/// The library's kind of a phase; the optimizer phase has none (BW is
/// returned for it).
schedule::ActionKind toActionKind(Phase phase);

/// The phase of a library action kind.
Phase toPhase(schedule::ActionKind kind);

} // namespace zb::sched

#endif // ZB_DIALECT_SCHED_SCHEDULEINTEROP_H
