//===- Problem.cpp - Pipeline scheduling problem model ----------*- C++ -*-===//

#include "zb/Schedule/Problem.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace zb::schedule {

const char *placementName(Placement placement) {
  return placement == Placement::V ? "v" : "loop";
}

bool parsePlacement(const std::string &text, Placement &placement) {
  if (text == "loop") {
    placement = Placement::Loop;
    return true;
  }
  if (text == "v") {
    placement = Placement::V;
    return true;
  }
  return false;
}

int rankOfStage(int stage, int numRanks, Placement placement) {
  int chunk = stage / numRanks;
  int offset = stage % numRanks;
  if (placement == Placement::V && chunk % 2 == 1)
    return numRanks - 1 - offset;
  return offset;
}

int Problem::rankOfStage(int stage) const {
  return zb::schedule::rankOfStage(stage, numRanks, placement);
}

std::vector<int> Problem::stagesOfRank(int rank) const {
  std::vector<int> stages;
  for (int chunk = 0; chunk < numChunks; ++chunk) {
    int offset = rank;
    if (placement == Placement::V && chunk % 2 == 1)
      offset = numRanks - 1 - rank;
    stages.push_back(chunk * numRanks + offset);
  }
  return stages;
}

static double stageCost(const std::vector<double> &list, double perRank,
                        int numChunks, int stage) {
  if (!list.empty())
    return list[stage];
  return perRank / numChunks;
}

double Problem::forwardCost(int stage) const {
  return stageCost(stageCostF, costF, numChunks, stage);
}

double Problem::backwardInputCost(int stage) const {
  return stageCost(stageCostB, costB, numChunks, stage);
}

double Problem::backwardWeightCost(int stage) const {
  return stageCost(stageCostW, costW, numChunks, stage);
}

double Problem::commCost(int fromStage, int toStage) const {
  return rankOfStage(fromStage) == rankOfStage(toStage) ? 0.0 : costComm;
}

double Problem::rankWork(int rank) const {
  double work = 0.0;
  for (int stage : stagesOfRank(rank))
    work += forwardCost(stage) + backwardInputCost(stage) +
            backwardWeightCost(stage);
  return work * numMicrobatches;
}

double Problem::maxRankWork() const {
  double work = 0.0;
  for (int rank = 0; rank < numRanks; ++rank)
    work = std::max(work, rankWork(rank));
  return work;
}

static bool checkList(const std::vector<double> &list, const char *name,
                      int numStages, std::string &error) {
  if (list.empty())
    return true;
  if (static_cast<int>(list.size()) != numStages) {
    error = std::string("per-stage ") + name + " list has " +
            std::to_string(list.size()) + " entries, expected " +
            std::to_string(numStages) + " (one per stage)";
    return false;
  }
  for (double value : list) {
    if (!std::isfinite(value) || value < 0) {
      error = std::string("per-stage ") + name +
              " costs must be finite and non-negative";
      return false;
    }
  }
  return true;
}

bool Problem::verifyCounts(std::string &error) const {
  if (numRanks < 1) {
    error = "stages (ranks) must be at least 1";
    return false;
  }
  if (numMicrobatches < 1) {
    error = "microbatches must be at least 1";
    return false;
  }
  if (numChunks < 1) {
    error = "chunks must be at least 1";
    return false;
  }
  if (numRanks > kMaxRanks || numMicrobatches > kMaxMicrobatches ||
      numChunks > kMaxChunks ||
      static_cast<long long>(numRanks) * numChunks * numMicrobatches >
          20000000LL) {
    error = "problem too large (ranks*chunks*microbatches must stay below "
            "2e7)";
    return false;
  }
  return true;
}

bool Problem::verify(std::string &error) const {
  if (!verifyCounts(error))
    return false;
  const double scalars[] = {costF, costB, costW, costComm, memB, memW};
  const char *names[] = {"cost-f",    "cost-b", "cost-w",
                         "cost-comm", "mem-b",  "mem-w"};
  for (int i = 0; i < 6; ++i) {
    if (!std::isfinite(scalars[i]) || scalars[i] < 0) {
      error = std::string(names[i]) + " must be a finite non-negative number";
      return false;
    }
  }
  if (std::string problem = memLimitProblem(memLimit); !problem.empty()) {
    error = problem;
    return false;
  }
  if (!checkList(stageCostF, "F", numStages(), error) ||
      !checkList(stageCostB, "B", numStages(), error) ||
      !checkList(stageCostW, "W", numStages(), error) ||
      !checkList(stageCostReduce, "reduction", numStages(), error))
    return false;
  // Every action and transfer of the step, one after the other: what no
  // schedule's makespan exceeds, which must stay finite.
  double total = 0.0;
  for (int stage = 0; stage < numStages(); ++stage) {
    double work = forwardCost(stage) + backwardInputCost(stage) +
                  backwardWeightCost(stage);
    if (work <= 0) {
      error = "stage " + std::to_string(stage) +
              " has zero total cost; costs must be positive";
      return false;
    }
    total += numMicrobatches * (work + 2 * costComm) +
             (stageCostReduce.empty() ? 0.0 : stageCostReduce[stage]);
  }
  if (!(total <= 1e300)) {
    error = "the costs are too large: a step's total work overflows a "
            "double";
    return false;
  }
  return true;
}

} // namespace zb::schedule

void zb::schedule::setStageMemory(Problem &problem,
                                  const std::vector<int> &stageRanks,
                                  const std::vector<double> &stageMemB,
                                  const std::vector<double> &stageMemW) {
  std::vector<double> memB(problem.numRanks, 0.0), memW(problem.numRanks, 0.0);
  for (std::size_t s = 0; s < stageRanks.size(); ++s) {
    memB[stageRanks[s]] += stageMemB[s];
    memW[stageRanks[s]] += stageMemW[s];
  }
  problem.memB = *std::max_element(memB.begin(), memB.end());
  problem.memW = *std::max_element(memW.begin(), memW.end());
}

std::string zb::schedule::memLimitProblem(double limit) {
  if (std::isfinite(limit) && limit >= 0)
    return "";
  std::ostringstream text;
  text << "mem-limit must be a finite number, 0 (no limit) or more, got "
       << limit;
  return text.str();
}
