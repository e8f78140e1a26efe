//===- zb-sched.cpp - Generate, check and draw pipeline schedules ---------===//
//
// zb-sched --schedule=NAME --stages=P --microbatches=M [--chunks=V]
//          [--placement=loop|v] --cost-f=TF --cost-b=TB --cost-w=TW
//          [--cost-comm=TC] [--mem-b=MB] [--mem-w=MW] [--mem-limit=X]
//          [--import-csv=FILE] [--format=text|json|chrome|svg|csv|mlir]
//          [-o FILE]
//
// Exit codes: 0 valid schedule written; 1 schedule written but invalid
// (imported CSVs); 2 bad flags, bad input or impossible problem.
//
//===----------------------------------------------------------------------===//

#include "zb/Schedule/Communication.h"
#include "zb/Schedule/Export.h"
#include "zb/Schedule/Generators.h"
#include "zb/Schedule/Optimal.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

using namespace zb::schedule;

static const char *const kUsage =
    "usage: zb-sched --schedule=NAME --stages=P --microbatches=M "
    "[--chunks=V] [--placement=loop|v]\n"
    "                --cost-f=TF --cost-b=TB --cost-w=TW [--cost-comm=TC]\n"
    "                [--cost-reduce=TR] [--mem-b=MB] [--mem-w=MW] "
    "[--mem-limit=X]\n"
    "                [--optimal] [--time-limit=S] [--import-csv=FILE] "
    "[--format=text|json|chrome|svg|csv|mlir] [-o FILE]\n"
    "\n"
    "Generates a pipeline schedule (or imports one from a PyTorch pipelining\n"
    "CSV), simulates and validates it, and writes it in the chosen format.\n"
    "  --schedule      one of the schedules below\n"
    "  --stages        pipeline ranks P (the model has P*V stages)\n"
    "  --microbatches  microbatches M per step\n"
    "  --chunks        stages per rank V (default: the schedule's, 1 or 2)\n"
    "  --placement     loop (interleaved) or v (V-shape); default per "
    "schedule\n"
    "  --cost-f/-b/-w  time of F, B (input grad), W (weight grad) per rank\n"
    "                  per microbatch (a chunk costs 1/V of it)\n"
    "  --cost-comm     time of one transfer between ranks (default 0)\n"
    "  --cost-reduce   data parallelism: time to average a rank's gradients\n"
    "                  over its replicas, one bucket per chunk started after\n"
    "                  the chunk's last W (a chunk's takes 1/V of it;\n"
    "                  default 0: one replica)\n"
    "  --mem-b         activations one microbatch holds from F to B, per rank\n"
    "                  (default 1)\n"
    "  --mem-w         memory held from B to W (default 0)\n"
    "  --mem-limit     peak activation memory per rank, in mem-b's unit\n"
    "                  (default: none; zb-auto uses 2*P*mem-b)\n"
    "  --optimal       also solve for the minimum-makespan schedule under\n"
    "                  --mem-limit (exact, CBC; small problems) and print\n"
    "                  the gap to it; --schedule=optimal prints that one\n"
    "  --time-limit    seconds the exact solver may take (default 60); when\n"
    "                  it stops there, its bound on the optimum is printed\n"
    "  --import-csv    read the schedule from FILE instead of generating one;\n"
    "                  --stages/--microbatches/--chunks/--placement default\n"
    "                  to the file's\n"
    "  --format        output format (default text); mlir writes the\n"
    "                  schedule with its sends and recvs as a sched.program\n"
    "  -o              output file (default stdout)\n"
    "exit codes: 0 valid, 1 written but invalid, 2 usage or input error\n"
    "schedules:\n";

static int fail(const std::string &message) {
  std::cerr << "zb-sched: error: " << message << "\n";
  return 2;
}

static bool parseInt(const std::string &text, int &value) {
  if (text.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long parsed = std::strtol(text.c_str(), &end, 10);
  if (errno || *end || parsed < -1000000000L || parsed > 1000000000L)
    return false;
  value = static_cast<int>(parsed);
  return true;
}

static bool parseDouble(const std::string &text, double &value) {
  if (text.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  value = std::strtod(text.c_str(), &end);
  return !errno && !*end && std::isfinite(value);
}

int main(int argc, char **argv) {
  static const char *const known[] = {
      "schedule", "stages",  "microbatches", "chunks",     "placement",
      "cost-f",   "cost-b",  "cost-w",       "cost-comm",  "cost-reduce",
      "mem-b",    "mem-w",   "mem-limit",    "import-csv", "format",
      "o",        "optimal", "time-limit"};
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      for (const ScheduleInfo &info : knownSchedules())
        std::cout << "  " << info.name
                  << std::string(18 - info.name.size(), ' ') << info.summary
                  << "\n";
      std::cout << "  optimal           the least makespan within --mem-limit, "
                   "proven (exact solver;\n"
                   "                    small problems)\n";
      return 0;
    }
    std::string name, value;
    bool hasValue = false;
    if (arg.rfind("--", 0) == 0) {
      name = arg.substr(2);
    } else if (arg == "-o") {
      name = "o";
    } else {
      return fail("unexpected argument '" + arg + "' (see --help)");
    }
    std::size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      hasValue = true;
    }
    bool isKnown = false;
    for (const char *flag : known)
      isKnown = isKnown || name == flag;
    if (!isKnown)
      return fail("unknown flag '" + arg + "' (see --help)");
    if (!hasValue && name == "optimal") {
      value = "1";
      hasValue = true;
    }
    if (!hasValue) {
      if (i + 1 >= argc)
        return fail("flag '" + arg + "' needs a value");
      value = argv[++i];
    }
    if (flags.count(name))
      return fail("flag '--" + name + "' given twice");
    flags[name] = value;
  }

  auto has = [&](const char *name) { return flags.count(name) != 0; };
  Problem problem;
  double costReduce = 0.0;
  auto intFlag = [&](const char *name, int &out) -> bool {
    if (!has(name))
      return true;
    if (!parseInt(flags[name], out)) {
      fail(std::string("--") + name + " expects an integer, got '" +
           flags[name] + "'");
      return false;
    }
    return true;
  };
  auto realFlag = [&](const char *name, double &out) -> bool {
    if (!has(name))
      return true;
    if (!parseDouble(flags[name], out)) {
      fail(std::string("--") + name + " expects a number, got '" + flags[name] +
           "'");
      return false;
    }
    return true;
  };
  if (!intFlag("stages", problem.numRanks) ||
      !intFlag("microbatches", problem.numMicrobatches) ||
      !intFlag("chunks", problem.numChunks) ||
      !realFlag("cost-f", problem.costF) ||
      !realFlag("cost-b", problem.costB) ||
      !realFlag("cost-w", problem.costW) ||
      !realFlag("cost-comm", problem.costComm) ||
      !realFlag("cost-reduce", costReduce) ||
      !realFlag("mem-b", problem.memB) || !realFlag("mem-w", problem.memW) ||
      !realFlag("mem-limit", problem.memLimit))
    return 2;

  ExportFormat format = ExportFormat::Text;
  bool mlirFormat = has("format") && flags["format"] == "mlir";
  if (has("format") && !mlirFormat &&
      !parseExportFormat(flags["format"], format))
    return fail("unknown format '" + flags["format"] +
                "' (expected text, json, chrome, svg, csv or mlir)");
  if (has("placement") &&
      !parsePlacement(flags["placement"], problem.placement))
    return fail("unknown placement '" + flags["placement"] +
                "' (expected loop or v)");
  for (const char *name : {"cost-f", "cost-b", "cost-w"})
    if (!has(name))
      return fail(std::string("missing required flag --") + name);

  Schedule schedule;
  if (has("import-csv") && flags.count("schedule") &&
      flags["schedule"] == "optimal")
    return fail("--schedule=optimal solves for a schedule; it cannot name an "
                "imported one (--optimal compares the import with the "
                "optimum)");
  if (has("import-csv")) {
    std::string text;
    if (std::optional<std::string> problem =
            readInputFile(flags["import-csv"], uint64_t(256) << 20, text))
      return fail("cannot read '" + flags["import-csv"] + "': " + *problem);
    Result<Schedule> imported = importCsv(text);
    if (!imported)
      return fail(flags["import-csv"] + ": " + imported.error());
    schedule = std::move(*imported);
    // Infer the layout the file implies unless the flags give it.
    int maxStage = 0, maxMicrobatch = 0;
    for (const std::vector<Action> &rank : schedule.ranks)
      for (const Action &action : rank) {
        maxStage = std::max(maxStage, action.stage);
        maxMicrobatch = std::max(maxMicrobatch, action.microbatch);
      }
    if (!has("stages"))
      problem.numRanks = static_cast<int>(schedule.ranks.size());
    if (!has("microbatches"))
      problem.numMicrobatches = maxMicrobatch + 1;
    if (!has("chunks") && problem.numRanks > 0)
      problem.numChunks =
          std::max(1, (maxStage + problem.numRanks) / problem.numRanks);
    std::string error;
    if (!problem.verifyCounts(error))
      return fail(flags["import-csv"] + ": " + error);
    if (static_cast<int>(schedule.ranks.size()) > problem.numRanks)
      return fail(flags["import-csv"] + ": the CSV has " +
                  std::to_string(schedule.ranks.size()) + " rows but " +
                  std::to_string(problem.numRanks) + " stages");
    schedule.ranks.resize(problem.numRanks);
    if (has("schedule"))
      schedule.name = flags["schedule"];
    // The placement the file implies (where its stages run), unless given.
    if (!has("placement")) {
      std::vector<int> stageRanks(problem.numRanks * problem.numChunks, -1);
      bool consistent = true;
      for (std::size_t r = 0; r < schedule.ranks.size(); ++r)
        for (const Action &action : schedule.ranks[r]) {
          if (action.stage >= static_cast<int>(stageRanks.size()))
            continue;
          int &rank = stageRanks[action.stage];
          consistent &= rank < 0 || rank == static_cast<int>(r);
          rank = static_cast<int>(r);
        }
      PlacementFit fit = inferPlacement(stageRanks, problem.numRanks);
      if (consistent && fit.ok && fit.numChunks == problem.numChunks)
        problem.placement = fit.placement;
    }
  } else {
    if (!has("schedule"))
      return fail("missing required flag --schedule (known: " +
                  knownScheduleNames() + ")");
    if (!has("stages"))
      return fail("missing required flag --stages");
    if (!has("microbatches"))
      return fail("missing required flag --microbatches");
    const ScheduleInfo *info = lookupSchedule(flags["schedule"]);
    if (!info && flags["schedule"] != "optimal")
      return fail("unknown schedule '" + flags["schedule"] +
                  "' (known: " + knownScheduleNames() + ", optimal)");
    if (info && !has("chunks"))
      problem.numChunks = info->defaultChunks;
    if (info && !has("placement"))
      problem.placement = info->defaultPlacement;
  }
  bool optimal = has("optimal") || flags["schedule"] == "optimal";
  double timeLimit = 60.0;
  if (!realFlag("time-limit", timeLimit))
    return 2;
  if (has("optimal") && flags["optimal"] != "1")
    return fail("--optimal takes no value");
  if (!(timeLimit > 0))
    return fail("--time-limit must be a positive number of seconds");

  if (std::string error; !problem.verifyCounts(error))
    return fail(error);
  if (!(costReduce >= 0) || !std::isfinite(costReduce))
    return fail("cost-reduce must be a finite non-negative number");
  if (costReduce > 0)
    problem.stageCostReduce.assign(problem.numStages(),
                                   costReduce / problem.numChunks);
  std::string error;
  if (!problem.verify(error))
    return fail(error);

  std::optional<OptimalSchedule> optimum;
  if (optimal) {
    Result<OptimalSchedule> solved = solveOptimal(problem, timeLimit);
    if (!solved)
      return fail("optimal: " + solved.error());
    optimum = std::move(*solved);
    std::cerr << "zb-sched: optimal: "
              << (optimum->proven ? "proven optimal"
                                  : "stopped at the time limit")
              << " after " << optimum->seconds << " s\n";
  }
  if (has("import-csv")) {
  } else if (flags["schedule"] == "optimal") {
    schedule = optimum->schedule;
  } else {
    Result<Schedule> generated = generateSchedule(flags["schedule"], problem);
    if (!generated)
      return fail(generated.error());
    if (!generated->note.empty())
      std::cerr << "zb-sched: note: " << generated->note << "\n";
    schedule = std::move(*generated);
  }

  ScheduleReport report = analyze(problem, schedule);
  if (optimum) {
    report.hasOptimum = true;
    report.optimum = optimum->makespan;
    report.optimumBound = optimum->bound;
    report.optimumProven = optimum->proven;
  }
  std::string output;
  if (mlirFormat) {
    Result<CommProgram> program = insertCommunication(problem, schedule);
    if (!program) {
      std::cerr << "zb-sched: invalid schedule: " << program.error() << "\n";
      return 1;
    }
    std::ostringstream os;
    writeSchedProgram(*program, os);
    output = os.str();
  } else {
    output = exportReport(report, format);
  }
  if (has("o")) {
    std::ofstream out(flags["o"]);
    if (!out)
      return fail("cannot write '" + flags["o"] + "'");
    out << output;
    out.flush();
    if (!out)
      return fail("cannot write '" + flags["o"] + "': " + std::strerror(errno));
  } else {
    std::cout << output;
    std::cout.flush();
    if (!std::cout)
      return fail("cannot write the standard output: " +
                  std::string(std::strerror(errno)));
  }
  if (!report.valid()) {
    std::string reason = report.diagnostics.empty()
                             ? report.simulationError
                             : report.diagnostics.front().message;
    std::cerr << "zb-sched: invalid schedule: " << reason << "\n";
    return 1;
  }
  return 0;
}
