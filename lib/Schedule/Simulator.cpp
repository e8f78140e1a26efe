//===- Simulator.cpp - Event-driven execution of a schedule -----*- C++ -*-===//

#include "zb/Schedule/Simulator.h"

#include "ActionIndex.h"

#include <algorithm>
#include <limits>

namespace zb::schedule {

double SimulationResult::maxPeakMemory() const {
  double peak = 0.0;
  for (double value : peakMemory)
    peak = std::max(peak, value);
  return peak;
}

std::vector<double> peakMemoryPerRank(const Problem &problem,
                                      const Schedule &schedule) {
  std::vector<double> peaks;
  for (const std::vector<Action> &actions : schedule.ranks) {
    double memory = 0.0, peak = 0.0;
    for (const Action &action : actions) {
      memory += actionMemoryDelta(problem, action);
      peak = std::max(peak, memory);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

namespace {
/// Finish times of actions, by kind, indexed stage*m+microbatch; negative
/// while not yet simulated.
struct EndTimes {
  int m;
  std::vector<double> forward, backward, weight;
  EndTimes(int numStages, int m)
      : m(m), forward(static_cast<std::size_t>(numStages) * m, -1.0),
        backward(forward), weight(forward) {}
};
} // namespace

/// When all dependencies of `action` are done, sets `ready` to the time it
/// may start and returns true.
static bool dependenciesDone(const Problem &problem, const EndTimes &ends,
                             const Action &action, double &ready) {
  int s = action.stage, j = action.microbatch, m = ends.m;
  ready = 0.0;
  switch (action.kind) {
  case ActionKind::F:
    if (s > 0) {
      double end = ends.forward[(s - 1) * m + j];
      if (end < 0)
        return false;
      ready = end + problem.commCost(s - 1, s);
    }
    return true;
  case ActionKind::B:
  case ActionKind::BW: {
    double end = ends.forward[s * m + j];
    if (end < 0)
      return false;
    ready = end;
    if (s + 1 < problem.numStages()) {
      double next = ends.backward[(s + 1) * m + j];
      if (next < 0)
        return false;
      ready = std::max(ready, next + problem.commCost(s + 1, s));
    }
    return true;
  }
  case ActionKind::W: {
    double end = ends.backward[s * m + j];
    if (end < 0)
      return false;
    ready = end;
    return true;
  }
  }
  return false;
}

Result<SimulationResult> simulate(const Problem &problem,
                                  const Schedule &schedule, bool timeline) {
  std::string error;
  if (!problem.verify(error))
    return Failure{"invalid problem: " + error};
  std::vector<detail::StructuralIssue> issues;
  detail::ActionIndex index(problem, schedule, issues);
  if (!issues.empty())
    return Failure{"malformed schedule: " + issues.front().message};

  int p = problem.numRanks;
  EndTimes ends(problem.numStages(), problem.numMicrobatches);
  SimulationResult result;
  if (timeline)
    result.timeline.resize(p);
  std::vector<std::size_t> next(p, 0);
  std::vector<double> freeAt(p, 0.0);
  std::vector<double> firstStart(p, -1.0);
  result.rankSpan.assign(p, 0.0);
  result.rankBusy.assign(p, 0.0);
  // Per stage: when its last gradient (W or BW) ends.
  std::vector<double> lastGrad(problem.numStages(), -1.0);
  std::size_t remaining = schedule.numActions();

  bool progress = true;
  while (remaining > 0 && progress) {
    progress = false;
    for (int rank = 0; rank < p; ++rank) {
      const std::vector<Action> &actions = schedule.ranks[rank];
      while (next[rank] < actions.size()) {
        const Action &action = actions[next[rank]];
        double ready;
        if (!dependenciesDone(problem, ends, action, ready))
          break;
        double start = std::max(ready, freeAt[rank]);
        double end = start + actionCost(problem, action);
        int key = action.stage * problem.numMicrobatches + action.microbatch;
        if (action.kind == ActionKind::F)
          ends.forward[key] = end;
        else if (action.kind == ActionKind::W)
          ends.weight[key] = end;
        else
          ends.backward[key] = end;
        if (action.kind == ActionKind::W || action.kind == ActionKind::BW)
          lastGrad[action.stage] = std::max(lastGrad[action.stage], end);
        if (timeline)
          result.timeline[rank].push_back({action, start, end});
        if (firstStart[rank] < 0)
          firstStart[rank] = start;
        result.rankSpan[rank] = end - firstStart[rank];
        result.rankBusy[rank] += end - start;
        freeAt[rank] = end;
        ++next[rank];
        --remaining;
        progress = true;
      }
    }
  }
  if (remaining > 0) {
    for (int rank = 0; rank < p; ++rank) {
      if (next[rank] < schedule.ranks[rank].size())
        return Failure{"deadlock: rank " + std::to_string(rank) +
                       " waits forever at " +
                       describe(schedule.ranks[rank][next[rank]]) +
                       " (position " + std::to_string(next[rank]) + ")"};
    }
  }

  double first = std::numeric_limits<double>::infinity(), last = 0.0;
  for (int rank = 0; rank < p; ++rank) {
    if (firstStart[rank] < 0)
      continue;
    first = std::min(first, firstStart[rank]);
    last = std::max(last, freeAt[rank]);
  }
  // Gradient reductions: per rank, each stage's bucket once its last W (or
  // BW) has ended, one after another.
  double computeEnd = last;
  result.reduceEnd.assign(p, 0.0);
  if (!problem.stageCostReduce.empty()) {
    for (int rank = 0; rank < p; ++rank) {
      std::vector<std::pair<double, int>> buckets;
      for (int stage : problem.stagesOfRank(rank))
        if (lastGrad[stage] >= 0 && problem.stageCostReduce[stage] > 0)
          buckets.emplace_back(lastGrad[stage], stage);
      std::sort(buckets.begin(), buckets.end());
      double linkFree = 0.0;
      for (auto [ready, stage] : buckets) {
        linkFree = std::max(ready, linkFree) + problem.stageCostReduce[stage];
        result.reduceEnd[rank] = linkFree;
        last = std::max(last, linkFree);
      }
    }
  }
  result.exposedReduction = last - computeEnd;
  result.makespan = last > first ? last - first : 0.0;
  result.maxSpan =
      *std::max_element(result.rankSpan.begin(), result.rankSpan.end());
  result.bubbleRate = bubbleRate(result.rankSpan, result.rankBusy);
  result.peakMemory = peakMemoryPerRank(problem, schedule);
  return result;
}

double bubbleRate(const std::vector<double> &rankSpan,
                  const std::vector<double> &rankBusy) {
  double span = 0.0, work = 0.0;
  for (double s : rankSpan)
    span = std::max(span, s);
  for (double b : rankBusy)
    work = std::max(work, b);
  return span > 0 ? std::max(0.0, span - work) / span : 0.0;
}

} // namespace zb::schedule
