//===- ActionIndex.cpp - Locate actions of a schedule -----------*- C++ -*-===//

#include "ActionIndex.h"

namespace zb::schedule::detail {

ActionIndex::ActionIndex(const Problem &problem, const Schedule &schedule,
                         std::vector<StructuralIssue> &issues)
    : numMicrobatches(problem.numMicrobatches) {
  int numStages = problem.numStages();
  int m = problem.numMicrobatches;
  for (std::vector<Slot> &table : slots)
    table.assign(static_cast<std::size_t>(numStages) * m, Slot());

  for (int rank = 0; rank < static_cast<int>(schedule.ranks.size()); ++rank) {
    const std::vector<Action> &actions = schedule.ranks[rank];
    for (int index = 0; index < static_cast<int>(actions.size()); ++index) {
      const Action &action = actions[index];
      if (action.stage < 0 || action.stage >= numStages ||
          action.microbatch < 0 || action.microbatch >= m) {
        issues.push_back(
            {StructuralIssue::OutOfRange, rank, index, action,
             describe(action) + " on rank " + std::to_string(rank) +
                 " is out of range (stages 0.." +
                 std::to_string(numStages - 1) + ", microbatches 0.." +
                 std::to_string(m - 1) + ")"});
        continue;
      }
      if (rank >= problem.numRanks ||
          problem.rankOfStage(action.stage) != rank) {
        issues.push_back(
            {StructuralIssue::WrongRank, rank, index, action,
             describe(action) + " is on rank " + std::to_string(rank) +
                 " but stage " + std::to_string(action.stage) +
                 " belongs to rank " +
                 std::to_string(problem.rankOfStage(action.stage))});
        continue;
      }
      Slot &slot = slots[static_cast<int>(action.kind)]
                        [action.stage * m + action.microbatch];
      if (slot.rank >= 0) {
        issues.push_back({StructuralIssue::Duplicate, rank, index, action,
                          describe(action) + " appears twice on rank " +
                              std::to_string(rank) + " (positions " +
                              std::to_string(slot.index) + " and " +
                              std::to_string(index) + ")"});
        continue;
      }
      slot = {rank, index};
    }
  }
  if (static_cast<int>(schedule.ranks.size()) != problem.numRanks)
    issues.push_back({StructuralIssue::Missing, -1, -1, Action(),
                      "schedule has " + std::to_string(schedule.ranks.size()) +
                          " ranks, the problem has " +
                          std::to_string(problem.numRanks)});

  for (int stage = 0; stage < numStages; ++stage) {
    for (int mb = 0; mb < m; ++mb) {
      int rank = problem.rankOfStage(stage);
      auto has = [&](ActionKind kind) {
        return find(kind, stage, mb).rank >= 0;
      };
      auto missing = [&](ActionKind kind) {
        Action action{kind, stage, mb};
        issues.push_back({StructuralIssue::Missing, rank, -1, action,
                          "missing " + describe(action) +
                              " (expected on rank " + std::to_string(rank) +
                              ")"});
      };
      if (!has(ActionKind::F))
        missing(ActionKind::F);
      if (schedule.forwardOnly) {
        for (ActionKind kind : {ActionKind::B, ActionKind::W, ActionKind::BW})
          if (Slot slot = find(kind, stage, mb); slot.rank >= 0) {
            Action action{kind, stage, mb};
            issues.push_back(
                {StructuralIssue::MixedBackward, slot.rank, slot.index, action,
                 describe(action) + " on rank " + std::to_string(slot.rank) +
                     " in a forward-only schedule"});
          }
        continue;
      }
      bool fused = has(ActionKind::BW);
      if (fused && (has(ActionKind::B) || has(ActionKind::W))) {
        Slot slot = find(ActionKind::BW, stage, mb);
        Action action{ActionKind::BW, stage, mb};
        issues.push_back(
            {StructuralIssue::MixedBackward, slot.rank, slot.index, action,
             describe(action) + " on rank " + std::to_string(slot.rank) +
                 " repeats a split B or W of the same stage and "
                 "microbatch"});
        continue;
      }
      if (fused)
        continue;
      if (!has(ActionKind::B))
        missing(ActionKind::B);
      if (!has(ActionKind::W))
        missing(ActionKind::W);
    }
  }
}

} // namespace zb::schedule::detail
