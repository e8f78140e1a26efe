//===- ActionIndex.h - Locate actions of a schedule --------------*- C++
//-*-===//
//
// Internal helper shared by the simulator and the validator: maps every
// (phase, stage, microbatch) to where it sits in a schedule and checks the
// schedule's structure (each action exactly once, on the right rank).
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_LIB_ACTIONINDEX_H
#define ZB_SCHEDULE_LIB_ACTIONINDEX_H

#include "zb/Schedule/Problem.h"
#include "zb/Schedule/Schedule.h"

#include <string>
#include <vector>

namespace zb::schedule::detail {

/// Where an action is: rank and position in that rank's list; -1 if absent.
struct Slot {
  int rank = -1;
  int index = -1;
};

/// A structural problem found while indexing.
struct StructuralIssue {
  enum Kind { OutOfRange, WrongRank, Duplicate, Missing, MixedBackward } kind;
  int rank;
  int index;
  Action action;
  std::string message;
};

/// Slots of every action, indexed by kind then stage*m+microbatch.
class ActionIndex {
public:
  /// Indexes `schedule`; appends structural issues to `issues`.
  ActionIndex(const Problem &problem, const Schedule &schedule,
              std::vector<StructuralIssue> &issues);

  Slot find(ActionKind kind, int stage, int microbatch) const {
    return slots[static_cast<int>(kind)][stage * numMicrobatches + microbatch];
  }

private:
  int numMicrobatches;
  std::vector<Slot> slots[4];
};

} // namespace zb::schedule::detail

#endif // ZB_SCHEDULE_LIB_ACTIONINDEX_H
