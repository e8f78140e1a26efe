//===- AutoScheduler.cpp - Memory-limited greedy scheduler --*- C++ -*-===//

#include "zb/Schedule/AutoScheduler.h"

#include "zb/Schedule/Simulator.h"
#include "zb/Schedule/Validator.h"

#include "InOrder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <vector>

namespace zb::schedule {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

/// Whether `memory` keeps to the engines' limit (with their rounding
/// tolerance).
bool fitsLimit(double memory, double limit) {
  return memory <= limit * (1 + 1e-12) + 1e-12;
}

/// An action the rank could run next and when its inputs arrive.
struct Candidate {
  int stage = -1;
  int microbatch = -1;
  /// Arrival time of the inputs: exact when known, else a lower bound.
  double ready = kInfinity;
  bool known = false;
  bool valid() const { return stage >= 0; }
};

/// A set of ranks visited in rank order, where a rank added during a visit
/// is visited in it if it comes after the current one (as with std::set),
/// as bits: the engine adds and removes ranks at almost every step.
class RankSet {
public:
  explicit RankSet(int n) : words((n + 63) / 64, 0) {}
  void insert(int rank) { words[rank >> 6] |= uint64_t(1) << (rank & 63); }
  void erase(int rank) { words[rank >> 6] &= ~(uint64_t(1) << (rank & 63)); }
  /// The first member at or after `from`; -1 when there is none.
  int next(int from) const {
    std::size_t w = static_cast<std::size_t>(from) >> 6;
    if (w >= words.size())
      return -1;
    uint64_t bits = words[w] & (~uint64_t(0) << (from & 63));
    while (!bits) {
      if (++w == words.size())
        return -1;
      bits = words[w];
    }
    return static_cast<int>(w * 64 + __builtin_ctzll(bits));
  }

private:
  std::vector<uint64_t> words;
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
  bool fitsLimit(double memory) const {
    return schedule::fitsLimit(memory, options.memLimit);
  }
  /// What `rank` does at `now`. On Wait, `wake` says until when the answer
  /// stays Wait while no rank of an adjacent stage starts an action: a
  /// time (an input known to arrive then), kInfinity (only such a start can
  /// change it), or -1 (it may change as time passes: ask at every event).
  Decision decide(int rank, double now, Action &action, double &wake) const;
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
  /// When transfers arrive (an action's end plus T_comm; its end itself is
  /// when its rank becomes free, which run() keeps).
  std::priority_queue<double, std::vector<double>, std::greater<double>>
      arrivals;
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
/// deadlock. Where W needs more than F stashed (memW > memB), an F also
/// leaves room for the growth of one B, which then runs even before any W
/// is pending.
bool GreedyEngine::admits(int rank, int stage) const {
  const std::vector<int> &stages = rankStages[rank];
  double growthOfB =
      actionMemoryDelta(problem, {ActionKind::B, stage, /*microbatch=*/0});
  double needed = memory[rank] + problem.stageMemB() + std::max(0.0, growthOfB);
  if (stage == stages.front())
    needed += problem.stageMemB() * (stages.size() - 1);
  return fitsLimit(needed);
}

GreedyEngine::Decision
GreedyEngine::decide(int rank, double now, Action &action, double &wake) const {
  const std::vector<int> &stages = rankStages[rank];
  // The earliest arrival (or bound on it) of an input not there yet, and
  // whether an input's arrival is still unknown (its bound grows with time).
  double nextInput = kInfinity;
  bool unknownPending = false;
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
      else
        unknownPending = true;
      nextInput = std::min(nextInput, c.ready);
    }
  }
  if (bestB.valid()) {
    action = {ActionKind::B, bestB.stage, bestB.microbatch};
    // A B that holds more for its W than it frees (memW > memB) waits for
    // a pending W to make room.
    if (hasW && !fitsLimit(memory[rank] + actionMemoryDelta(problem, action)))
      action = pendingW[rank].front();
    return Decision::Run;
  }

  Candidate bestF;
  bool memoryBlocked = false;
  for (int stage : stages) {
    Candidate c = forwardCandidate(stage, now);
    if (!c.valid())
      continue;
    if (c.ready > now) {
      nextInput = std::min(nextInput, c.ready);
      if (!c.known)
        unknownPending = true;
    }
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
  // Every Wait below holds until an input arrives (or the bound on an
  // unknown arrival passes) or a neighbour acts, but BalanceIdle's, whose
  // estimate of an unknown arrival grows with time.
  wake = nextInput;

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
  if (options.weightFill == WeightFill::BalanceIdle && started[rank] &&
      unknownPending)
    wake = -1.0;
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
  if (problem.costComm > 0)
    arrivals.push(end + problem.costComm);
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
  // The ranks that may start an action now (free, with work left), in rank
  // order, and the busy ones by the time they become free: each pass visits
  // the free ranks only, as a scan of every rank skipping the others would.
  RankSet freeRanks(p);
  for (int rank = 0; rank < p; ++rank)
    freeRanks.insert(rank);
  // Free ranks whose last answer was Wait and stays so (decide's `wake`)
  // sleep outside freeRanks until that time or until a rank of an
  // adjacent stage starts an action: re-asking them at every event made
  // the engine quadratic in p (decide has no side effects, so the
  // schedule is the same).
  std::vector<char> sleeping(p, 0);
  std::vector<std::vector<int>> neighbours(p);
  for (int rank = 0; rank < p; ++rank)
    for (int stage : rankStages[rank])
      for (int other : {stage - 1, stage + 1})
        if (other >= 0 && other < numStages) {
          int q = problem.rankOfStage(other);
          if (q != rank &&
              std::find(neighbours[rank].begin(), neighbours[rank].end(), q) ==
                  neighbours[rank].end())
            neighbours[rank].push_back(q);
        }
  using Wake = std::pair<double, int>;
  std::priority_queue<Wake, std::vector<Wake>, std::greater<Wake>> wakes;
  using BusyRank = std::pair<double, int>;
  std::priority_queue<BusyRank, std::vector<BusyRank>, std::greater<BusyRank>>
      busy;
  while (remaining > 0) {
    bool progress = true;
    while (progress) {
      progress = false;
      for (int rank = freeRanks.next(0); rank >= 0;
           rank = freeRanks.next(rank + 1)) {
        if (remainingFB[rank] == 0 && pendingW[rank].empty()) {
          freeRanks.erase(rank);
          continue;
        }
        Action action;
        double wake;
        if (decide(rank, now, action, wake) != Decision::Run) {
          if (wake < 0)
            continue;
          sleeping[rank] = 1;
          if (wake < kInfinity)
            wakes.push({wake, rank});
          freeRanks.erase(rank);
          continue;
        }
        start(rank, action, now);
        --remaining;
        progress = true;
        for (int q : neighbours[rank])
          if (sleeping[q]) {
            sleeping[q] = 0;
            freeRanks.insert(q);
          }
        if (freeAt[rank] > now) {
          busy.push({freeAt[rank], rank});
          freeRanks.erase(rank);
        }
      }
    }
    if (remaining == 0)
      break;
    // The next event: a busy rank becomes free or a transfer arrives.
    while (!arrivals.empty() && arrivals.top() <= now)
      arrivals.pop();
    double next = kInfinity;
    if (!busy.empty())
      next = busy.top().first;
    if (!arrivals.empty())
      next = std::min(next, arrivals.top());
    if (next == kInfinity)
      return Failure{"the greedy scheduler is stuck (memory limit " +
                     std::to_string(options.memLimit) + " too small?)"};
    now = next;
    while (!busy.empty() && busy.top().first <= now) {
      freeRanks.insert(busy.top().second);
      busy.pop();
    }
    // A stale entry (the rank woke and slept again since) only costs a
    // question.
    while (!wakes.empty() && wakes.top().first <= now) {
      int rank = wakes.top().second;
      wakes.pop();
      if (sleeping[rank]) {
        sleeping[rank] = 0;
        freeRanks.insert(rank);
      }
    }
  }
  Schedule schedule;
  schedule.ranks = std::move(order);
  return schedule;
}

namespace {

/// The zero-bubble paper's own heuristic for one chunk per rank, which goes
/// microbatch by microbatch instead of event by event: round 0 issues each
/// stage's warm-up Fs (as many as fit before the first B arrives, a stage
/// always strictly more than the next), then the first B down the chain;
/// round i gives every stage at most one F (a stage never issues an F the
/// next stage does not) and then B(i) from the last stage to the first,
/// filling each wait for an input with pending Ws. Times are estimated as it
/// goes, including T_comm, so the warm-up counts and W fills account for the
/// transfer latency.
struct RoundOptions {
  /// Warm-up: whether the last warm-up F may overrun the first B's arrival.
  enum class Overrun { Never, Always, WhenCloser };
  Overrun overrun = Overrun::Never;
  /// Skip an F of a stage two ahead of its successor when that does not
  /// delay it beyond the worst stage's idle.
  bool prioritizeB = false;
  /// Fill a wait shorter than a W with one W while this stage's idle stays
  /// below the worst stage's.
  bool fillShortWaits = true;
  /// The first stage runs all its pending Ws once its Fs are done (the
  /// paper's rule); otherwise they keep filling its waits for Bs.
  bool flushFirstStage = true;
};

class RoundEngine {
public:
  RoundEngine(const Problem &problem, double memLimit,
              const RoundOptions &options)
      : problem(problem), options(options), memLimit(memLimit),
        p(problem.numRanks), m(problem.numMicrobatches) {}

  Result<Schedule> run();

private:
  std::size_t key(int stage, int mb) const {
    return static_cast<std::size_t>(stage) * m + mb;
  }
  double cost(ActionKind kind, int stage) const {
    return kind == ActionKind::F   ? problem.forwardCost(stage)
           : kind == ActionKind::B ? problem.backwardInputCost(stage)
                                   : problem.backwardWeightCost(stage);
  }
  double memoryOf(ActionKind kind, int stage) const {
    return actionMemoryDelta(problem, {kind, stage, 0});
  }
  bool fits(double memory) const { return fitsLimit(memory, memLimit); }
  double maxIdle() const { return *std::max_element(idle.begin(), idle.end()); }
  void put(int stage, ActionKind kind);
  /// Runs pending Ws of `stage` into the wait for an input arriving at
  /// `arrival`.
  void fillWait(int stage, double arrival);
  /// Runs pending Ws until `delta` more memory fits; false if impossible.
  bool makeRoom(int stage, double delta);

  const Problem &problem;
  RoundOptions options;
  double memLimit;
  int p, m;
  std::vector<int> numF, numB, numW;
  std::vector<double> endAt, memory, idle;
  std::vector<double> endF, endB;
  std::vector<std::vector<Action>> order;
};

} // namespace

void RoundEngine::put(int stage, ActionKind kind) {
  int &count = kind == ActionKind::F   ? numF[stage]
               : kind == ActionKind::B ? numB[stage]
                                       : numW[stage];
  int mb = count++;
  double c = cost(kind, stage);
  double end = endAt[stage] + c;
  double eager = end;
  if (kind == ActionKind::F && stage > 0)
    end = std::max(end, endF[key(stage - 1, mb)] +
                            problem.commCost(stage - 1, stage) + c);
  if (kind == ActionKind::B && stage + 1 < p)
    end = std::max(end, endB[key(stage + 1, mb)] +
                            problem.commCost(stage + 1, stage) + c);
  if (!order[stage].empty())
    idle[stage] += end - eager;
  endAt[stage] = end;
  if (kind == ActionKind::F)
    endF[key(stage, mb)] = end;
  else if (kind == ActionKind::B)
    endB[key(stage, mb)] = end;
  memory[stage] += memoryOf(kind, stage);
  order[stage].push_back({kind, stage, mb});
}

void RoundEngine::fillWait(int stage, double arrival) {
  while (numW[stage] < numB[stage] &&
         endAt[stage] + cost(ActionKind::W, stage) <= arrival)
    put(stage, ActionKind::W);
  if (numW[stage] < numB[stage] && endAt[stage] < arrival) {
    // A W longer than the wait: run it anyway unless the wait keeps this
    // stage within the worst stage's idle and short waits stay empty.
    bool withinSlack = arrival - endAt[stage] <= maxIdle() - idle[stage];
    if (!withinSlack || options.fillShortWaits)
      put(stage, ActionKind::W);
  }
}

bool RoundEngine::makeRoom(int stage, double delta) {
  while (!fits(memory[stage] + delta)) {
    if (numW[stage] >= numB[stage])
      return false;
    put(stage, ActionKind::W);
  }
  return true;
}

Result<Schedule> RoundEngine::run() {
  std::size_t cells = static_cast<std::size_t>(p) * m;
  numF.assign(p, 0);
  numB.assign(p, 0);
  numW.assign(p, 0);
  endAt.assign(p, 0.0);
  memory.assign(p, 0.0);
  idle.assign(p, 0.0);
  endF.assign(cells, 0.0);
  endB.assign(cells, 0.0);
  order.assign(p, {});
  Failure noRoom{"the memory limit leaves no room for the round heuristic"};

  // Round 0: the first F everywhere, then each stage's extra warm-up Fs,
  // computed from the estimated arrival of the first B (last stage first).
  for (int stage = 0; stage < p; ++stage) {
    if (!makeRoom(stage, memoryOf(ActionKind::F, stage)))
      return noRoom;
    put(stage, ActionKind::F);
  }
  std::vector<int> extra(p, 0);
  double arrival = endF[key(p - 1, 0)] + cost(ActionKind::B, p - 1);
  for (int stage = p - 2; stage >= 0; --stage) {
    double comm = problem.commCost(stage + 1, stage);
    double mem = memory[stage], time = endAt[stage];
    double memF = memoryOf(ActionKind::F, stage);
    double costF = cost(ActionKind::F, stage);
    while (numF[stage] + extra[stage] < m && fits(mem + memF)) {
      double due = arrival + comm;
      bool stop = time + costF > due;
      if (options.overrun == RoundOptions::Overrun::Always)
        stop = time >= due;
      else if (options.overrun == RoundOptions::Overrun::WhenCloser)
        stop = time + costF - due > due - time;
      if (stop)
        break;
      mem += memF;
      time += costF;
      ++extra[stage];
    }
    arrival = std::max(time, arrival + comm) + cost(ActionKind::B, stage);
  }
  // A stage issues strictly more warm-up Fs than the next one.
  for (int stage = 1; stage < p; ++stage)
    while (extra[stage] > 0 && extra[stage] >= extra[stage - 1])
      --extra[stage];
  for (int stage = 0; stage < p; ++stage)
    for (int i = 0; i < extra[stage]; ++i)
      put(stage, ActionKind::F);
  for (int stage = p - 1; stage >= 0; --stage)
    put(stage, ActionKind::B);

  std::vector<int> wantF(p);
  for (int mb = 1; mb < m; ++mb) {
    for (int stage = 0; stage < p; ++stage) {
      wantF[stage] = numF[stage] < m ? 1 : 0;
      if (!wantF[stage] || !options.prioritizeB || stage + 1 >= p ||
          numF[stage] < numF[stage + 1] + 2)
        continue;
      // Two ahead of the next stage: skip the F when the next stage's
      // F and B leave time and skipping stays within the idle budget.
      double nextFB = endAt[stage + 1] + cost(ActionKind::F, stage + 1) +
                      cost(ActionKind::B, stage + 1) +
                      problem.commCost(stage + 1, stage);
      if (endAt[stage] >= nextFB) {
        wantF[stage] = 0;
        continue;
      }
      double mem = memory[stage] + memoryOf(ActionKind::F, stage);
      double wCost = 0.0;
      for (int w = numW[stage]; !fits(mem) && w < numB[stage]; ++w) {
        wCost += cost(ActionKind::W, stage);
        mem += memoryOf(ActionKind::W, stage);
      }
      if (endAt[stage] + cost(ActionKind::F, stage) + wCost <= nextFB)
        continue;
      if (nextFB - endAt[stage] <= maxIdle() - idle[stage])
        wantF[stage] = 0;
    }
    for (int stage = p - 2; stage >= 0; --stage)
      wantF[stage] = std::min(wantF[stage], wantF[stage + 1]);
    for (int stage = 0; stage < p; ++stage) {
      if (!wantF[stage])
        continue;
      if (!makeRoom(stage, memoryOf(ActionKind::F, stage)))
        return noRoom;
      if (stage > 0)
        fillWait(stage, endF[key(stage - 1, numF[stage])] +
                            problem.commCost(stage - 1, stage));
      put(stage, ActionKind::F);
    }
    for (int stage = p - 1; stage >= 0; --stage) {
      if (numF[stage] <= mb)
        return Failure{"the round heuristic fell behind its forwards"};
      if (!makeRoom(stage, memoryOf(ActionKind::B, stage)))
        return noRoom;
      if (stage + 1 < p)
        fillWait(stage,
                 endB[key(stage + 1, mb)] + problem.commCost(stage + 1, stage));
      if (stage == 0 && numF[stage] == m && options.flushFirstStage)
        while (numW[stage] < numB[stage])
          put(stage, ActionKind::W);
      put(stage, ActionKind::B);
    }
  }
  for (int stage = 0; stage < p; ++stage)
    while (numW[stage] < m)
      put(stage, ActionKind::W);
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
  // The candidates, in the order in which ties between equal ones are
  // broken (the first wins).
  std::vector<std::function<Result<Schedule>()>> candidates;
  bool multiChunk = problem.numChunks > 1;
  // Past kFullSearchActions actions every candidate costs seconds, and the
  // search keeps to the candidates that win on most problems (on a sample
  // of p <= 32, m = 4p with the paper's cost ratios: with one chunk the
  // first-rank overruns with a W fill other than IfFits, IfFits with
  // overruns allowed, and the round heuristic's first choice per overrun
  // rule; with several chunks the overrun-allowing half).
  constexpr std::size_t kFullSearchActions = std::size_t(1) << 21;
  bool large =
      3ull * problem.numRanks * problem.numChunks * problem.numMicrobatches >
      kFullSearchActions;
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
          if (large &&
              (multiChunk ? overrun != 0
                          : !(overrun == 0 && fill == WeightFill::IfFits &&
                              lead < 0) &&
                                !(overrun == 1 && fill != WeightFill::IfFits)))
            continue;
          GreedyOptions options;
          options.memLimit = memLimit;
          options.allowOverrun = overrun == 0;
          options.firstRankOverruns = overrun == 1;
          options.weightFill = fill;
          options.maxLead = lead;
          options.forwardPreferLaterStage = (order & 1) == 0;
          options.backwardPreferLaterStage = (order & 2) != 0;
          candidates.push_back(
              [&problem, options] { return greedySchedule(problem, options); });
        }
      }
    }
  }
  // One chunk per rank: also the paper's round-by-round heuristic, whose
  // warm-up and W fills follow its own time estimates (T_comm included).
  if (!multiChunk && memLimit + 1e-9 >= problem.memB) {
    for (RoundOptions::Overrun overrun :
         {RoundOptions::Overrun::Never, RoundOptions::Overrun::Always,
          RoundOptions::Overrun::WhenCloser}) {
      for (int choice = 0; choice < 8; ++choice) {
        if (large && choice != 0 &&
            !(choice == 1 && overrun == RoundOptions::Overrun::Never))
          continue;
        RoundOptions options;
        options.overrun = overrun;
        options.prioritizeB = (choice & 1) != 0;
        options.fillShortWaits = (choice & 2) != 0;
        options.flushFirstStage = (choice & 4) != 0;
        candidates.push_back([&problem, memLimit, options] {
          return RoundEngine(problem, memLimit, options).run();
        });
      }
    }
  }

  // Each candidate generated and simulated on its own (the engines and the
  // simulator only read the problem), at most 8 side by side, and compared
  // in candidate order, so the result is the one-after-another search's.
  struct Evaluated {
    std::optional<Result<Schedule>> schedule;
    bool simulated = false;
    double makespan = 0.0, maxSpan = 0.0;
  };
  Result<Schedule> best = Failure{"no candidate schedule"};
  double bestMakespan = kInfinity, bestSpan = kInfinity;
  auto evaluate = [&](std::size_t i) {
    Evaluated e;
    e.schedule.emplace(candidates[i]());
    if (*e.schedule) {
      Result<SimulationResult> sim =
          simulate(problem, **e.schedule, /*timeline=*/false);
      // A candidate over the limit is not one (the engines keep to it by
      // construction; this holds them to it).
      if (sim && !exceedsMemoryLimit(sim->maxPeakMemory(), memLimit)) {
        e.simulated = true;
        e.makespan = sim->makespan;
        e.maxSpan = sim->maxSpan;
      }
    }
    return e;
  };
  // Keeps a candidate when it beats the best so far on the paper's
  // objective: the smallest max span (bubble rate), then the smallest
  // makespan.
  auto consider = [&](Evaluated &candidate) {
    Result<Schedule> &schedule = *candidate.schedule;
    if (!schedule) {
      if (!best && bestMakespan == kInfinity)
        best = std::move(schedule);
      return;
    }
    if (!candidate.simulated)
      return;
    double tolerance = 1e-9 * std::max(1.0, candidate.makespan);
    if (candidate.maxSpan < bestSpan - tolerance ||
        (candidate.maxSpan <= bestSpan + tolerance &&
         candidate.makespan < bestMakespan - tolerance)) {
      bestMakespan = candidate.makespan;
      bestSpan = candidate.maxSpan;
      best = std::move(schedule);
    }
  };
  detail::evaluateInOrder<Evaluated>(candidates.size(), 8, evaluate, consider);
  return best;
}

} // namespace zb::schedule
