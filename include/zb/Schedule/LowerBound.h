//===- LowerBound.h - Provable lower bound on the makespan -------*- C++
//-*-===//
//
// A lower bound on the makespan of every schedule of a problem (any order,
// split or fused backward, any memory), and the gap of a schedule to it.
// The proof is in LowerBound.cpp and docs/Schedules.md.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_LOWERBOUND_H
#define ZB_SCHEDULE_LOWERBOUND_H

#include "zb/Schedule/Problem.h"

namespace zb::schedule {

/// Which argument gave the bound (for reports).
enum class BoundReason {
  /// One microbatch's F chain, B chain and last W.
  CriticalPath,
  /// A rank's work after the forward ramp reaches it.
  RampAndWork,
  /// A rank's F and B work after the ramp, plus the backward tail after it.
  RampWorkAndTail,
  /// A rank's B and W work after the first gradient reaches it.
  FirstGradientAndWork,
};

struct LowerBound {
  double makespan = 0.0;
  BoundReason reason = BoundReason::CriticalPath;
  /// The rank the bound comes from (-1 for the critical path).
  int rank = -1;
};

/// The largest of the bounds described in LowerBound.cpp. The problem must
/// verify().
LowerBound makespanLowerBound(const Problem &problem);

/// (makespan - bound) / bound; 0 when the bound is 0.
double gapToLowerBound(double makespan, double bound);

} // namespace zb::schedule

#endif // ZB_SCHEDULE_LOWERBOUND_H
