//===- Generators.cpp - Named pipeline schedule generators ------*- C++ -*-===//

#include "zb/Schedule/Generators.h"

#include "VGreedy.h"

#include "zb/Schedule/AutoScheduler.h"
#include "zb/Schedule/Simulator.h"
#include "zb/Schedule/Validator.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <queue>

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
      {"dualpipev", "DeepSeek's DualPipe folded into a V (m >= 2p)", 2,
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
  // generateSchedule checked m % p == 0 (layoutProblem).
  int p = problem.numRanks, m = problem.numMicrobatches, v = problem.numChunks;
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
  // The V shapes count the activations a microbatch holds: F's stash, and
  // from B to W what W needs, which in a compiled transformer is more (W
  // also reads the output gradients B computes). At p * memB alone a stage
  // with memW > memB cannot keep the shape: ZB-V has a 17% bubble at p = 2
  // with memW = 1.1 memB, against 0 at memW = memB.
  double held = std::max(problem.memB, problem.memW);
  double p = problem.numRanks, unit = held / problem.numChunks;
  double target = 0.0;
  if (name == "zb-auto")
    target = 2 * p * problem.memB;
  else if (name == "zb-v")
    target = p * held;
  else if (name == "v-half")
    // The building block's peak: 2*floor(p/2)+2 chunk activations (p+1 for
    // odd p, p+2 for even p, where the block has a 3-slot gap).
    target = (2 * std::floor(p / 2) + 2) * unit;
  else if (name == "v-min")
    // The building block's peak: 2*floor((p+1)/3)+2 chunk activations.
    target = (2 * std::floor((p + 1) / 3) + 2) * unit;
  else
    return problem.memLimit;
  // At least one microbatch's F, B and W in a row.
  target = std::max(target, held);
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

/// True when no rank of `schedule` holds more than `limit` activation memory
/// (the validator's memory rule alone, for schedules valid by construction).
static bool withinMemory(const Problem &problem, const Schedule &schedule,
                         double limit) {
  if (limit <= 0)
    return true;
  for (double peak : peakMemoryPerRank(problem, schedule))
    if (exceedsMemoryLimit(peak, limit))
      return false;
  return true;
}

/// zb-auto: the heuristic's grid search, plus the handcrafted ZB schedules
/// when they fit the limit, so it is never worse than them (their rules make
/// them valid; generateSchedule validates whichever is returned).
static Result<Schedule> zbAuto(const Problem &problem) {
  double limit = targetMemoryLimit("zb-auto", problem);
  Result<Schedule> best = autoSchedule(problem, limit);
  if (problem.numChunks == 1 && problem.placement == Placement::Loop) {
    double bestSpan = std::numeric_limits<double>::infinity();
    double bestMakespan = bestSpan;
    if (best) {
      Result<SimulationResult> sim =
          simulate(problem, *best, /*timeline=*/false);
      if (sim) {
        bestSpan = sim->maxSpan;
        bestMakespan = sim->makespan;
      }
    }
    for (Schedule hand : {zbH1(problem), zbH2(problem)}) {
      if (!withinMemory(problem, hand, limit))
        continue;
      Result<SimulationResult> sim =
          simulate(problem, hand, /*timeline=*/false);
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

namespace {

/// The controllable-memory paper's building blocks for V-Half and V-Min on
/// a unit time grid (every chunk action one slot, a period of 6 slots per
/// microbatch and rank). Kinds, per rank r: 0 = F of chunk 0 (stage r),
/// 1 = F of chunk 1 (stage 2p-1-r), 2 = B of chunk 1, 3 = B of chunk 0,
/// 4 = W (in B order), or, once split, 4 = W of chunk 1 and 5 = W of
/// chunk 0.
class VBlockBuilder {
public:
  VBlockBuilder(int p, int m) : p(p), m(m) {}

  /// Lays out microbatch j of kind k on rank r at offset[r][k] + 6j, then
  /// squeezes the warm-up and cool-down like the paper: first with the Ws
  /// placed in the free slots, then without them. False when the offsets
  /// collide.
  bool build(const std::vector<std::array<int, 4>> &offsets);
  /// Each rank's actions in slot order, the Ws split per chunk.
  Schedule schedule(const Problem &problem) const;

private:
  using Slots = std::vector<std::vector<int>>; // [kind][mb] -> slot
  /// Puts the Ws into the free slots (of kind 4, or 4/5 when `split`).
  void putWeights(Slots &rank, bool split) const;
  /// Peak memory of one rank in chunk activations; without explicit Ws a
  /// pending W frees its activation in the next free slot.
  static int peakMemory(const Slots &rank);
  void squeeze(bool withWeights);

  /// One rank's slots with the memory after each, for checking a move of
  /// one action without rescanning the rank.
  struct Profile {
    std::vector<int> at;              // slot -> kind, -1 when free
    std::vector<int> memory, pending; // after each slot
    bool explicitW = false;
    explicit Profile(const Slots &rank);
    /// Whether moving the action in slot `from` to the free slot `to`
    /// (earlier) keeps the rank within `limit`; makes the move if so, else
    /// sets `over` to the first slot that would exceed it. Only the slots
    /// whose state changes are scanned (every other slot is already within
    /// the limit).
    bool tryMove(int from, int to, int limit, int &over);
    /// With explicit Ws, where memory is a sum of the actions' deltas, the
    /// same choice directly: moves the action in slot `from` to the
    /// earliest slot after `earliest` that is not `occupied` and keeps the
    /// rank within `limit`, and returns it; -1 (no move) when none does.
    int moveExplicit(int from, int earliest, int limit,
                     const std::vector<char> &occupied);
  };

  int p, m;
  std::vector<Slots> ranks;
};

} // namespace

void VBlockBuilder::putWeights(Slots &rank, bool split) const {
  int last = 0;
  for (int kind = 0; kind < 4; ++kind)
    last = std::max(last, rank[kind].back());
  std::vector<int> at(last + 1, -1);
  for (int kind = 0; kind < 4; ++kind)
    for (int slot : rank[kind])
      at[slot] = kind;
  rank.resize(split ? 6 : 5);
  rank[4].clear();
  if (split)
    rank[5].clear();
  int pending[2] = {0, 0};
  int slot = 0;
  for (; slot <= last; ++slot) {
    int kind = at[slot];
    if (kind == 2 || kind == 3) {
      ++pending[split && kind == 3 ? 1 : 0];
    } else if (kind < 0) {
      for (int w = 0; w < 2; ++w) {
        if (pending[w]) {
          rank[4 + w].push_back(slot);
          --pending[w];
          break;
        }
      }
    }
  }
  for (int w = 0; w < 2; ++w)
    for (; pending[w] > 0; --pending[w])
      rank[4 + w].push_back(slot++);
}

/// Memory through one slot holding `kind` (-1: free): F holds a chunk
/// activation, W frees one; without explicit Ws a B leaves its W pending,
/// which a free slot runs.
static void stepMemory(int kind, bool explicitW, int &memory, int &pending) {
  static const int delta[] = {1, 1, 0, 0, -1, -1};
  if (kind >= 0) {
    memory += delta[kind];
    if (kind == 2 || kind == 3)
      ++pending;
  } else if (!explicitW && pending > 0) {
    --memory;
    --pending;
  }
}

int VBlockBuilder::peakMemory(const Slots &rank) {
  Profile profile(rank);
  int peak = 0;
  for (int memory : profile.memory)
    peak = std::max(peak, memory);
  return peak;
}

/// The `k`-th smallest (from 0) of the union of the sorted `a` and `b`.
static int kthOfSorted(const std::vector<int> &a, const std::vector<int> &b,
                       int k) {
  int n1 = static_cast<int>(a.size()), n2 = static_cast<int>(b.size());
  // i of the k + 1 smallest come from a, the rest from b.
  int lo = std::max(0, k + 1 - n2), hi = std::min(k + 1, n1);
  while (lo < hi) {
    int i = (lo + hi) / 2, j = k + 1 - i;
    if (a[i] < b[j - 1])
      lo = i + 1;
    else
      hi = i;
  }
  int i = lo, j = k + 1 - lo;
  return std::max(i > 0 ? a[i - 1] : INT_MIN, j > 0 ? b[j - 1] : INT_MIN);
}

VBlockBuilder::Profile::Profile(const Slots &rank) {
  int last = 0;
  for (const std::vector<int> &slots : rank)
    if (!slots.empty())
      last = std::max(last, slots.back());
  at.assign(last + 1, -1);
  for (std::size_t kind = 0; kind < rank.size(); ++kind)
    for (int slot : rank[kind])
      at[slot] = static_cast<int>(kind);
  explicitW = rank.size() > 4;
  memory.resize(at.size());
  pending.resize(at.size());
  int mem = 0, pend = 0;
  for (std::size_t i = 0; i < at.size(); ++i) {
    stepMemory(at[i], explicitW, mem, pend);
    memory[i] = mem;
    pending[i] = pend;
  }
}

bool VBlockBuilder::Profile::tryMove(int from, int to, int limit, int &over) {
  int kind = at[from];
  auto kindAt = [&](int i) { return i == to ? kind : i == from ? -1 : at[i]; };
  int mem = to > 0 ? memory[to - 1] : 0, pend = to > 0 ? pending[to - 1] : 0;
  int end = to;
  for (; end < static_cast<int>(at.size()); ++end) {
    stepMemory(kindAt(end), explicitW, mem, pend);
    if (mem > limit) {
      over = end;
      return false;
    }
    if (end >= from && mem == memory[end] && pend == pending[end])
      break;
  }
  // Accepted: record the new states up to where they meet the old ones.
  mem = to > 0 ? memory[to - 1] : 0;
  pend = to > 0 ? pending[to - 1] : 0;
  for (int i = to; i <= end && i < static_cast<int>(at.size()); ++i) {
    stepMemory(kindAt(i), explicitW, mem, pend);
    memory[i] = mem;
    pending[i] = pend;
  }
  at[to] = kind;
  at[from] = -1;
  return true;
}

int VBlockBuilder::Profile::moveExplicit(int from, int earliest, int limit,
                                         const std::vector<char> &occupied) {
  int kind = at[from];
  int delta = kind <= 1 ? 1 : kind == 4 ? -1 : 0;
  // An F raises every slot it moves across by one: it cannot move to or
  // before the last slot already at the limit.
  int lowest = earliest + 1;
  if (delta > 0)
    for (int j = from - 1; j >= lowest; --j)
      if (memory[j] + delta > limit) {
        lowest = j + 1;
        break;
      }
  int to = lowest;
  while (to < from && occupied[to])
    ++to;
  if (to >= from)
    return -1;
  for (int i = to; i < from; ++i)
    memory[i] += delta;
  at[to] = kind;
  at[from] = -1;
  return to;
}

void VBlockBuilder::squeeze(bool withWeights) {
  int numKinds = withWeights ? 5 : 4;
  if (withWeights)
    for (Slots &rank : ranks)
      putWeights(rank, false);
  int limit = 0;
  for (const Slots &rank : ranks)
    limit = std::max(limit, peakMemory(rank));
  std::vector<Profile> profiles;
  for (const Slots &rank : ranks)
    profiles.emplace_back(rank);
  std::vector<std::vector<char>> occupied(p);
  for (int r = 0; r < p; ++r) {
    int last = 0;
    for (int kind = 0; kind < numKinds; ++kind)
      last = std::max(last, ranks[r][kind].back());
    occupied[r].assign(last + 1, 0);
  }
  // Visit every action in the order of its original slot (ties: rank,
  // kind, microbatch), moving it to the earliest free slot after its
  // dependencies that keeps the rank within the peak memory. The steady
  // state (from rank 0's first B of chunk 0 to its last F of chunk 0)
  // stays; without Ws the warm-up stays too.
  std::vector<int> next(static_cast<std::size_t>(p) * numKinds, 0);
  using Head = std::array<int, 4>; // slot, rank, kind, mb
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  for (int r = 0; r < p; ++r)
    for (int kind = 0; kind < numKinds; ++kind)
      heads.push({ranks[r][kind][0], r, kind, 0});
  int phase = 0;
  while (!heads.empty()) {
    Head head = heads.top();
    heads.pop();
    int slot = head[0], r = head[1], kind = head[2], mb = head[3];
    if (mb + 1 < static_cast<int>(ranks[r][kind].size()))
      heads.push({ranks[r][kind][mb + 1], r, kind, mb + 1});
    if (kind == 3 && r == 0 && phase == 0)
      phase = 1;
    bool keep = phase == 1 || (phase == 0 && !withWeights);
    if (phase == 1 && kind == 0 && mb == m - 1)
      phase = 2;
    Slots &rank = ranks[r];
    if (!keep) {
      int earliest = -1;
      if ((kind == 0 || kind == 2) && r > 0)
        earliest = std::max(earliest, ranks[r - 1][kind][mb]);
      if ((kind == 1 || kind == 3) && r + 1 < p)
        earliest = std::max(earliest, ranks[r + 1][kind][mb]);
      if (kind >= 1 && kind <= 3)
        earliest = std::max(earliest, rank[kind - 1][mb]);
      // The mb-th W follows the mb-th B of either chunk.
      if (kind == 4)
        earliest = std::max(earliest, kthOfSorted(rank[2], rank[3], mb));
      if (mb > 0)
        earliest = std::max(earliest, rank[kind][mb - 1]);
      if (profiles[r].explicitW) {
        if (int to =
                profiles[r].moveExplicit(slot, earliest, limit, occupied[r]);
            to >= 0)
          rank[kind][mb] = to;
      } else {
        for (int candidate = earliest + 1; candidate < slot; ++candidate) {
          if (occupied[r][candidate])
            continue;
          int over;
          if (profiles[r].tryMove(slot, candidate, limit, over)) {
            rank[kind][mb] = candidate;
            break;
          }
          // An F moved to any slot up to `over` holds one more activation
          // there than now (and frees no sooner): when that alone is over
          // the limit, skip those slots.
          if (kind <= 1 && over < slot && profiles[r].memory[over] + 1 > limit)
            candidate = std::max(candidate, over);
        }
      }
    }
    occupied[r][rank[kind][mb]] = 1;
  }
  for (Slots &rank : ranks)
    rank.resize(4);
}

bool VBlockBuilder::build(const std::vector<std::array<int, 4>> &offsets) {
  ranks.assign(p, Slots(4, std::vector<int>(m)));
  for (int r = 0; r < p; ++r) {
    for (int kind = 0; kind < 4; ++kind) {
      if (offsets[r][kind] < 0)
        return false;
      for (int other = 0; other < kind; ++other)
        if ((offsets[r][kind] - offsets[r][other]) % 6 == 0)
          return false;
      for (int mb = 0; mb < m; ++mb)
        ranks[r][kind][mb] = offsets[r][kind] + 6 * mb;
    }
  }
  squeeze(true);
  squeeze(false);
  for (Slots &rank : ranks)
    putWeights(rank, true);
  return true;
}

Schedule VBlockBuilder::schedule(const Problem &problem) const {
  Schedule schedule = emptySchedule(problem, "");
  for (int r = 0; r < p; ++r) {
    std::vector<std::pair<int, Action>> actions;
    int stage0 = r, stage1 = 2 * p - 1 - r;
    const ActionKind kinds[] = {ActionKind::F, ActionKind::F, ActionKind::B,
                                ActionKind::B, ActionKind::W, ActionKind::W};
    const int stages[] = {stage0, stage1, stage1, stage0, stage1, stage0};
    for (int kind = 0; kind < 6; ++kind)
      for (int mb = 0; mb < m; ++mb)
        actions.push_back(
            {ranks[r][kind][mb], {kinds[kind], stages[kind], mb}});
    std::stable_sort(
        actions.begin(), actions.end(),
        [](const auto &a, const auto &b) { return a.first < b.first; });
    for (const auto &entry : actions)
      schedule.ranks[r].push_back(entry.second);
  }
  return schedule;
}

/// The building-block offsets of V-Half (half of 1F1B's activations) and
/// V-Min (a third), per rank: F chunk 0, F chunk 1, B chunk 1, B chunk 0.
static std::vector<std::array<int, 4>> vBlockOffsets(const std::string &name,
                                                     int p) {
  std::vector<std::array<int, 4>> offsets(p);
  for (int i = 0; i < p; ++i) {
    if (name == "v-half") {
      int gap = p % 2 == 0 ? 3 : 0;
      offsets[i] = {2 * i, 3 * p - i - 2, 3 * p + gap + 2 * i - 1,
                    6 * p + gap - i - 2};
    } else {
      int gap = p % 3 == 0 ? 2 : 0;
      offsets[i] = {i, 2 * p - i - 1, 2 * p + gap + i, 4 * p + gap - i - 1};
    }
  }
  return offsets;
}

/// V-Half / V-Min from the building block, or a failure when the block
/// does not apply (colliding offsets).
static Result<Schedule> vBlock(const std::string &name,
                               const Problem &problem) {
  if (problem.numChunks != 2 || problem.placement != Placement::V)
    return Failure{name + " needs chunks=2 and placement=v"};
  VBlockBuilder builder(problem.numRanks, problem.numMicrobatches);
  if (!builder.build(vBlockOffsets(name, problem.numRanks)))
    return Failure{"the building block does not apply"};
  Schedule schedule = builder.schedule(problem);
  schedule.name = name;
  return schedule;
}

/// Whether `a` has a lower simulated bubble rate than `b` (or the same and a
/// shorter makespan).
static bool betterThan(const Problem &problem, const Schedule &a,
                       const Schedule &b) {
  Result<SimulationResult> simA = simulate(problem, a, /*timeline=*/false);
  Result<SimulationResult> simB = simulate(problem, b, /*timeline=*/false);
  if (!simA || !simB)
    return simA.ok();
  constexpr double kTie = 1e-12;
  if (simA->bubbleRate < simB->bubbleRate - kTie)
    return true;
  return simA->bubbleRate <= simB->bubbleRate + kTie &&
         simA->makespan < simB->makespan;
}

/// zb-v, v-half, v-min: the heuristic on the V placement at the schedule's
/// memory target (zb-v also the greedy V construction). Sets `validated`
/// when the result already passed the validator (within the limit).
static Result<Schedule> vShape(const std::string &name, const Problem &problem,
                               bool &validated) {
  double limit = targetMemoryLimit(name, problem);
  if (name == "v-half" || name == "v-min") {
    Result<Schedule> block = vBlock(name, problem);
    if (block && fits(problem, *block, limit)) {
      validated = true;
      return block;
    }
  }
  // zb-v: the greedy V construction, and on problems small enough for its
  // search (p * m up to kSearchedActions) the heuristic too; the lower
  // bubble rate wins (then the shorter step).
  constexpr int kSearchedActions = 2048;
  bool search = name != "zb-v" ||
                problem.numRanks * problem.numMicrobatches <= kSearchedActions;
  Result<Schedule> schedule =
      search ? autoSchedule(problem, limit)
             : Result<Schedule>(Failure{"the problem is too large for the "
                                        "heuristic's search"});
  if (name == "zb-v")
    if (Result<Schedule> greedy = detail::vGreedySchedule(problem, limit);
        greedy && fits(problem, *greedy, limit) &&
        (!schedule || betterThan(problem, *greedy, *schedule))) {
      schedule = std::move(greedy);
      validated = true;
    }
  if (schedule) {
    schedule->name = name;
    return schedule;
  }
  // The heuristic can find nothing within the limit (very uneven stages);
  // zb-v then falls back to a V building block that fits it.
  if (name == "zb-v")
    for (const char *block : {"v-half", "v-min"}) {
      Result<Schedule> fallback = vBlock(block, problem);
      if (fallback && fits(problem, *fallback, limit)) {
        validated = true;
        fallback->note = "zb-v: the heuristic found no schedule within the "
                         "memory limit (" +
                         schedule.error() + "); using the " + block +
                         " building block";
        return fallback;
      }
    }
  return schedule;
}

/// DualPipeV (DeepSeek-V3's DualPipe folded into a V, the order of
/// PyTorch's ScheduleDualPipeV): per rank r, with stages s0 = r and
/// s1 = 2p-1-r, a warm-up of 2(p-r-1) chunk-0 Fs and r+1 F pairs, p-r-1
/// zero-bubble B-W-F rounds on chunk 1, then the steady state of
/// "F of one chunk with the fused backward of the other" pairs, and a
/// cool-down whose second half splits B from W so that the Ws fill the
/// drain. The pairs DualPipe overlaps on a GPU (one chunk's F hiding the
/// other's backward communication) run here one after the other, F first.
static Result<Schedule> dualPipeV(const Problem &problem) {
  // generateSchedule checked m >= 2p (layoutProblem).
  int p = problem.numRanks, m = problem.numMicrobatches;
  Schedule schedule = emptySchedule(problem, "dualpipev");
  for (int r = 0; r < p; ++r) {
    std::vector<Action> &out = schedule.ranks[r];
    int s0 = r, s1 = 2 * p - 1 - r;
    std::map<int, int> forwards, backwards;
    std::deque<std::pair<int, int>> weights;
    auto f = [&](int s) { out.push_back(makeF(s, forwards[s]++)); };
    auto bw = [&](int s) { out.push_back(makeBW(s, backwards[s]++)); };
    auto b = [&](int s) {
      weights.push_back({s, backwards[s]});
      out.push_back({ActionKind::B, s, backwards[s]++});
    };
    auto w = [&] {
      if (weights.empty())
        return;
      out.push_back(
          {ActionKind::W, weights.front().first, weights.front().second});
      weights.pop_front();
    };
    for (int i = 0; i < 2 * (p - r - 1); ++i)
      f(s0);
    for (int i = 0; i < r + 1; ++i) {
      f(s0);
      f(s1);
    }
    for (int i = 0; i < p - r - 1; ++i) {
      b(s1);
      w();
      f(s1);
    }
    for (int i = 0; i < m - 2 * p + r + 1; ++i) {
      f(s0);
      bw(s1);
      f(s1);
      bw(s0);
    }
    for (int i = 0; i < p - r - 1; ++i) {
      bw(s1);
      f(s1);
      bw(s0);
    }
    // The cool-down: from its middle on (chunk 1 first on odd ranks),
    // backwards leave their W for later.
    bool split = false;
    auto backward = [&](int s) { split ? b(s) : bw(s); };
    for (int i = 0; i < r + 1; ++i) {
      if (i == (r + 1) / 2 && r % 2 == 1)
        split = true;
      backward(s1);
      if (i == (r + 1) / 2 && r % 2 == 0)
        split = true;
      backward(s0);
    }
    for (int i = 0; i < p - r - 1; ++i) {
      w();
      backward(s0);
    }
    while (!weights.empty())
      w();
  }
  return schedule;
}

std::string layoutProblem(const std::string &name, const Problem &problem) {
  const ScheduleInfo *info = lookupSchedule(name);
  if (!info)
    return "unknown schedule '" + name + "' (known: " + knownScheduleNames() +
           ")";
  if (info->fixedLayout && (problem.numChunks != info->defaultChunks ||
                            problem.placement != info->defaultPlacement))
    return name + " needs chunks=" + std::to_string(info->defaultChunks) +
           " and placement=" + placementName(info->defaultPlacement) +
           "; got chunks=" + std::to_string(problem.numChunks) +
           ", placement=" + placementName(problem.placement);
  if (problem.numChunks < info->minChunks)
    return name + " needs at least " + std::to_string(info->minChunks) +
           " chunks per rank";
  int64_t p = problem.numRanks, m = problem.numMicrobatches;
  if (name == "interleaved-1f1b") {
    if (problem.placement != Placement::Loop)
      return "interleaved-1f1b needs placement=loop";
    // Microbatches go in groups of one per rank.
    if (m % p != 0)
      return "interleaved-1f1b needs microbatches in groups of the ranks "
             "(m % p == 0); got m=" +
             std::to_string(m) + ", p=" + std::to_string(p);
  }
  if (name == "dualpipev" && m < 2 * p)
    return "dualpipev needs at least 2p = " + std::to_string(2 * p) +
           " microbatches, got " + std::to_string(m);
  return "";
}

Result<Schedule> generateSchedule(const std::string &name,
                                  const Problem &problem) {
  std::string error;
  if (!lookupSchedule(name))
    return Failure{layoutProblem(name, problem)};
  if (!problem.verify(error))
    return Failure{error};
  if (std::string layout = layoutProblem(name, problem); !layout.empty())
    return Failure{layout};

  Result<Schedule> result = Failure{"unreachable"};
  bool validated = false;
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
  else if (name == "dualpipev")
    result = dualPipeV(problem);
  else
    result = vShape(name, problem, validated);
  if (!result)
    return Failure{name + ": " + result.error()};
  // Every generator's output must at least be structurally sound and
  // deadlock-free; memory is the caller's check. (A V result the generator
  // validated within its limit passed these checks already.)
  Problem unlimited = problem;
  unlimited.memLimit = 0;
  std::vector<Diagnostic> diagnostics;
  if (!validated)
    diagnostics = validate(unlimited, *result);
  if (!diagnostics.empty())
    return Failure{
        name + " produced an invalid schedule: " + diagnostics.front().message};
  result->name = name;
  return result;
}

} // namespace zb::schedule
