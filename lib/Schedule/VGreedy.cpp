//===- VGreedy.cpp - The greedy ZB-V construction -------------------------===//
//
// Part of ZeroBubble MLIR.
//
// Six kinds of pass per rank: F, B and W of its two chunks. Here a pass's
// "lane" follows the direction its values travel: F lane 0 is chunk 0
// (rank 0 -> p-1), F lane 1 chunk 1 (p-1 -> 0); B and W lane 0 is chunk 1's
// backward (0 -> p-1) and lane 1 chunk 0's (p-1 -> 0). Every pass is placed
// with its time: it starts when its rank is free and its input has arrived
// (the producer's end plus the transfer cost).
//
// The construction: a warm-up of chunk-0 forwards as deep as memory and the
// arrival of the first chunk-1 forward allow, balanced between neighbours;
// then 2m rounds of one B and one F per rank, where waits for an input are
// filled with pending W passes (always when the W fits before the input
// arrives; optionally, per flag, when the wait exceeds what the rank may
// idle); pending Ws run first when a pass would exceed the memory limit;
// at the end the remaining Ws. The idle time each rank accumulates after
// its first pass is its bubble; a rerun that allows every rank the idle
// time the previous run left it refines the result while the largest bubble
// shrinks.
//
//===----------------------------------------------------------------------===//

#include "VGreedy.h"

#include "InOrder.h"

#include "zb/Schedule/Validator.h"

#include <algorithm>
#include <array>
#include <deque>
#include <optional>
#include <vector>

namespace zb::schedule::detail {

namespace {

/// One run of the construction.
class VGreedy {
public:
  VGreedy(const Problem &problem, double limit, bool fillF, bool fillB,
          std::vector<double> approved)
      : problem(problem), p(problem.numRanks), m(problem.numMicrobatches),
        limit(limit), fillF(fillF), fillB(fillB), approved(std::move(approved)),
        count(p), endTime(6 * p * m, -1.0), curTime(p, 0.0), mem(p, 0.0),
        pendingW(p), passes(p), stageBubble(p, 0.0) {
    if (this->approved.empty())
      this->approved.assign(p, -1.0);
    maxApproved =
        *std::max_element(this->approved.begin(), this->approved.end());
    for (auto &c : count)
      c.fill(0);
    for (std::vector<Pass> &rank : passes)
      rank.reserve(6 * static_cast<std::size_t>(m));
  }

  /// Runs the construction; false when it breaks down (a pass whose input
  /// is missing, memory beyond the limit with no W to run).
  bool run();

  /// The largest idle time of any rank after its first pass.
  double maxBubble() const { return maxStageBubble(-1); }
  const std::vector<double> &bubbles() const { return stageBubble; }
  /// The passes in placement order, as the schedule library's actions.
  Schedule schedule() const;

private:
  /// A pass: category (0 F, 1 B, 2 W) and lane.
  struct Pass {
    int cat, lane, microbatch;
  };

  int id(int cat, int lane, int rank, int mb) const {
    return ((cat * 2 + lane) * p + rank) * m + mb;
  }
  int stageOf(int cat, int lane, int rank) const {
    int chunk = cat == 0 ? lane : 1 - lane;
    return chunk == 0 ? rank : 2 * p - 1 - rank;
  }
  double cost(int cat, int lane, int rank) const {
    int stage = stageOf(cat, lane, rank);
    return cat == 0   ? problem.forwardCost(stage)
           : cat == 1 ? problem.backwardInputCost(stage)
                      : problem.backwardWeightCost(stage);
  }
  double memDelta(int cat) const {
    double b = problem.stageMemB(), w = problem.stageMemW();
    return cat == 0 ? b : cat == 1 ? w - b : -w;
  }
  bool overLimit(double value) const {
    return exceedsMemoryLimit(value, limit);
  }
  /// End time of node `node`; -1 (none) stands for "no input", which then
  /// reads the last node's end, as the reference construction does.
  double endOf(int node) const {
    return node >= 0 ? endTime[node] : endTime.back();
  }
  double maxStageBubble(int rank) const {
    double result = largestBubble;
    if (rank >= 0)
      result = std::max(result, maxApproved - approved[rank]);
    return result;
  }

  bool put(int cat, int lane, int rank);
  bool putW(int rank) {
    if (pendingW[rank].empty())
      return ok = false;
    int lane = pendingW[rank].front();
    pendingW[rank].pop_front();
    return put(2, lane, rank);
  }
  /// Fills the wait before a pass whose input is node `input` with pending
  /// Ws: every W that ends before the input arrives, then one more when the
  /// wait exceeds the rank's allowance and `fill` says so.
  bool fillWait(int rank, int input, bool fill) {
    double comm = problem.costComm;
    while (ok && !pendingW[rank].empty() && input >= 0 &&
           endOf(input) + comm >=
               curTime[rank] + cost(2, pendingW[rank].front(), rank))
      putW(rank);
    if (ok && !pendingW[rank].empty() &&
        endOf(input) + comm - curTime[rank] >
            maxStageBubble(rank) - stageBubble[rank] &&
        fill)
      putW(rank);
    return ok;
  }

  const Problem &problem;
  int p, m;
  double limit;
  bool fillF, fillB;
  std::vector<double> approved;
  double maxApproved = -1.0;
  std::vector<std::array<int, 6>> count;
  std::vector<double> endTime, curTime, mem;
  std::vector<std::deque<int>> pendingW;
  std::vector<std::vector<Pass>> passes;
  std::vector<double> stageBubble;
  /// max(stageBubble): bubbles only grow.
  double largestBubble = 0.0;
  bool ok = true;
};

bool VGreedy::put(int cat, int lane, int rank) {
  if (!ok)
    return false;
  int kind = cat * 2 + lane;
  int mb = count[rank][kind];
  if (mb >= m || overLimit(mem[rank] + memDelta(cat)))
    return ok = false;
  // The pass before it on this rank (its chunk's F for a B, ...).
  if (kind > 0) {
    int before = cat < 2 ? kind - 1 : 2 + lane;
    if (endTime[id(before / 2, before % 2, rank, mb)] < 0)
      return ok = false;
  }
  double c = cost(cat, lane, rank);
  double noBubble = curTime[rank] + c, end = noBubble;
  if (cat < 2) {
    int peer = lane == 1 ? rank + 1 : rank - 1;
    if (peer >= 0 && peer < p) {
      double input = endTime[id(cat, lane, peer, mb)];
      if (input < 0)
        return ok = false;
      end = std::max(end, input + problem.costComm + c);
    }
  }
  if (count[rank][0] > 0) {
    stageBubble[rank] += end - noBubble;
    largestBubble = std::max(largestBubble, stageBubble[rank]);
  }
  endTime[id(cat, lane, rank, mb)] = end;
  curTime[rank] = end;
  mem[rank] += memDelta(cat);
  passes[rank].push_back({cat, lane, mb});
  if (cat == 1)
    pendingW[rank].push_back(lane);
  ++count[rank][kind];
  return true;
}

bool VGreedy::run() {
  double comm = problem.costComm;
  // Warm-up: a chunk-0 F everywhere; then, from the last rank back, as many
  // more chunk-0 Fs on ranks 0..i as fit before rank i's first chunk-1 F
  // can start, then that chunk-1 F.
  for (int i = 0; i < p; ++i)
    put(0, 0, i);
  for (int i = p - 1; i >= 0 && ok; --i) {
    if (i == p - 1) {
      put(0, 1, i);
      continue;
    }
    double arrival = endTime[id(0, 1, i + 1, 0)] + comm;
    while (ok && !overLimit(mem[i] + memDelta(0) * (2 + i * 2)) &&
           curTime[i] + cost(0, 0, i) <= arrival && count[i][0] < m - i)
      for (int j = 0; j <= i; ++j)
        put(0, 0, j);
    put(0, 1, i);
  }
  // Balance the forwards between neighbours.
  int lane = 0;
  for (int i = 1; i < p && ok; ++i) {
    int idle = 0;
    while (ok &&
           (count[i][0] + count[i][1] < count[i - 1][0] + count[i - 1][1] ||
            (count[i][1] <= count[i - 1][1] && count[i - 1][1] < m))) {
      bool placed = false;
      for (int j = p - 1; j >= i; --j)
        if (count[j][lane] < m) {
          put(0, lane, j);
          placed = true;
        }
      lane = 1 - lane;
      if (!placed && ++idle > 2)
        return ok = false;
    }
  }
  // The steady state: per round one B and then one F on every rank.
  for (int round = 0; round < 2 * m && ok; ++round) {
    for (int i = 0; i < p && ok; ++i)
      while (ok && overLimit(mem[i] + memDelta(1)))
        putW(i);
    std::vector<int> lane0, lane1;
    for (int i = 0; i < p; ++i) {
      if (count[i][3] >= count[i][2])
        lane0.push_back(i);
      else if (i == p - 1 || endTime[id(1, 1, i + 1, count[i][3])] >= 0 ||
               count[i][2] >= m)
        lane1.push_back(i);
      else
        lane0.push_back(i);
    }
    std::vector<std::pair<int, int>> order;
    for (auto it = lane1.rbegin(); it != lane1.rend(); ++it)
      order.push_back({*it, 1});
    for (int i : lane0)
      order.push_back({i, 0});
    for (auto [i, l] : order) {
      if (!ok)
        break;
      int input = -1;
      if (l == 1 && i < p - 1)
        input = id(1, 1, i + 1, count[i][3]);
      if (l == 0 && i > 0)
        input = id(1, 0, i - 1, count[i][2]);
      fillWait(i, input, l == 1 || fillB);
      put(1, l, i);
    }
    for (int i = 0; i < p && ok; ++i) {
      if (count[i][1] >= m)
        continue;
      std::optional<int> item;
      if (count[i][1] >= count[i][0])
        item = 0;
      else if (i == p - 1)
        item = 1;
      else if (endTime[id(0, 1, i + 1, count[i][1])] >= 0)
        item = 1;
      else if (count[i][0] < m &&
               (i == 0 || endTime[id(0, 0, i - 1, count[i][0])] >= 0))
        item = 0;
      if (!item)
        continue;
      while (ok && overLimit(mem[i] + memDelta(0)))
        putW(i);
      int input = -1;
      if (*item == 0 && i > 0)
        input = id(0, 0, i - 1, count[i][0]);
      if (*item == 1 && i < p - 1)
        input = id(0, 1, i + 1, count[i][1]);
      fillWait(i, input, fillF);
      put(0, *item, i);
    }
  }
  for (int i = 0; i < p && ok; ++i)
    while (ok && !pendingW[i].empty())
      putW(i);
  if (!ok)
    return false;
  for (int i = 0; i < p; ++i)
    for (int kind = 0; kind < 6; ++kind)
      if (count[i][kind] != m)
        return ok = false;
  return true;
}

Schedule VGreedy::schedule() const {
  Schedule result;
  result.ranks.resize(p);
  const ActionKind kinds[] = {ActionKind::F, ActionKind::B, ActionKind::W};
  for (int r = 0; r < p; ++r)
    for (const Pass &pass : passes[r])
      result.ranks[r].push_back(
          {kinds[pass.cat], stageOf(pass.cat, pass.lane, r), pass.microbatch});
  return result;
}

struct Attempt {
  Schedule schedule;
  double maxBubble;
};

/// One run, then reruns allowing each rank the idle time the last run left
/// it, while the largest bubble shrinks.
std::optional<Attempt> attempt(const Problem &problem, double limit, bool fillF,
                               bool fillB) {
  std::optional<Attempt> best;
  std::vector<double> approved;
  // Each rerun must lower the largest bubble, so this ends; the cap only
  // bounds the work on pathological costs.
  for (int round = 0; round < 64; ++round) {
    VGreedy greedy(problem, limit, fillF, fillB, approved);
    if (!greedy.run())
      break;
    double bubble = greedy.maxBubble();
    if (best && bubble >= best->maxBubble)
      break;
    best = Attempt{greedy.schedule(), bubble};
    approved = greedy.bubbles();
  }
  return best;
}

} // namespace

Result<Schedule> vGreedySchedule(const Problem &problem, double memLimit) {
  if (problem.numChunks != 2 || problem.placement != Placement::V)
    return Failure{"the V greedy needs chunks=2 and placement=v"};
  // The four variants side by side (they only read the problem), compared
  // in order, so the result is the one-after-another search's.
  std::optional<Attempt> best;
  detail::evaluateInOrder<std::optional<Attempt>>(
      4, 4,
      [&](std::size_t i) {
        bool fillB = i < 2, fillF = i % 2 == 0;
        return attempt(problem, memLimit, fillF, fillB);
      },
      [&](std::optional<Attempt> &found) {
        if (found && (!best || found->maxBubble < best->maxBubble))
          best = std::move(found);
      });
  if (!best)
    return Failure{"the V greedy found no schedule within the memory limit"};
  return best->schedule;
}

} // namespace zb::schedule::detail
