//===- Generators.cpp - Named pipeline schedule generators ------*- C++ -*-===//

#include "zb/Schedule/Generators.h"

#include "zb/Schedule/AutoScheduler.h"
#include "zb/Schedule/Simulator.h"
#include "zb/Schedule/Validator.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace zb::schedule {

const std::vector<ScheduleInfo> &knownSchedules() {
  static const std::vector<ScheduleInfo> schedules = {
      {"gpipe", "all forwards, then all (fused) backwards", 1, Placement::Loop,
       false, 1, false},
      {"1f1b", "one-forward-one-backward with fused backward", 1,
       Placement::Loop, true, 1, false},
      {"interleaved-1f1b", "Megatron's interleaved 1F1B over v chunks", 2,
       Placement::Loop, false, 2, false},
      {"zb-h1", "zero-bubble handcrafted H1 (1F1B memory)", 1, Placement::Loop,
       true, 1, true},
      {"zb-h2", "zero-bubble handcrafted H2 (about 2x 1F1B memory)", 1,
       Placement::Loop, true, 1, true},
      {"zb-auto", "zero-bubble automatic heuristic under a memory limit", 1,
       Placement::Loop, false, 1, true},
      {"zb-v", "V-shaped zero-bubble schedule at 1F1B memory", 2, Placement::V,
       true, 2, true},
      {"v-half", "V-shaped schedule at about 1/2 of 1F1B memory", 2,
       Placement::V, true, 2, true},
      {"v-min", "V-shaped schedule at about 1/3 of 1F1B memory", 2,
       Placement::V, true, 2, true},
  };
  return schedules;
}

const ScheduleInfo *lookupSchedule(const std::string &name) {
  for (const ScheduleInfo &info : knownSchedules())
    if (info.name == name)
      return &info;
  return nullptr;
}

std::string knownScheduleNames() {
  std::string names;
  for (const ScheduleInfo &info : knownSchedules())
    names += (names.empty() ? "" : ", ") + info.name;
  return names;
}

static Action makeF(int stage, int mb) { return {ActionKind::F, stage, mb}; }
static Action makeB(int stage, int mb) { return {ActionKind::B, stage, mb}; }
static Action makeW(int stage, int mb) { return {ActionKind::W, stage, mb}; }
static Action makeBW(int stage, int mb) { return {ActionKind::BW, stage, mb}; }

static Schedule emptySchedule(const Problem &problem, const std::string &name) {
  Schedule schedule;
  schedule.name = name;
  schedule.ranks.resize(problem.numRanks);
  return schedule;
}

/// GPipe: every forward of every chunk, then every fused backward.
static Schedule gpipe(const Problem &problem) {
  Schedule schedule = emptySchedule(problem, "gpipe");
  for (int rank = 0; rank < problem.numRanks; ++rank) {
    std::vector<int> stages = problem.stagesOfRank(rank);
    std::vector<Action> &actions = schedule.ranks[rank];
    for (int stage : stages)
      for (int mb = 0; mb < problem.numMicrobatches; ++mb)
        actions.push_back(makeF(stage, mb));
    for (auto it = stages.rbegin(); it != stages.rend(); ++it)
      for (int mb = 0; mb < problem.numMicrobatches; ++mb)
        actions.push_back(makeBW(*it, mb));
  }
  return schedule;
}

/// 1F1B: p-1-r warm-up forwards, then alternate F and fused BW, then drain.
static Schedule oneFOneB(const Problem &problem) {
  Schedule schedule = emptySchedule(problem, "1f1b");
  int p = problem.numRanks, m = problem.numMicrobatches;
  for (int rank = 0; rank < p; ++rank) {
    std::vector<Action> &actions = schedule.ranks[rank];
    int warmup = std::min(p - 1 - rank, m);
    for (int mb = 0; mb < warmup; ++mb)
      actions.push_back(makeF(rank, mb));
    for (int i = 0; i < m - warmup; ++i) {
      actions.push_back(makeF(rank, warmup + i));
      actions.push_back(makeBW(rank, i));
    }
    for (int mb = m - warmup; mb < m; ++mb)
      actions.push_back(makeBW(rank, mb));
  }
  return schedule;
}

/// The 1F1B family with a split backward: `warmup[r]` forwards, then per
/// microbatch k: B(k), the W deferred by `delay[r]` microbatches, the next F;
/// then the remaining Ws.
static Schedule splitOneFOneB(const Problem &problem, const std::string &name,
                              const std::vector<int> &warmup,
                              const std::vector<int> &delay) {
  Schedule schedule = emptySchedule(problem, name);
  int p = problem.numRanks, m = problem.numMicrobatches;
  for (int rank = 0; rank < p; ++rank) {
    std::vector<Action> &actions = schedule.ranks[rank];
    int w = std::min(warmup[rank], m);
    for (int mb = 0; mb < w; ++mb)
      actions.push_back(makeF(rank, mb));
    int nextW = 0;
    for (int k = 0; k < m; ++k) {
      actions.push_back(makeB(rank, k));
      if (k - delay[rank] >= 0)
        actions.push_back(makeW(rank, nextW++));
      if (w + k < m)
        actions.push_back(makeF(rank, w + k));
    }
    while (nextW < m)
      actions.push_back(makeW(rank, nextW++));
  }
  return schedule;
}

/// ZB-H1: 1F1B's memory; rank r keeps p-r forwards in flight and defers its
/// Ws by r microbatches, so the late Ws fill the cool-down.
static Schedule zbH1(const Problem &problem) {
  int p = problem.numRanks;
  std::vector<int> warmup(p), delay(p);
  for (int rank = 0; rank < p; ++rank) {
    warmup[rank] = p - rank;
    delay[rank] = rank;
  }
  return splitOneFOneB(problem, "zb-h1", warmup, delay);
}

/// ZB-H2: rank r runs 2(p-r)-1 warm-up forwards (filling the wait for the
/// first B) and defers its Ws by 2r, which turns the pipeline into a
/// parallelogram.
static Schedule zbH2(const Problem &problem) {
  int p = problem.numRanks;
  std::vector<int> warmup(p), delay(p);
  for (int rank = 0; rank < p; ++rank) {
    warmup[rank] = 2 * (p - rank) - 1;
    delay[rank] = 2 * rank;
  }
  return splitOneFOneB(problem, "zb-h2", warmup, delay);
}

/// Megatron's interleaved 1F1B. Microbatches go in groups of p; within a
/// group every chunk runs on all of the group before the next chunk.
static Result<Schedule> interleaved(const Problem &problem) {
  int p = problem.numRanks, m = problem.numMicrobatches, v = problem.numChunks;
  if (m % p != 0)
    return Failure{"microbatches must be a multiple of stages (m % p == 0); "
                   "got m=" +
                   std::to_string(m) + ", p=" + std::to_string(p)};
  Schedule schedule = emptySchedule(problem, "interleaved-1f1b");
  // (chunk, microbatch) in forward order; backward uses reversed chunks.
  std::vector<std::pair<int, int>> forward, backward;
  for (int group = 0; group < m; group += p) {
    for (int chunk = 0; chunk < v; ++chunk) {
      for (int mb = group; mb < group + p; ++mb) {
        forward.push_back({chunk, mb});
        backward.push_back({v - 1 - chunk, mb});
      }
    }
  }
  int total = m * v;
  for (int rank = 0; rank < p; ++rank) {
    std::vector<int> stages = problem.stagesOfRank(rank);
    std::vector<Action> &actions = schedule.ranks[rank];
    int warmup = std::min(total, (p - rank - 1) * 2 + (v - 1) * p);
    if (m == p)
      warmup = total;
    for (int i = 0; i < warmup; ++i)
      actions.push_back(makeF(stages[forward[i].first], forward[i].second));
    for (int i = 0; i < total - warmup; ++i) {
      const auto &f = forward[warmup + i];
      const auto &b = backward[i];
      actions.push_back(makeF(stages[f.first], f.second));
      actions.push_back(makeBW(stages[b.first], b.second));
    }
    for (int i = std::max(0, total - warmup); i < total; ++i)
      actions.push_back(makeBW(stages[backward[i].first], backward[i].second));
  }
  return schedule;
}

double targetMemoryLimit(const std::string &name, const Problem &problem) {
  double p = problem.numRanks, unit = problem.stageMemB();
  double target = 0.0;
  if (name == "zb-auto")
    target = 2 * p * problem.memB;
  else if (name == "zb-v")
    target = p * problem.memB;
  else if (name == "v-half")
    target = (std::ceil(p * problem.numChunks / 2.0) + 1) * unit;
  else if (name == "v-min")
    target = (std::ceil(p * problem.numChunks / 3.0) + 1) * unit;
  else
    return problem.memLimit;
  target = std::max(target, problem.memB);
  if (name == "zb-auto" && problem.memLimit > 0)
    return problem.memLimit;
  if (problem.memLimit > 0)
    target = std::min(target, problem.memLimit);
  return target;
}

/// True when `schedule` is valid for `problem` and fits `limit`.
static bool fits(const Problem &problem, const Schedule &schedule,
                 double limit) {
  Problem limited = problem;
  limited.memLimit = limit;
  return validate(limited, schedule).empty();
}

/// zb-auto: the heuristic's grid search, plus the handcrafted ZB schedules
/// when they fit the limit, so it is never worse than them.
static Result<Schedule> zbAuto(const Problem &problem) {
  double limit = targetMemoryLimit("zb-auto", problem);
  Result<Schedule> best = autoSchedule(problem, limit);
  if (problem.numChunks == 1 && problem.placement == Placement::Loop) {
    double bestSpan = std::numeric_limits<double>::infinity();
    double bestMakespan = bestSpan;
    if (best) {
      Result<SimulationResult> sim = simulate(problem, *best);
      if (sim) {
        bestSpan = sim->maxSpan;
        bestMakespan = sim->makespan;
      }
    }
    for (Schedule hand : {zbH1(problem), zbH2(problem)}) {
      if (!fits(problem, hand, limit))
        continue;
      Result<SimulationResult> sim = simulate(problem, hand);
      if (!sim)
        continue;
      double tolerance = 1e-9 * std::max(1.0, sim->maxSpan);
      if (sim->maxSpan < bestSpan - tolerance ||
          (sim->maxSpan <= bestSpan + tolerance &&
           sim->makespan < bestMakespan - tolerance)) {
        bestSpan = sim->maxSpan;
        bestMakespan = sim->makespan;
        best = std::move(hand);
      }
    }
  }
  if (best)
    best->name = "zb-auto";
  return best;
}

/// zb-v, v-half, v-min: the heuristic on the V placement at the schedule's
/// memory target.
static Result<Schedule> vShape(const std::string &name,
                               const Problem &problem) {
  Result<Schedule> schedule =
      autoSchedule(problem, targetMemoryLimit(name, problem));
  if (schedule)
    schedule->name = name;
  return schedule;
}

Result<Schedule> generateSchedule(const std::string &name,
                                  const Problem &problem) {
  const ScheduleInfo *info = lookupSchedule(name);
  if (!info)
    return Failure{"unknown schedule '" + name +
                   "' (known: " + knownScheduleNames() + ")"};
  std::string error;
  if (!problem.verify(error))
    return Failure{error};
  if (info->fixedLayout && (problem.numChunks != info->defaultChunks ||
                            problem.placement != info->defaultPlacement))
    return Failure{name +
                   " needs chunks=" + std::to_string(info->defaultChunks) +
                   " and placement=" + placementName(info->defaultPlacement) +
                   "; got chunks=" + std::to_string(problem.numChunks) +
                   ", placement=" + placementName(problem.placement)};
  if (problem.numChunks < info->minChunks)
    return Failure{name + " needs at least " + std::to_string(info->minChunks) +
                   " chunks per rank"};
  if (name == "interleaved-1f1b" && problem.placement != Placement::Loop)
    return Failure{"interleaved-1f1b needs placement=loop"};

  Result<Schedule> result = Failure{"unreachable"};
  if (name == "gpipe")
    result = gpipe(problem);
  else if (name == "1f1b")
    result = oneFOneB(problem);
  else if (name == "interleaved-1f1b")
    result = interleaved(problem);
  else if (name == "zb-h1")
    result = zbH1(problem);
  else if (name == "zb-h2")
    result = zbH2(problem);
  else if (name == "zb-auto")
    result = zbAuto(problem);
  else
    result = vShape(name, problem);
  if (!result)
    return Failure{name + ": " + result.error()};
  // Every generator's output must at least be structurally sound and
  // deadlock-free; memory is the caller's check.
  Problem unlimited = problem;
  unlimited.memLimit = 0;
  std::vector<Diagnostic> diagnostics = validate(unlimited, *result);
  if (!diagnostics.empty())
    return Failure{
        name + " produced an invalid schedule: " + diagnostics.front().message};
  result->name = name;
  return result;
}

} // namespace zb::schedule
