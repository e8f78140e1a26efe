//===- Optimal.cpp - The minimum-makespan schedule, proven ----------------===//
//
// Part of ZeroBubble MLIR.
//
// The model, for actions a with durations d_a on ranks r(a):
//
//   minimise C
//   s_v >= s_u + d_u + lag(u, v)        every dependency u -> v (lag: the
//                                       transfer cost between ranks)
//   s_a + d_a <= C                      every action
//   s_a + d_a <= s_b + U (1 - y_ab)     every pair on one rank that no
//   s_b + d_b <= s_a + U y_ab           chain of dependencies orders
//   sum_{a before k} delta_a + delta_k <= L   every F k (the rank's memory
//                                       right after it; only an F adds)
//
// where y_ab = 1 puts a before b, U is an upper bound on the makespan (the
// start schedule's), and delta is what an action adds to its rank's
// activations (F: M_B of a chunk, B: M_W - M_B, W: -M_W). Microbatches are
// interchangeable, so stage 0 may take them in order (F(0, j) before
// F(0, j+1)) without losing the optimum.
//
//===----------------------------------------------------------------------===//

#include "zb/Schedule/Optimal.h"

#include "zb/Schedule/Generators.h"
#include "zb/Schedule/LowerBound.h"
#include "zb/Schedule/Simulator.h"
#include "zb/Schedule/Validator.h"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zb::schedule {

namespace {

/// The actions of a problem, their dependencies and which pairs they order.
struct Graph {
  Graph(const Problem &problem);

  int index(ActionKind kind, int stage, int mb) const {
    int k = kind == ActionKind::F ? 0 : kind == ActionKind::B ? 1 : 2;
    return (k * numStages + stage) * numMicrobatches + mb;
  }
  bool orders(int a, int b) const { return reach[a][b]; }

  int numStages, numMicrobatches, size;
  std::vector<Action> actions;
  std::vector<int> rank;
  std::vector<double> duration, delta;
  struct Edge {
    int from, to;
    double lag;
  };
  std::vector<Edge> edges;
  /// reach[a][b]: a chain of dependencies leads from a to b.
  std::vector<std::vector<bool>> reach;
  /// A topological order's position of each action.
  std::vector<int> position;
  /// The longest chain of dependencies before an action starts (its
  /// earliest start), and after it ends (the least the step goes on).
  std::vector<double> head, tail;
};

Graph::Graph(const Problem &problem)
    : numStages(problem.numStages()), numMicrobatches(problem.numMicrobatches),
      size(3 * numStages * numMicrobatches) {
  actions.resize(size);
  rank.resize(size);
  duration.resize(size);
  delta.resize(size);
  const ActionKind kinds[] = {ActionKind::F, ActionKind::B, ActionKind::W};
  for (ActionKind kind : kinds)
    for (int s = 0; s < numStages; ++s)
      for (int mb = 0; mb < numMicrobatches; ++mb) {
        int i = index(kind, s, mb);
        actions[i] = {kind, s, mb};
        rank[i] = problem.rankOfStage(s);
        duration[i] = actionCost(problem, actions[i]);
        delta[i] = actionMemoryDelta(problem, actions[i]);
      }
  int last = numStages - 1;
  for (int mb = 0; mb < numMicrobatches; ++mb) {
    for (int s = 1; s < numStages; ++s)
      edges.push_back({index(ActionKind::F, s - 1, mb),
                       index(ActionKind::F, s, mb),
                       problem.commCost(s - 1, s)});
    edges.push_back(
        {index(ActionKind::F, last, mb), index(ActionKind::B, last, mb), 0.0});
    for (int s = 0; s < last; ++s)
      edges.push_back({index(ActionKind::B, s + 1, mb),
                       index(ActionKind::B, s, mb),
                       problem.commCost(s + 1, s)});
    for (int s = 0; s < numStages; ++s) {
      edges.push_back(
          {index(ActionKind::F, s, mb), index(ActionKind::B, s, mb), 0.0});
      edges.push_back(
          {index(ActionKind::B, s, mb), index(ActionKind::W, s, mb), 0.0});
    }
    // The symmetry break.
    if (mb + 1 < numMicrobatches)
      edges.push_back(
          {index(ActionKind::F, 0, mb), index(ActionKind::F, 0, mb + 1), 0.0});
  }
  // A topological order, then reachability in reverse order of it.
  std::vector<std::vector<int>> out(size);
  std::vector<int> indegree(size, 0), order;
  for (const Edge &e : edges) {
    out[e.from].push_back(e.to);
    ++indegree[e.to];
  }
  for (int i = 0; i < size; ++i)
    if (!indegree[i])
      order.push_back(i);
  for (size_t k = 0; k < order.size(); ++k)
    for (int next : out[order[k]])
      if (--indegree[next] == 0)
        order.push_back(next);
  position.assign(size, 0);
  for (int k = 0; k < size; ++k)
    position[order[k]] = k;
  head.assign(size, 0.0);
  tail.assign(size, 0.0);
  std::vector<std::vector<std::pair<int, double>>> outgoing(size);
  for (const Edge &e : edges)
    outgoing[e.from].push_back({e.to, e.lag});
  for (int k = 0; k < size; ++k)
    for (auto [next, lag] : outgoing[order[k]])
      head[next] =
          std::max(head[next], head[order[k]] + duration[order[k]] + lag);
  for (int k = size - 1; k >= 0; --k)
    for (auto [next, lag] : outgoing[order[k]])
      tail[order[k]] =
          std::max(tail[order[k]], lag + duration[next] + tail[next]);
  reach.assign(size, std::vector<bool>(size, false));
  for (int k = size - 1; k >= 0; --k) {
    int a = order[k];
    for (int next : out[a]) {
      reach[a][next] = true;
      for (int c = 0; c < size; ++c)
        if (reach[next][c])
          reach[a][c] = true;
    }
  }
}

/// The best generator's schedule that fits the memory limit, if any.
std::optional<std::pair<Schedule, SimulationResult>>
bestGenerated(const Problem &problem) {
  std::optional<std::pair<Schedule, SimulationResult>> best;
  for (const ScheduleInfo &info : knownSchedules()) {
    if (info.fixedLayout && (problem.numChunks != info.defaultChunks ||
                             problem.placement != info.defaultPlacement))
      continue;
    Result<Schedule> schedule = generateSchedule(info.name, problem);
    if (!schedule || !validate(problem, *schedule).empty())
      continue;
    Result<SimulationResult> sim = simulate(problem, *schedule);
    if (sim && (!best || sim->makespan < best->second.makespan))
      best.emplace(std::move(*schedule), std::move(*sim));
  }
  return best;
}

struct ModelDeleter {
  void operator()(Cbc_Model *model) const { Cbc_deleteModel(model); }
};

} // namespace

Result<OptimalSchedule> solveOptimal(const Problem &problem,
                                     double timeLimitSeconds) {
  std::string error;
  if (!problem.verify(error))
    return Failure{error};
  Graph graph(problem);
  int n = graph.size;
  if (n > kMaxOptimalActions)
    return Failure{"the exact solver takes at most " +
                   std::to_string(kMaxOptimalActions) +
                   " actions (3 per stage and microbatch); this problem has " +
                   std::to_string(n)};

  // The start: the best generator's schedule within the limit. Without
  // one, everything one after the other bounds the makespan.
  std::optional<std::pair<Schedule, SimulationResult>> start =
      bestGenerated(problem);
  double upper = 0.0;
  for (int a = 0; a < n; ++a)
    upper += graph.duration[a];
  for (const Graph::Edge &e : graph.edges)
    upper += e.lag;
  if (start)
    upper = std::min(upper, start->second.makespan);
  upper = std::max(upper, 1e-9);

  // Every schedule's bound (LowerBound.h), and per action the window its
  // start lies in: after its dependencies, early enough for what follows.
  double lower = makespanLowerBound(problem).makespan;
  std::vector<double> earliest(n), latest(n);
  for (int a = 0; a < n; ++a) {
    earliest[a] = graph.head[a];
    latest[a] =
        std::max(earliest[a], upper - graph.duration[a] - graph.tail[a]);
  }
  std::unique_ptr<Cbc_Model, ModelDeleter> model(Cbc_newModel());
  Cbc_setLogLevel(model.get(), 0);
  for (int a = 0; a < n; ++a)
    Cbc_addCol(model.get(), ("s" + std::to_string(a)).c_str(), earliest[a],
               latest[a], 0.0, 0, 0, nullptr, nullptr);
  int makespan = n;
  Cbc_addCol(model.get(), "C", std::min(lower, upper), upper, 1.0, 0, 0,
             nullptr, nullptr);
  // Order variables of the pairs no dependency orders.
  std::vector<std::vector<int>> order(n, std::vector<int>(n, -1));
  int columns = n + 1;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      if (graph.rank[a] == graph.rank[b] && !graph.orders(a, b) &&
          !graph.orders(b, a)) {
        order[a][b] = columns++;
        Cbc_addCol(model.get(),
                   ("y" + std::to_string(a) + "_" + std::to_string(b)).c_str(),
                   0.0, 1.0, 0.0, 1, 0, nullptr, nullptr);
      }

  auto row = [&](std::vector<int> cols, std::vector<double> coefs, char sense,
                 double rhs) {
    Cbc_addRow(model.get(), "", static_cast<int>(cols.size()), cols.data(),
               coefs.data(), sense, rhs);
  };
  for (const Graph::Edge &e : graph.edges)
    row({e.to, e.from}, {1.0, -1.0}, 'G', graph.duration[e.from] + e.lag);
  for (int a = 0; a < n; ++a)
    row({a, makespan}, {1.0, -1.0}, 'L', -graph.duration[a] - graph.tail[a]);
  // The disjunctions, each with the least big-M its windows allow.
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      if (int y = order[a][b]; y >= 0) {
        double bigAB = latest[a] + graph.duration[a] - earliest[b];
        double bigBA = latest[b] + graph.duration[b] - earliest[a];
        row({a, b, y}, {1.0, -1.0, bigAB}, 'L', bigAB - graph.duration[a]);
        row({b, a, y}, {1.0, -1.0, -bigBA}, 'L', -graph.duration[b]);
      }
  if (problem.memLimit > 0)
    for (int k = 0; k < n; ++k) {
      if (graph.actions[k].kind != ActionKind::F)
        continue;
      double held = graph.delta[k];
      std::vector<int> cols;
      std::vector<double> coefs;
      for (int a = 0; a < n; ++a) {
        if (a == k || graph.rank[a] != graph.rank[k] || graph.delta[a] == 0)
          continue;
        if (graph.orders(a, k)) {
          held += graph.delta[a];
        } else if (!graph.orders(k, a)) {
          // a before k: y_ak for a < k, 1 - y_ka for a > k.
          int y = a < k ? order[a][k] : order[k][a];
          cols.push_back(y);
          coefs.push_back(a < k ? graph.delta[a] : -graph.delta[a]);
          if (a > k)
            held += graph.delta[a];
        }
      }
      if (cols.empty()) {
        if (held > problem.memLimit + 1e-9)
          return Failure{"no schedule keeps every rank within mem-limit " +
                         std::to_string(problem.memLimit)};
        continue;
      }
      row(cols, coefs, 'L', problem.memLimit - held);
    }

  if (start) {
    // The start schedule's times and orders.
    std::vector<double> values(columns, 0.0);
    std::vector<int> indices(columns);
    for (int c = 0; c < columns; ++c)
      indices[c] = c;
    // A fused BW is its B, then its W at the B's end.
    for (const std::vector<TimedAction> &timeline : start->second.timeline)
      for (const TimedAction &timed : timeline) {
        const Action &action = timed.action;
        if (action.kind != ActionKind::BW) {
          values[graph.index(action.kind, action.stage, action.microbatch)] =
              timed.start;
          continue;
        }
        int b = graph.index(ActionKind::B, action.stage, action.microbatch);
        int w = graph.index(ActionKind::W, action.stage, action.microbatch);
        values[b] = timed.start;
        values[w] = timed.start + graph.duration[b];
      }
    values[makespan] = start->second.makespan;
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b)
        if (int y = order[a][b]; y >= 0)
          values[y] =
              values[a] < values[b] || (values[a] == values[b] &&
                                        graph.position[a] < graph.position[b])
                  ? 1.0
                  : 0.0;
    Cbc_setMIPStartI(model.get(), columns, indices.data(), values.data());
  }

  Cbc_setMaximumSeconds(model.get(), timeLimitSeconds);
  // CBC's preprocessing (Cgl) crashes in its post-processing when the time
  // limit stops the search (coin-or Cbc 2.10, Debian's); on these problems
  // the search is also faster without it (a 5 x 2-chunk, 8-microbatch
  // problem proven optimal in 0.5 s instead of 3.7 s).
  Cbc_setParameter(model.get(), "preprocess", "off");
  auto began = std::chrono::steady_clock::now();
  Cbc_solve(model.get());
  OptimalSchedule result;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  const double *solution = Cbc_bestSolution(model.get());
  // Without an integer variable (one microbatch: no order to choose) the
  // problem is a linear program, whose solution CBC keeps as the columns'.
  if (!solution && Cbc_isProvenOptimal(model.get()))
    solution = Cbc_getColSolution(model.get());
  if (!solution)
    return Failure{"the solver found no schedule within " +
                   std::to_string(timeLimitSeconds) + " s"};

  // Each rank's actions in start order (ties: the solver's order).
  std::vector<std::vector<int>> ranks(problem.numRanks);
  for (int a = 0; a < n; ++a)
    ranks[graph.rank[a]].push_back(a);
  auto before = [&](int a, int b) {
    if (solution[a] < solution[b] - 1e-7)
      return true;
    if (solution[b] < solution[a] - 1e-7)
      return false;
    if (graph.orders(a, b) || graph.orders(b, a))
      return graph.orders(a, b);
    int y = a < b ? order[a][b] : order[b][a];
    bool aFirst = solution[y] > 0.5;
    return a < b ? aFirst : !aFirst;
  };
  result.schedule.name = "optimal";
  result.schedule.ranks.resize(problem.numRanks);
  for (int r = 0; r < problem.numRanks; ++r) {
    std::vector<int> &mine = ranks[r];
    // Insertion sort: `before` is a total order on one rank's actions only
    // for the solver's consistent solution; a stable pairwise pass keeps
    // it exact.
    for (size_t i = 1; i < mine.size(); ++i)
      for (size_t j = i; j > 0 && before(mine[j], mine[j - 1]); --j)
        std::swap(mine[j], mine[j - 1]);
    for (int a : mine)
      result.schedule.ranks[r].push_back(graph.actions[a]);
  }
  std::vector<Diagnostic> diagnostics = validate(problem, result.schedule);
  if (!diagnostics.empty())
    return Failure{"the solver's schedule does not validate: " +
                   diagnostics.front().message};
  Result<SimulationResult> sim = simulate(problem, result.schedule);
  if (!sim)
    return Failure{sim.error()};
  result.makespan = sim->makespan;
  // The solver's bound, or every schedule's where it is higher.
  result.bound =
      std::min(std::max(Cbc_getBestPossibleObjValue(model.get()), lower),
               result.makespan);
  constexpr double kTolerance = 1e-6;
  result.proven = Cbc_isProvenOptimal(model.get()) ||
                  result.makespan <= result.bound + kTolerance;
  if (result.proven)
    result.bound = result.makespan;
  return result;
}

} // namespace zb::schedule
