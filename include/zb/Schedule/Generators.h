//===- Generators.h - Named pipeline schedule generators ---------*- C++
//-*-===//
//
// One entry point, generateSchedule(name, problem), for every schedule of the
// papers: gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zb-auto, zb-v, v-half
// and v-min. See docs/Schedules.md for what each one does.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_GENERATORS_H
#define ZB_SCHEDULE_GENERATORS_H

#include "zb/Schedule/Problem.h"
#include "zb/Schedule/Result.h"
#include "zb/Schedule/Schedule.h"

#include <string>
#include <vector>

namespace zb::schedule {

/// What a named schedule needs from the problem's layout.
struct ScheduleInfo {
  std::string name;
  std::string summary;
  /// Chunks per rank to use when the user gives none.
  int defaultChunks = 1;
  Placement defaultPlacement = Placement::Loop;
  /// Exactly defaultChunks chunks and defaultPlacement are required.
  bool fixedLayout = false;
  /// At least this many chunks (interleaved-1f1b: 2).
  int minChunks = 1;
  /// Splits the backward into B and W (otherwise emits fused BW).
  bool splitBackward = true;

  /// The chunks per rank when `requested` are asked for (0: the default).
  int chunksFor(int64_t requested) const {
    return requested ? static_cast<int>(requested) : defaultChunks;
  }
};

/// All known schedules, in the order of the documentation.
const std::vector<ScheduleInfo> &knownSchedules();
/// The entry for `name`, or nullptr.
const ScheduleInfo *lookupSchedule(const std::string &name);
/// Comma-separated list of known names, for messages.
std::string knownScheduleNames();

/// What keeps schedule `name` from `problem`'s layout (ranks, chunks,
/// placement, microbatches), whatever its costs: an unknown name, chunks
/// or a placement the schedule cannot use, microbatches it cannot group
/// (interleaved-1f1b: a multiple of the ranks; dualpipev: at least 2p).
/// Empty when nothing does. generateSchedule() checks it; a launcher
/// checks it before it starts any rank.
std::string layoutProblem(const std::string &name, const Problem &problem);

/// Generates schedule `name` for `problem`. Fails with a one-line message for
/// unknown names, invalid problems, or layouts the schedule cannot use.
/// Memory-aware generators (zb-auto, zb-v, v-half, v-min) respect
/// problem.memLimit when it is set; zb-auto defaults to 2*p*memB.
Result<Schedule> generateSchedule(const std::string &name,
                                  const Problem &problem);

/// The memory limit a memory-aware generator targets for `problem`: zb-auto
/// problem.memLimit when it is set, else 2*p*memB; the V shapes their
/// peaks in units of max(memB, memW) (zb-v p of them), at most
/// problem.memLimit when it is set.
double targetMemoryLimit(const std::string &name, const Problem &problem);

} // namespace zb::schedule

#endif // ZB_SCHEDULE_GENERATORS_H
