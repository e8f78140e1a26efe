//===- Validator.h - Check a schedule against its problem --------*- C++
//-*-===//
//
// Checks, in this order, and reports every violation found:
//  1. structure: each (stage, microbatch) has one F and either one B and one
//     W or one fused BW, on the rank that owns the stage, all in range;
//  2. dependency order among actions of the same rank (e.g. a W listed
//     before its B);
//  3. deadlock freedom of the implied send/recv order: with asynchronous
//     sends and blocking receives in program order, every rank must be able
//     to finish (no cycle through program order and cross-rank
//     dependencies);
//  4. the memory limit (when the problem sets one).
// Later checks are skipped when an earlier one failed, so the first
// diagnostic names the first violating action.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_VALIDATOR_H
#define ZB_SCHEDULE_VALIDATOR_H

#include "zb/Schedule/Problem.h"
#include "zb/Schedule/Schedule.h"

#include <algorithm>
#include <string>
#include <vector>

namespace zb::schedule {

/// What a diagnostic is about.
enum class DiagnosticKind {
  InvalidProblem,
  OutOfRange,
  WrongRank,
  Duplicate,
  Missing,
  MixedBackward,
  DependencyOrder,
  Deadlock,
  MemoryLimit,
};

/// A short lower-case name: "missing", "deadlock", "memory-limit", ...
const char *diagnosticKindName(DiagnosticKind kind);

/// One violation. `rank`/`index` locate the action in the schedule (-1 when
/// the action is absent, e.g. for Missing).
struct Diagnostic {
  DiagnosticKind kind;
  int rank = -1;
  int index = -1;
  Action action;
  std::string message;
};

/// Whether activation memory `memory` breaks the limit `limit` (none when
/// `limit` <= 0), with the rounding tolerance of summed stage sizes: the
/// validator's memory rule, which generators that check the limit share.
inline bool exceedsMemoryLimit(double memory, double limit) {
  return limit > 0 && memory > limit + 1e-9 * std::max(1.0, limit);
}

/// Returns all violations; empty means the schedule is valid.
std::vector<Diagnostic> validate(const Problem &problem,
                                 const Schedule &schedule);

} // namespace zb::schedule

#endif // ZB_SCHEDULE_VALIDATOR_H
