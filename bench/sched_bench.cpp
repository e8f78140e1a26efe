//===- sched_bench.cpp - Time schedule generation and simulation ----------===//
//
// Prints, side by side, the time to generate and simulate each schedule for
// p = 32, m = 256 and p = 64, m = 512 (T_F = T_B = 2, T_W = 1,
// T_comm = 0.1), or for the sizes given as `P M` pairs on the command line,
// and each one's ratio to 1f1b. zb-auto runs its whole grid search (its
// candidates side by side, one per hardware thread); the targets are a
// second for zb-auto and zb-v at p = 64, m = 512, and a minute for every
// schedule at p = 1024, m = 4096 (`zb-sched-bench 1024 4096`).
// `--only a,b` times just the schedules named; each row is printed as soon
// as its schedule is done.
//
//===----------------------------------------------------------------------===//

#include "zb/Schedule/Generators.h"
#include "zb/Schedule/Simulator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace zb::schedule;

/// One table for `p` ranks and `m` microbatches: every schedule, or those
/// in `only` when it is not empty.
static void benchSize(int p, int m, const std::vector<std::string> &only) {
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
  double reference = 0.0;
  for (const ScheduleInfo &info : knownSchedules()) {
    if (!only.empty() &&
        std::find(only.begin(), only.end(), info.name) == only.end())
      continue;
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
    if (!sim)
      std::printf("%-18s error: %s\n", info.name.c_str(), sim.error().c_str());
    else if (reference > 0)
      std::printf("%-18s %10.4f %10.1f %9.2f%% %8.1f\n", info.name.c_str(),
                  seconds, seconds / reference, 100 * sim->bubbleRate,
                  sim->maxPeakMemory());
    else
      std::printf("%-18s %10.4f %10s %9.2f%% %8.1f\n", info.name.c_str(),
                  seconds, "-", 100 * sim->bubbleRate, sim->maxPeakMemory());
    std::fflush(stdout);
  }
}

int main(int argc, char **argv) {
  std::vector<std::pair<int, int>> sizes;
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--only" && i + 1 < argc) {
      std::string names = argv[++i];
      for (size_t start = 0; start <= names.size();) {
        size_t comma = std::min(names.find(',', start), names.size());
        only.push_back(names.substr(start, comma - start));
        start = comma + 1;
      }
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: zb-sched-bench [--only a,b] [P M]...\n");
      return 2;
    }
    sizes.push_back({std::atoi(argv[i]), std::atoi(argv[i + 1])});
    ++i;
  }
  if (sizes.empty())
    sizes = {{32, 256}, {64, 512}};
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i)
      std::printf("\n");
    benchSize(sizes[i].first, sizes[i].second, only);
  }
  return 0;
}
