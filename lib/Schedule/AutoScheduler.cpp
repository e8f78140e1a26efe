//===- AutoScheduler.cpp - Memory-limited greedy scheduler --*- C++ -*-===//

#include "zb/Schedule/AutoScheduler.h"

#include "zb/Schedule/Simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <vector>

namespace zb::schedule {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

/// An action the rank could run next and when its inputs arrive.
struct Candidate {
  int stage = -1;
  int microbatch = -1;
  /// Arrival time of the inputs: exact when known, else a lower bound.
  double ready = kInfinity;
  bool known = false;
  bool valid() const { return stage >= 0; }
};

/// One run of the heuristic.
class GreedyEngine {
public:
  GreedyEngine(const Problem &problem, const GreedyOptions &options)
      : problem(problem), options(options), p(problem.numRanks),
        m(problem.numMicrobatches), numStages(problem.numStages()) {}

  Result<Schedule> run();

private:
  enum class Decision { Run, Wait };

  double endOf(const std::vector<double> &ends, int stage, int mb) const {
    return ends[static_cast<std::size_t>(stage) * m + mb];
  }
  Candidate backwardCandidate(int rank, int stage, double now) const;
  Candidate forwardCandidate(int stage, double now) const;
  bool admits(int rank, int stage) const;
  Decision decide(int rank, double now, Action &action) const;
  void start(int rank, const Action &action, double now);

  const Problem &problem;
  GreedyOptions options;
  int p, m, numStages;
  std::vector<std::vector<int>> rankStages;
  std::vector<int> nextF, nextB;
  std::vector<double> endF, endB;
  std::vector<double> freeAt, memory, idle;
  std::vector<bool> started;
  std::vector<int> remainingFB;
  std::vector<std::deque<Action>> pendingW;
  double maxIdle = 0.0;
  std::vector<std::vector<Action>> order;
  std::priority_queue<double, std::vector<double>, std::greater<double>> events;
};

} // namespace

Candidate GreedyEngine::backwardCandidate(int rank, int stage,
                                          double now) const {
  Candidate candidate;
  int mb = nextB[stage];
  if (mb >= m || mb >= nextF[stage])
    return candidate;
  candidate.stage = stage;
  candidate.microbatch = mb;
  double ready = endOf(endF, stage, mb);
  candidate.known = true;
  if (stage + 1 < numStages) {
    double next = endOf(endB, stage + 1, mb);
    double comm = problem.commCost(stage + 1, stage);
    if (next >= 0) {
      ready = std::max(ready, next + comm);
    } else {
      int producer = problem.rankOfStage(stage + 1);
      double earliest = std::max(now, freeAt[producer]);
      ready = std::max(ready,
                       earliest + problem.backwardInputCost(stage + 1) + comm);
      candidate.known = false;
    }
  }
  (void)rank;
  candidate.ready = ready;
  return candidate;
}

Candidate GreedyEngine::forwardCandidate(int stage, double now) const {
  Candidate candidate;
  int mb = nextF[stage];
  if (mb >= m)
    return candidate;
  candidate.stage = stage;
  candidate.microbatch = mb;
  candidate.known = true;
  candidate.ready = 0.0;
  if (stage > 0) {
    double prev = endOf(endF, stage - 1, mb);
    double comm = problem.commCost(stage - 1, stage);
    if (prev >= 0) {
      candidate.ready = prev + comm;
    } else {
      int producer = problem.rankOfStage(stage - 1);
      candidate.ready = std::max(now, freeAt[producer]) +
                        problem.forwardCost(stage - 1) + comm;
      candidate.known = false;
    }
  }
  return candidate;
}

/// Memory admission: the first chunk of a microbatch on a rank is admitted
/// only if room for one activation of every later chunk remains after it.
/// Later chunks run in microbatch order, so the oldest unfinished microbatch
/// always finds that room (after flushing Ws) and the heuristic cannot
/// deadlock.
bool GreedyEngine::admits(int rank, int stage) const {
  const std::vector<int> &stages = rankStages[rank];
  double needed = memory[rank] + problem.stageMemB();
  if (stage == stages.front())
    needed += problem.stageMemB() * (stages.size() - 1);
  return needed <= options.memLimit * (1 + 1e-12) + 1e-12;
}

GreedyEngine::Decision GreedyEngine::decide(int rank, double now,
                                            Action &action) const {
  const std::vector<int> &stages = rankStages[rank];
  bool hasW = !pendingW[rank].empty();
  if (remainingFB[rank] == 0) {
    action = pendingW[rank].front();
    return Decision::Run;
  }

  // Backward first: it is on the critical path and frees memory.
  Candidate bestB;
  double nextArrival = kInfinity;
  double knownB = kInfinity;
  for (int stage : stages) {
    Candidate c = backwardCandidate(rank, stage, now);
    if (!c.valid())
      continue;
    if (c.ready <= now) {
      // Oldest microbatch first, or the later stage (V: the chunk nearer
      // the loss) first.
      bool better = !bestB.valid() || (options.backwardPreferLaterStage
                                           ? c.stage > bestB.stage
                                           : c.microbatch < bestB.microbatch);
      if (better)
        bestB = c;
    } else {
      nextArrival = std::min(nextArrival, c.ready);
      if (c.known)
        knownB = std::min(knownB, c.ready);
    }
  }
  if (bestB.valid()) {
    action = {ActionKind::B, bestB.stage, bestB.microbatch};
    return Decision::Run;
  }

  Candidate bestF;
  bool memoryBlocked = false;
  for (int stage : stages) {
    Candidate c = forwardCandidate(stage, now);
    if (!c.valid())
      continue;
    if (!admits(rank, stage)) {
      if (c.ready <= now)
        memoryBlocked = true;
      continue;
    }
    if (c.ready <= now) {
      bool better = !bestF.valid() ||
                    (options.forwardPreferLaterStage ? c.stage > bestF.stage
                                                     : c.stage < bestF.stage);
      if (better)
        bestF = c;
    } else {
      nextArrival = std::min(nextArrival, c.ready);
    }
  }

  if (bestF.valid()) {
    double costF = problem.forwardCost(bestF.stage);
    // Warm-up: optionally do not let this F delay the first B, which
    // arrives while it would run.
    bool warmingUp = nextB[rankStages[rank].back()] == 0;
    bool mayOverrun =
        options.allowOverrun || (options.firstRankOverruns && rank == 0);
    bool overrun = !mayOverrun && warmingUp && knownB < now + costF;
    // Optionally do not run too far ahead of the next stage's rank.
    int stage = bestF.stage;
    bool ahead = options.maxLead >= 0 && hasW && stage + 1 < numStages &&
                 problem.rankOfStage(stage + 1) != rank &&
                 nextF[stage] - nextF[stage + 1] > options.maxLead;
    if (!overrun && !ahead) {
      action = {ActionKind::F, bestF.stage, bestF.microbatch};
      return Decision::Run;
    }
    if (hasW && (ahead || now + problem.backwardWeightCost(
                                    pendingW[rank].front().stage) <=
                              knownB)) {
      action = pendingW[rank].front();
      return Decision::Run;
    }
    if (overrun)
      return Decision::Wait;
    action = {ActionKind::F, bestF.stage, bestF.microbatch};
    return Decision::Run;
  }

  if (!hasW)
    return Decision::Wait;
  if (memoryBlocked) {
    action = pendingW[rank].front();
    return Decision::Run;
  }
  double wait = nextArrival - now;
  double costW = problem.backwardWeightCost(pendingW[rank].front().stage);
  bool run = costW <= wait || (options.weightFill == WeightFill::MostlyFits &&
                               costW <= 2 * wait);
  if (!run && options.weightFill == WeightFill::Always)
    run = true;
  if (!run && options.weightFill == WeightFill::BalanceIdle) {
    double waited = started[rank] ? now - freeAt[rank] : 0.0;
    run = idle[rank] + waited + wait > maxIdle;
  }
  if (run) {
    action = pendingW[rank].front();
    return Decision::Run;
  }
  return Decision::Wait;
}

void GreedyEngine::start(int rank, const Action &action, double now) {
  if (started[rank]) {
    idle[rank] += now - freeAt[rank];
    maxIdle = std::max(maxIdle, idle[rank]);
  }
  started[rank] = true;
  double end = now + actionCost(problem, action);
  std::size_t key =
      static_cast<std::size_t>(action.stage) * m + action.microbatch;
  switch (action.kind) {
  case ActionKind::F:
    endF[key] = end;
    ++nextF[action.stage];
    --remainingFB[rank];
    break;
  case ActionKind::B:
    endB[key] = end;
    ++nextB[action.stage];
    --remainingFB[rank];
    pendingW[rank].push_back({ActionKind::W, action.stage, action.microbatch});
    break;
  case ActionKind::W:
    pendingW[rank].pop_front();
    break;
  case ActionKind::BW:
    break;
  }
  memory[rank] += actionMemoryDelta(problem, action);
  freeAt[rank] = end;
  order[rank].push_back(action);
  events.push(end);
  if (problem.costComm > 0)
    events.push(end + problem.costComm);
}

Result<Schedule> GreedyEngine::run() {
  std::string error;
  if (!problem.verify(error))
    return Failure{error};
  if (options.memLimit + 1e-9 < problem.memB)
    return Failure{"memory limit " + std::to_string(options.memLimit) +
                   " is below one microbatch's activations (mem-b " +
                   std::to_string(problem.memB) + ")"};
  std::size_t cells = static_cast<std::size_t>(numStages) * m;
  rankStages.resize(p);
  for (int rank = 0; rank < p; ++rank)
    rankStages[rank] = problem.stagesOfRank(rank);
  nextF.assign(numStages, 0);
  nextB.assign(numStages, 0);
  endF.assign(cells, -1.0);
  endB.assign(cells, -1.0);
  freeAt.assign(p, 0.0);
  memory.assign(p, 0.0);
  idle.assign(p, 0.0);
  started.assign(p, false);
  remainingFB.assign(p, 2 * m * problem.numChunks);
  pendingW.assign(p, {});
  order.assign(p, {});

  std::size_t remaining = 3 * cells;
  double now = 0.0;
  while (remaining > 0) {
    bool progress = true;
    while (progress) {
      progress = false;
      for (int rank = 0; rank < p; ++rank) {
        if (freeAt[rank] > now)
          continue;
        if (remainingFB[rank] == 0 && pendingW[rank].empty())
          continue;
        Action action;
        if (decide(rank, now, action) != Decision::Run)
          continue;
        start(rank, action, now);
        --remaining;
        progress = true;
      }
    }
    if (remaining == 0)
      break;
    while (!events.empty() && events.top() <= now)
      events.pop();
    if (events.empty())
      return Failure{"the greedy scheduler is stuck (memory limit " +
                     std::to_string(options.memLimit) + " too small?)"};
    now = events.top();
    events.pop();
  }
  Schedule schedule;
  schedule.ranks = std::move(order);
  return schedule;
}

Result<Schedule> greedySchedule(const Problem &problem,
                                const GreedyOptions &options) {
  GreedyEngine engine(problem, options);
  return engine.run();
}

Result<Schedule> autoSchedule(const Problem &problem, double memLimit) {
  Result<Schedule> best = Failure{"no candidate schedule"};
  double bestMakespan = kInfinity, bestSpan = kInfinity;
  bool multiChunk = problem.numChunks > 1;
  // Several chunks per rank multiply the orders to try; keep the grid
  // small there.
  for (int overrun : {0, 1, 2}) {
    if (multiChunk && overrun == 1)
      continue;
    for (WeightFill fill : {WeightFill::IfFits, WeightFill::MostlyFits,
                            WeightFill::BalanceIdle, WeightFill::Always}) {
      if (multiChunk && fill == WeightFill::MostlyFits)
        continue;
      for (int lead : {-1, 1}) {
        if (multiChunk && lead >= 0)
          continue;
        for (int order = 0; order < (multiChunk ? 4 : 1); ++order) {
          GreedyOptions options;
          options.memLimit = memLimit;
          options.allowOverrun = overrun == 0;
          options.firstRankOverruns = overrun == 1;
          options.weightFill = fill;
          options.maxLead = lead;
          options.forwardPreferLaterStage = (order & 1) == 0;
          options.backwardPreferLaterStage = (order & 2) != 0;
          Result<Schedule> candidate = greedySchedule(problem, options);
          if (!candidate) {
            if (!best && bestMakespan == kInfinity)
              best = candidate;
            continue;
          }
          Result<SimulationResult> sim = simulate(problem, *candidate);
          if (!sim)
            continue;
          double tolerance = 1e-9 * std::max(1.0, sim->makespan);
          // The paper's objective: the smallest max span (bubble rate),
          // then the smallest makespan.
          if (sim->maxSpan < bestSpan - tolerance ||
              (sim->maxSpan <= bestSpan + tolerance &&
               sim->makespan < bestMakespan - tolerance)) {
            bestMakespan = sim->makespan;
            bestSpan = sim->maxSpan;
            best = std::move(candidate);
          }
        }
      }
    }
  }
  return best;
}

} // namespace zb::schedule
