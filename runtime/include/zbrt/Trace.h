//===- Trace.h - What a rank program did, and when --------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The recorder behind zbrt_action_begin / zbrt_action_end and the allocator
// of compiled code (zbrt.h): every scheduled action a rank program runs is
// recorded with its start and end on the steady clock and with the bytes
// compiled code held when it ended. zb-run turns the records into the
// measured bubble rate, the profile (mean F/B/W time per stage), the Chrome
// trace and the peak stash memory.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_TRACE_H
#define ZBRT_TRACE_H

#include <cstdint>
#include <vector>

namespace zbrt {

/// One action of a rank program.
struct ActionRecord {
  /// 0 F, 1 B, 2 W, 3 BW (the schedule library's ActionKind order).
  int32_t phase = 0;
  int64_t stage = 0;
  int64_t microbatch = 0;
  /// Seconds on traceClock().
  double start = 0.0;
  double end = 0.0;
  /// Bytes compiled code held (allocated, not yet freed) at the end.
  int64_t liveBytes = 0;
};

/// Seconds on the steady clock (CLOCK_MONOTONIC: the same clock for every
/// process of one machine).
double traceClock();

/// Returns the actions recorded since the last call and forgets them.
std::vector<ActionRecord> takeActionRecords();

/// Bytes compiled code holds now, and the most it held since the last
/// resetPeakLiveBytes().
int64_t liveBytes();
int64_t peakLiveBytes();
void resetPeakLiveBytes();

/// Seconds spent in zbrt_wait_group_sums since the last call (the part of
/// the gradient reductions the rank's remaining compute did not hide), and
/// forgets them.
double takeReductionWaitSeconds();
/// Adds to what takeReductionWaitSeconds() returns.
void addReductionWaitSeconds(double seconds);

} // namespace zbrt

#endif // ZBRT_TRACE_H
