//===- Schedule.h - Per-rank action lists ------------------------*- C++
//-*-===//
//
// A schedule is one ordered list of compute actions per rank. An action names
// its phase (F, B, W, or the fused backward BW), its global stage and its
// microbatch. Timing is not part of a schedule: the simulator derives it.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_SCHEDULE_H
#define ZB_SCHEDULE_SCHEDULE_H

#include "zb/Schedule/Problem.h"

#include <cstddef>
#include <string>
#include <vector>

namespace zb::schedule {

/// The phase an action computes.
enum class ActionKind {
  /// Forward.
  F,
  /// Backward for the input gradient (on the critical path).
  B,
  /// Backward for the weight gradient (free to move after its B).
  W,
  /// Fused backward: B and W in one action (gpipe, 1f1b, interleaved-1f1b).
  BW,
};

/// "F", "B", "W" or "BW".
const char *kindName(ActionKind kind);

/// One compute action of a schedule.
struct Action {
  ActionKind kind = ActionKind::F;
  int stage = 0;
  int microbatch = 0;

  bool operator==(const Action &other) const {
    return kind == other.kind && stage == other.stage &&
           microbatch == other.microbatch;
  }
  bool operator!=(const Action &other) const { return !(*this == other); }
};

/// Renders an action as "F(stage 1, mb 0)" for diagnostics.
std::string describe(const Action &action);

/// A per-rank ordered list of actions.
struct Schedule {
  /// The generator that produced it ("zb-h1", ...) or "imported".
  std::string name;
  /// ranks[r] is rank r's program order.
  std::vector<std::vector<Action>> ranks;
  /// Set when the generator fell back to another construction: why, and
  /// what it used instead (tools show it to the user).
  std::string note;
  /// An evaluation program: F actions only (forwardPart), which is then
  /// complete without any B, W or BW.
  bool forwardOnly = false;

  std::size_t numActions() const;
  bool operator==(const Schedule &other) const { return ranks == other.ranks; }
  bool operator!=(const Schedule &other) const { return !(*this == other); }
};

/// The F actions of `schedule`, in its order on each rank, as a forward-only
/// schedule: what evaluating the model through the pipeline runs.
Schedule forwardPart(const Schedule &schedule);

/// The time `action` occupies its rank.
double actionCost(const Problem &problem, const Action &action);
/// The change in activation memory of the action's rank when it runs:
/// F +memB/v, B -(memB-memW)/v, W -memW/v, BW -memB/v.
double actionMemoryDelta(const Problem &problem, const Action &action);

} // namespace zb::schedule

#endif // ZB_SCHEDULE_SCHEDULE_H
