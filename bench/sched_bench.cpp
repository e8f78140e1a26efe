//===- sched_bench.cpp - Time schedule generation and simulation ----------===//
//
// Prints, side by side, the time to generate and simulate each schedule for
// p = 32, m = 256 and p = 64, m = 512 (T_F = T_B = 2, T_W = 1,
// T_comm = 0.1), or for the sizes given as `P M` pairs on the command line,
// and each one's ratio to 1f1b. zb-auto runs its whole grid search (its
// candidates side by side, one per hardware thread); the target at p = 64,
// m = 512 is a second for zb-auto and zb-v.
//
//===----------------------------------------------------------------------===//

#include "zb/Schedule/Generators.h"
#include "zb/Schedule/Simulator.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace zb::schedule;

/// One table for `p` ranks and `m` microbatches.
static void benchSize(int p, int m) {
  Problem base;
  base.numRanks = p;
  base.numMicrobatches = m;
  base.costF = 2.0;
  base.costB = 2.0;
  base.costW = 1.0;
  base.costComm = 0.1;
  base.memB = 1.0;
  base.memW = 0.5;

  std::printf("p=%d m=%d: generate + simulate (%u hardware threads)\n",
              base.numRanks, base.numMicrobatches,
              std::thread::hardware_concurrency());
  std::printf("%-18s %10s %10s %10s %8s\n", "schedule", "seconds", "x 1f1b",
              "bubble", "peak");
  struct Row {
    std::string name;
    double seconds;
    Result<SimulationResult> sim;
  };
  std::vector<Row> rows;
  double reference = 0.0;
  for (const ScheduleInfo &info : knownSchedules()) {
    Problem problem = base;
    problem.numChunks = info.defaultChunks;
    problem.placement = info.defaultPlacement;
    auto start = std::chrono::steady_clock::now();
    Result<Schedule> schedule = generateSchedule(info.name, problem);
    Result<SimulationResult> sim =
        schedule ? simulate(problem, *schedule)
                 : Result<SimulationResult>(Failure{schedule.error()});
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (info.name == "1f1b")
      reference = seconds;
    rows.push_back({info.name, seconds, std::move(sim)});
  }
  for (const Row &row : rows) {
    if (!row.sim) {
      std::printf("%-18s error: %s\n", row.name.c_str(),
                  row.sim.error().c_str());
      continue;
    }
    std::printf("%-18s %10.4f %10.1f %9.2f%% %8.1f\n", row.name.c_str(),
                row.seconds, reference > 0 ? row.seconds / reference : 0.0,
                100 * row.sim->bubbleRate, row.sim->maxPeakMemory());
  }
}

int main(int argc, char **argv) {
  std::vector<std::pair<int, int>> sizes;
  for (int i = 1; i + 1 < argc; i += 2)
    sizes.push_back({std::atoi(argv[i]), std::atoi(argv[i + 1])});
  if (sizes.empty())
    sizes = {{32, 256}, {64, 512}};
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i)
      std::printf("\n");
    benchSize(sizes[i].first, sizes[i].second);
  }
  return 0;
}
