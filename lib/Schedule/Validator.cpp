//===- Validator.cpp - Check a schedule against its problem -----*- C++ -*-===//

#include "zb/Schedule/Validator.h"

#include "ActionIndex.h"

#include "zb/Schedule/Communication.h"
#include "zb/Schedule/Simulator.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace zb::schedule {

const char *diagnosticKindName(DiagnosticKind kind) {
  switch (kind) {
  case DiagnosticKind::InvalidProblem:
    return "invalid-problem";
  case DiagnosticKind::OutOfRange:
    return "out-of-range";
  case DiagnosticKind::WrongRank:
    return "wrong-rank";
  case DiagnosticKind::Duplicate:
    return "duplicate";
  case DiagnosticKind::Missing:
    return "missing";
  case DiagnosticKind::MixedBackward:
    return "mixed-backward";
  case DiagnosticKind::DependencyOrder:
    return "dependency-order";
  case DiagnosticKind::Deadlock:
    return "deadlock";
  case DiagnosticKind::MemoryLimit:
    return "memory-limit";
  }
  return "unknown";
}

static DiagnosticKind toKind(detail::StructuralIssue::Kind kind) {
  switch (kind) {
  case detail::StructuralIssue::OutOfRange:
    return DiagnosticKind::OutOfRange;
  case detail::StructuralIssue::WrongRank:
    return DiagnosticKind::WrongRank;
  case detail::StructuralIssue::Duplicate:
    return DiagnosticKind::Duplicate;
  case detail::StructuralIssue::Missing:
    return DiagnosticKind::Missing;
  case detail::StructuralIssue::MixedBackward:
    return DiagnosticKind::MixedBackward;
  }
  return DiagnosticKind::OutOfRange;
}

/// The backward action (B or fused BW) of (stage, mb).
static detail::Slot backwardSlot(const detail::ActionIndex &index, int stage,
                                 int mb, Action &action) {
  detail::Slot slot = index.find(ActionKind::B, stage, mb);
  action = {ActionKind::B, stage, mb};
  if (slot.rank < 0) {
    slot = index.find(ActionKind::BW, stage, mb);
    action.kind = ActionKind::BW;
  }
  return slot;
}

/// Dependencies of an action: (action, slot) pairs.
static std::vector<std::pair<Action, detail::Slot>>
dependencies(const Problem &problem, const detail::ActionIndex &index,
             const Action &action) {
  std::vector<std::pair<Action, detail::Slot>> deps;
  int s = action.stage, j = action.microbatch;
  switch (action.kind) {
  case ActionKind::F:
    if (s > 0)
      deps.push_back({Action{ActionKind::F, s - 1, j},
                      index.find(ActionKind::F, s - 1, j)});
    break;
  case ActionKind::B:
  case ActionKind::BW:
    deps.push_back(
        {Action{ActionKind::F, s, j}, index.find(ActionKind::F, s, j)});
    if (s + 1 < problem.numStages()) {
      Action back;
      detail::Slot slot = backwardSlot(index, s + 1, j, back);
      deps.push_back({back, slot});
    }
    break;
  case ActionKind::W: {
    Action back;
    detail::Slot slot = backwardSlot(index, s, j, back);
    deps.push_back({back, slot});
    break;
  }
  }
  return deps;
}

std::vector<Diagnostic> validate(const Problem &problem,
                                 const Schedule &schedule) {
  std::vector<Diagnostic> diagnostics;
  std::string error;
  if (!problem.verify(error)) {
    diagnostics.push_back({DiagnosticKind::InvalidProblem, -1, -1, Action(),
                           "invalid problem: " + error});
    return diagnostics;
  }

  // 1. Structure.
  std::vector<detail::StructuralIssue> issues;
  detail::ActionIndex index(problem, schedule, issues);
  for (const detail::StructuralIssue &issue : issues)
    diagnostics.push_back({toKind(issue.kind), issue.rank, issue.index,
                           issue.action, issue.message});
  if (!diagnostics.empty())
    return diagnostics;

  // 2. Same-rank dependency order.
  for (int rank = 0; rank < problem.numRanks; ++rank) {
    const std::vector<Action> &actions = schedule.ranks[rank];
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      for (const auto &[dep, slot] : dependencies(problem, index, actions[i])) {
        if (slot.rank != rank || slot.index < i)
          continue;
        diagnostics.push_back(
            {DiagnosticKind::DependencyOrder, rank, i, actions[i],
             describe(actions[i]) + " at position " + std::to_string(i) +
                 " on rank " + std::to_string(rank) +
                 " comes before its dependency " + describe(dep) +
                 " at position " + std::to_string(slot.index)});
      }
    }
  }
  if (!diagnostics.empty())
    return diagnostics;

  // 3. Deadlock: insert the transfers the schedule implies and run all
  //    ranks (checkDeadlock); each blocked rank gets a diagnostic at the
  //    compute action its blocking recv precedes.
  {
    Result<CommProgram> program = insertCommunication(problem, schedule);
    if (!program) {
      diagnostics.push_back(
          {DiagnosticKind::InvalidProblem, -1, -1, Action(), program.error()});
      return diagnostics;
    }
    if (std::optional<Deadlock> deadlock = checkDeadlock(*program)) {
      for (const Deadlock::Wait &wait : deadlock->blocked) {
        const std::vector<CommOp> &ops = program->ranks[wait.rank];
        int position = static_cast<int>(std::count_if(
            ops.begin(), ops.begin() + wait.index,
            [](const CommOp &op) { return op.kind == CommOpKind::Compute; }));
        const Action &stuck = schedule.ranks[wait.rank][position];
        // The recvs before a compute are all on the channel of its input,
        // in seq order; the last one is its own input.
        int consumer = wait.index;
        while (ops[consumer].kind != CommOpKind::Compute)
          ++consumer;
        const CommOp &recv = ops[consumer - 1];
        std::ostringstream message;
        message << "deadlock: " << describe(stuck) << " at position "
                << position << " on rank " << wait.rank << " waits for "
                << describe(recv.action) << " from rank " << recv.peer << " ("
                << deadlock->cycleText << ")";
        diagnostics.push_back({DiagnosticKind::Deadlock, wait.rank, position,
                               stuck, message.str()});
      }
      return diagnostics;
    }
  }

  // 4. Memory limit.
  if (problem.memLimit > 0) {
    for (int rank = 0; rank < problem.numRanks; ++rank) {
      const std::vector<Action> &actions = schedule.ranks[rank];
      double memory = 0.0;
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        memory += actionMemoryDelta(problem, actions[i]);
        if (!exceedsMemoryLimit(memory, problem.memLimit))
          continue;
        std::ostringstream message;
        message << describe(actions[i]) << " at position " << i << " on rank "
                << rank << " raises activation memory to " << memory
                << ", above the limit " << problem.memLimit;
        diagnostics.push_back(
            {DiagnosticKind::MemoryLimit, rank, i, actions[i], message.str()});
        break;
      }
    }
  }
  return diagnostics;
}

} // namespace zb::schedule
