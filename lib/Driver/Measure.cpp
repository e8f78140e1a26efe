//===- Measure.cpp - What a pipelined run measured ------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/Measure.h"

#include "zb/Dialect/Sched/Profile.h"
#include "zb/Schedule/Simulator.h"

#include "zbrt/Trace.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>

using namespace mlir;
using namespace zb::run;
namespace zs = zb::schedule;

std::string zb::run::serialize(const RankStep &step) {
  int64_t header[8] = {static_cast<int64_t>(step.actions.size()),
                       step.baseBytes,
                       step.peakBytes,
                       0,
                       0,
                       step.lending.shared,
                       step.lending.items,
                       step.lending.helperItems};
  static_assert(sizeof(double) == sizeof(int64_t), "times in the header");
  std::memcpy(&header[3], &step.offset, sizeof(double));
  std::memcpy(&header[4], &step.reductionWait, sizeof(double));
  std::string bytes(
      sizeof(header) + step.actions.size() * sizeof(zbrt::ActionRecord), '\0');
  std::memcpy(bytes.data(), header, sizeof(header));
  if (!step.actions.empty())
    std::memcpy(bytes.data() + sizeof(header), step.actions.data(),
                step.actions.size() * sizeof(zbrt::ActionRecord));
  return bytes;
}

bool zb::run::deserialize(const std::string &bytes, RankStep &step) {
  int64_t header[8];
  if (bytes.size() < sizeof(header))
    return false;
  std::memcpy(header, bytes.data(), sizeof(header));
  if (header[0] < 0 ||
      bytes.size() != sizeof(header) + header[0] * sizeof(zbrt::ActionRecord))
    return false;
  step.actions.resize(header[0]);
  if (header[0])
    std::memcpy(step.actions.data(), bytes.data() + sizeof(header),
                header[0] * sizeof(zbrt::ActionRecord));
  step.baseBytes = header[1];
  step.peakBytes = header[2];
  std::memcpy(&step.offset, &header[3], sizeof(double));
  std::memcpy(&step.reductionWait, &header[4], sizeof(double));
  step.lending = {header[5], header[6], header[7]};
  return true;
}

static zs::ActionKind kindOf(const zbrt::ActionRecord &record) {
  return static_cast<zs::ActionKind>(record.phase);
}

RunMeasurement zb::run::measure(const std::vector<std::vector<RankStep>> &steps,
                                const StageTable &table,
                                const zs::Problem &layout,
                                const std::string &scheduleName) {
  RunMeasurement out;
  int numRanks = layout.numRanks;
  size_t numStages = table.ranks.size();
  // Steps after the first give the costs and figures (the first warms up).
  size_t firstSteady = steps.size() > 1 ? 1 : 0;

  // Measured bubble per step: the simulator's function on measured times.
  for (const std::vector<RankStep> &step : steps) {
    std::vector<double> span, busy;
    for (const RankStep &rank : step) {
      if (rank.actions.empty())
        continue;
      span.push_back(rank.actions.back().end - rank.actions.front().start);
      busy.push_back(0.0);
      for (const zbrt::ActionRecord &a : rank.actions)
        busy.back() += a.end - a.start;
    }
    out.stepBubble.push_back(zs::bubbleRate(span, busy));
  }
  for (size_t k = firstSteady; k < steps.size(); ++k)
    out.bubble += out.stepBubble[k];
  if (steps.size() > firstSteady)
    out.bubble /= static_cast<double>(steps.size() - firstSteady);

  // Mean times per stage and kind, in ms.
  std::vector<double> sum[4], count[4];
  for (auto &v : sum)
    v.assign(numStages, 0.0);
  for (auto &v : count)
    v.assign(numStages, 0.0);
  for (size_t k = firstSteady; k < steps.size(); ++k)
    for (const RankStep &rank : steps[k])
      for (const zbrt::ActionRecord &a : rank.actions) {
        if (a.stage < 0 || static_cast<size_t>(a.stage) >= numStages ||
            a.phase < 0 || a.phase > 3)
          continue;
        sum[a.phase][a.stage] += (a.end - a.start) * 1e3;
        count[a.phase][a.stage] += 1;
      }
  auto mean = [&](int phase, size_t s) {
    return count[phase][s] ? sum[phase][s] / count[phase][s] : 0.0;
  };
  for (size_t s = 0; s < numStages; ++s) {
    double f = mean(0, s), b = mean(1, s), w = mean(2, s);
    if (count[3][s]) {
      double bw = mean(3, s);
      double cb = table.costB[s], cw = table.costW[s];
      double share = cb + cw > 0 ? cb / (cb + cw) : 1.0;
      b = bw * share;
      w = bw - b;
    }
    out.timeF.push_back(f);
    out.timeB.push_back(b);
    out.timeW.push_back(w);
  }

  // The schedule that ran: the last step's order on every rank.
  zs::Schedule executed;
  executed.name = scheduleName;
  executed.ranks.resize(numRanks);
  if (!steps.empty())
    for (int r = 0; r < numRanks && r < static_cast<int>(steps.back().size());
         ++r)
      for (const zbrt::ActionRecord &a : steps.back()[r].actions)
        executed.ranks[r].push_back({kindOf(a), static_cast<int>(a.stage),
                                     static_cast<int>(a.microbatch)});

  zs::Problem problem = layout;
  problem.stageCostF = out.timeF;
  problem.stageCostB = out.timeB;
  problem.stageCostW = out.timeW;
  problem.costComm = 0.0;
  zs::setStageMemory(problem, table.ranks, table.memB, table.memW);
  if (zs::Result<zs::SimulationResult> simulated =
          zs::simulate(problem, executed)) {
    out.simulatedBubble = simulated->bubbleRate;
    out.simulatedReduction = simulated->exposedReduction;
  }
  for (size_t k = firstSteady; k < steps.size(); ++k) {
    double longest = 0.0;
    for (const RankStep &rank : steps[k])
      longest = std::max(longest, rank.reductionWait * 1e3);
    out.reductionWait += longest / double(steps.size() - firstSteady);
  }

  // Memory per rank: measured, and predicted from each rank's own stages.
  out.peakStash.assign(numRanks, 0);
  out.peakMemory.assign(numRanks, 0);
  out.predictedStash.assign(numRanks, 0);
  out.microbatchStash.assign(numRanks, 0);
  out.microbatchWStash.assign(numRanks, 0);
  out.borrowedProducts.assign(numRanks, 0);
  std::vector<int64_t> items(numRanks, 0), helperItems(numRanks, 0);
  for (size_t s = 0; s < numStages; ++s)
    if (table.ranks[s] < numRanks) {
      out.microbatchStash[table.ranks[s]] +=
          static_cast<int64_t>(table.memB[s]);
      out.microbatchWStash[table.ranks[s]] +=
          static_cast<int64_t>(table.memW[s]);
    }
  for (size_t k = firstSteady; k < steps.size(); ++k)
    for (int r = 0; r < numRanks && r < static_cast<int>(steps[k].size());
         ++r) {
      const RankStep &rank = steps[k][r];
      for (const zbrt::ActionRecord &a : rank.actions)
        out.peakStash[r] =
            std::max(out.peakStash[r], a.liveBytes - rank.baseBytes);
      out.peakMemory[r] =
          std::max(out.peakMemory[r], rank.peakBytes - rank.baseBytes);
      out.borrowedProducts[r] += rank.lending.shared;
      items[r] += rank.lending.items;
      helperItems[r] += rank.lending.helperItems;
    }
  out.borrowedShare.assign(numRanks, 0.0);
  for (int r = 0; r < numRanks; ++r)
    if (items[r])
      out.borrowedShare[r] = double(helperItems[r]) / double(items[r]);
  for (int r = 0; r < numRanks; ++r) {
    std::vector<double> memB(numStages, 0.0), memW(numStages, 0.0);
    for (size_t s = 0; s < numStages; ++s)
      if (table.ranks[s] == r) {
        memB[s] = table.memB[s];
        memW[s] = table.memW[s];
      }
    zs::Problem mine = problem;
    zs::setStageMemory(mine, table.ranks, memB, memW);
    std::vector<double> peaks = zs::peakMemoryPerRank(mine, executed);
    if (r < static_cast<int>(peaks.size()))
      out.predictedStash[r] = static_cast<int64_t>(peaks[r]);
  }

  // Every step on one time line (ms since the first step's barrier).
  zs::ScheduleReport &report = out.trace;
  report.problem = problem;
  report.schedule = executed;
  report.schedule.name = scheduleName + " (measured)";
  report.simulated = true;
  // With replicas (--dp) every process has its lane: replica k's rank r is
  // lane k * numRanks + r.
  size_t lanes = numRanks;
  for (const std::vector<RankStep> &step : steps)
    lanes = std::max(lanes, step.size());
  report.simulation.timeline.resize(lanes);
  for (const std::vector<RankStep> &step : steps)
    for (int r = 0; r < static_cast<int>(step.size()); ++r)
      for (const zbrt::ActionRecord &a : step[r].actions)
        report.simulation.timeline[r].push_back(
            {{kindOf(a), static_cast<int>(a.stage),
              static_cast<int>(a.microbatch)},
             (step[r].offset + a.start) * 1e3,
             (step[r].offset + a.end) * 1e3});
  return out;
}

std::string zb::run::profileJson(const RunMeasurement &measurement) {
  return zb::sched::writeProfile(
      {measurement.timeF, measurement.timeB, measurement.timeW});
}

std::vector<double> zb::run::measureReductions(zbrt::Comm &world, int numRanks,
                                               int numReplicas, int rank,
                                               const zb::StageTable &table) {
  std::vector<double> rankBytes(numRanks, 0.0);
  for (size_t s = 0; s < table.ranks.size(); ++s)
    rankBytes[table.ranks[s]] += table.paramBytes[s];
  std::vector<float> scratch(
      static_cast<size_t>(rankBytes[rank] / sizeof(float)), 1.0f);
  std::vector<int> group;
  for (int r = 0; r < numReplicas; ++r)
    group.push_back(r * numRanks + rank);
  constexpr int kRepeats = 3;
  world.barrier();
  double start = zbrt::traceClock();
  for (int i = 0; i < kRepeats; ++i) {
    world.startGroupSum(scratch.data(), scratch.size(), zbrt::SumElement::F32,
                        group);
    world.waitGroupSums();
  }
  double seconds = (zbrt::traceClock() - start) / kRepeats;
  std::vector<std::string> all;
  world.gather(
      std::string(reinterpret_cast<const char *>(&seconds), sizeof(seconds)),
      all, 0);
  if (world.rank() != 0)
    return {};
  std::vector<double> perRank(numRanks, 0.0);
  for (size_t w = 0; w < all.size(); ++w) {
    double s = 0;
    if (all[w].size() == sizeof(s))
      std::memcpy(&s, all[w].data(), sizeof(s));
    perRank[w % numRanks] = std::max(perRank[w % numRanks], s);
  }
  std::vector<double> stageMs;
  for (size_t s = 0; s < table.ranks.size(); ++s) {
    int r = table.ranks[s];
    stageMs.push_back(rankBytes[r] > 0 ? perRank[r] * 1e3 *
                                             table.paramBytes[s] / rankBytes[r]
                                       : 0.0);
  }
  return stageMs;
}
