//===- Schedule.cpp - Per-rank action lists ---------------------*- C++ -*-===//

#include "zb/Schedule/Schedule.h"

namespace zb::schedule {

const char *kindName(ActionKind kind) {
  switch (kind) {
  case ActionKind::F:
    return "F";
  case ActionKind::B:
    return "B";
  case ActionKind::W:
    return "W";
  case ActionKind::BW:
    return "BW";
  }
  return "?";
}

std::string describe(const Action &action) {
  return std::string(kindName(action.kind)) + "(stage " +
         std::to_string(action.stage) + ", mb " +
         std::to_string(action.microbatch) + ")";
}

std::size_t Schedule::numActions() const {
  std::size_t count = 0;
  for (const std::vector<Action> &rank : ranks)
    count += rank.size();
  return count;
}

Schedule forwardPart(const Schedule &schedule) {
  Schedule result;
  result.name = schedule.name;
  result.note = schedule.note;
  result.forwardOnly = true;
  for (const std::vector<Action> &rank : schedule.ranks) {
    std::vector<Action> &mine = result.ranks.emplace_back();
    for (const Action &action : rank)
      if (action.kind == ActionKind::F)
        mine.push_back(action);
  }
  return result;
}

double actionCost(const Problem &problem, const Action &action) {
  switch (action.kind) {
  case ActionKind::F:
    return problem.forwardCost(action.stage);
  case ActionKind::B:
    return problem.backwardInputCost(action.stage);
  case ActionKind::W:
    return problem.backwardWeightCost(action.stage);
  case ActionKind::BW:
    return problem.backwardInputCost(action.stage) +
           problem.backwardWeightCost(action.stage);
  }
  return 0.0;
}

double actionMemoryDelta(const Problem &problem, const Action &action) {
  switch (action.kind) {
  case ActionKind::F:
    return problem.stageMemB();
  case ActionKind::B:
    return -(problem.stageMemB() - problem.stageMemW());
  case ActionKind::W:
    return -problem.stageMemW();
  case ActionKind::BW:
    return -problem.stageMemB();
  }
  return 0.0;
}

} // namespace zb::schedule
