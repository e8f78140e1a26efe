//===- Export.cpp - Schedule reports, exporters and CSV import --*- C++ -*-===//

#include "zb/Schedule/Export.h"

#include "zbrt/Printable.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <optional>
#include <sstream>

namespace zb::schedule {

ScheduleReport analyze(const Problem &problem, const Schedule &schedule) {
  ScheduleReport report;
  report.problem = problem;
  report.schedule = schedule;
  std::string error;
  if (problem.verify(error))
    report.lowerBound = makespanLowerBound(problem);
  report.diagnostics = validate(problem, schedule);
  Result<SimulationResult> sim = simulate(problem, schedule);
  if (sim) {
    report.simulated = true;
    report.simulation = std::move(*sim);
  } else {
    report.simulationError = sim.error();
  }
  return report;
}

bool parseExportFormat(const std::string &text, ExportFormat &format) {
  static const std::pair<const char *, ExportFormat> names[] = {
      {"text", ExportFormat::Text},
      {"json", ExportFormat::Json},
      {"chrome", ExportFormat::Chrome},
      {"svg", ExportFormat::Svg},
      {"csv", ExportFormat::Csv}};
  for (const auto &[name, value] : names) {
    if (text == name) {
      format = value;
      return true;
    }
  }
  return false;
}

/// Formats a number compactly and deterministically ("12", "0.5").
static std::string number(double value) {
  if (std::fabs(value) < 1e-12)
    value = 0;
  std::ostringstream os;
  os << std::setprecision(10) << value;
  return os.str();
}

static std::string percent(double value) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << 100 * value << "%";
  return os.str();
}

static std::string jsonEscape(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buffer[8];
        std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
        out += buffer;
      } else {
        out += c;
      }
    }
  }
  return out;
}

static std::string xmlEscape(const std::string &text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

/// The PyTorch CSV letter of a kind.
static char csvKind(ActionKind kind) {
  switch (kind) {
  case ActionKind::F:
    return 'F';
  case ActionKind::B:
    return 'I';
  case ActionKind::W:
    return 'W';
  case ActionKind::BW:
    return 'B';
  }
  return '?';
}

static std::string csvCell(const Action &action) {
  return std::to_string(action.stage) + csvKind(action.kind) +
         std::to_string(action.microbatch);
}

static void writeSummary(const ScheduleReport &report, std::ostream &os,
                         const char *prefix) {
  const Problem &problem = report.problem;
  os << prefix << "schedule " << report.schedule.name << ": "
     << problem.numRanks << " stages x " << problem.numChunks
     << " chunks (placement " << placementName(problem.placement) << "), "
     << problem.numMicrobatches << " microbatches\n";
  if (report.simulated) {
    const SimulationResult &sim = report.simulation;
    os << prefix << "makespan " << number(sim.makespan) << ", lower bound "
       << number(report.lowerBound.makespan) << " (gap "
       << percent(gapToLowerBound(sim.makespan, report.lowerBound.makespan))
       << "), bubble rate " << percent(sim.bubbleRate) << ", peak memory "
       << number(sim.maxPeakMemory()) << "\n";
    if (report.hasOptimum) {
      if (report.optimumProven)
        os << prefix << "optimum " << number(report.optimum)
           << " (proven), gap "
           << percent(gapToLowerBound(sim.makespan, report.optimum)) << "\n";
      else
        os << prefix << "optimum between " << number(report.optimumBound)
           << " and " << number(report.optimum)
           << " (the solver's time limit), gap at most "
           << percent(gapToLowerBound(sim.makespan, report.optimumBound))
           << "\n";
    }
    if (!problem.stageCostReduce.empty())
      os << prefix
         << "gradient reduction over replicas: " << number(sim.exposedReduction)
         << " of the step not hidden by compute\n";
  } else {
    os << prefix << "not simulated: " << report.simulationError << "\n";
  }
  os << prefix << "valid " << (report.valid() ? "yes" : "no") << "\n";
  for (const Diagnostic &diagnostic : report.diagnostics)
    os << prefix << "error: " << diagnosticKindName(diagnostic.kind) << ": "
       << diagnostic.message << "\n";
}

void writeText(const ScheduleReport &report, std::ostream &os) {
  writeSummary(report, os, "");
  if (!report.simulated)
    return;
  const SimulationResult &sim = report.simulation;
  // One column per smallest action cost, at most 160 columns.
  double unit = std::numeric_limits<double>::infinity();
  for (const std::vector<TimedAction> &rank : sim.timeline)
    for (const TimedAction &timed : rank)
      if (timed.end > timed.start)
        unit = std::min(unit, timed.end - timed.start);
  if (!std::isfinite(unit) || unit <= 0)
    unit = 1;
  int columns = static_cast<int>(std::ceil(sim.makespan / unit - 1e-9));
  if (columns > 160) {
    unit = sim.makespan / 160;
    columns = 160;
  }
  os << "time unit per column: " << number(unit) << "\n";
  for (int rank = 0; rank < static_cast<int>(sim.timeline.size()); ++rank) {
    std::string row(std::max(columns, 0), '.');
    for (const TimedAction &timed : sim.timeline[rank]) {
      int first = static_cast<int>(std::floor(timed.start / unit + 1e-9));
      int last = static_cast<int>(std::ceil(timed.end / unit - 1e-9));
      char letter = timed.action.kind == ActionKind::BW
                        ? 'X'
                        : kindName(timed.action.kind)[0];
      if (report.problem.chunkOfStage(timed.action.stage) % 2 == 1)
        letter = static_cast<char>(std::tolower(letter));
      for (int c = std::max(first, 0); c < std::min(last, columns); ++c)
        row[c] = letter;
    }
    os << "rank " << std::setw(3) << std::left << rank << std::right << "|"
       << row << "| peak memory " << number(sim.peakMemory[rank]) << "\n";
  }
  os << "legend: F forward, B input gradient, W weight gradient, X fused "
        "backward, lower case odd chunk, . idle\n";
}

void writeJson(const ScheduleReport &report, std::ostream &os) {
  const Problem &problem = report.problem;
  const SimulationResult &sim = report.simulation;
  os << "{\n";
  os << "  \"schedule\": \"" << jsonEscape(report.schedule.name) << "\",\n";
  os << "  \"stages\": " << problem.numRanks << ",\n";
  os << "  \"microbatches\": " << problem.numMicrobatches << ",\n";
  os << "  \"chunks\": " << problem.numChunks << ",\n";
  os << "  \"placement\": \"" << placementName(problem.placement) << "\",\n";
  os << "  \"costs\": {\"f\": " << number(problem.costF)
     << ", \"b\": " << number(problem.costB)
     << ", \"w\": " << number(problem.costW)
     << ", \"comm\": " << number(problem.costComm) << "},\n";
  os << "  \"memory\": {\"b\": " << number(problem.memB)
     << ", \"w\": " << number(problem.memW)
     << ", \"limit\": " << number(problem.memLimit) << "},\n";
  os << "  \"makespan\": " << (report.simulated ? number(sim.makespan) : "null")
     << ",\n";
  os << "  \"max_span\": " << (report.simulated ? number(sim.maxSpan) : "null")
     << ",\n";
  os << "  \"bubble_rate\": "
     << (report.simulated ? number(sim.bubbleRate) : "null") << ",\n";
  os << "  \"lower_bound\": " << number(report.lowerBound.makespan) << ",\n";
  os << "  \"gap\": "
     << (report.simulated
             ? number(gapToLowerBound(sim.makespan, report.lowerBound.makespan))
             : "null")
     << ",\n";
  os << "  \"exposed_reduction\": "
     << (report.simulated ? number(sim.exposedReduction) : "null") << ",\n";
  if (report.hasOptimum) {
    os << "  \"optimum\": " << number(report.optimum)
       << ",\n  \"optimum_bound\": " << number(report.optimumBound)
       << ",\n  \"optimum_proven\": "
       << (report.optimumProven ? "true" : "false") << ",\n";
    os << "  \"gap_to_optimum\": "
       << (report.simulated
               ? number(gapToLowerBound(sim.makespan, report.optimumBound))
               : "null")
       << ",\n";
  }
  os << "  \"peak_memory\": [";
  std::vector<double> peaks = report.simulated
                                  ? sim.peakMemory
                                  : peakMemoryPerRank(problem, report.schedule);
  for (std::size_t i = 0; i < peaks.size(); ++i)
    os << (i ? ", " : "") << number(peaks[i]);
  os << "],\n";
  os << "  \"valid\": " << (report.valid() ? "true" : "false") << ",\n";
  os << "  \"diagnostics\": [";
  for (std::size_t i = 0; i < report.diagnostics.size(); ++i)
    os << (i ? ", " : "") << "\"" << jsonEscape(report.diagnostics[i].message)
       << "\"";
  if (!report.simulated && report.diagnostics.empty())
    os << "\"" << jsonEscape(report.simulationError) << "\"";
  os << "],\n";
  os << "  \"actions\": [\n";
  for (std::size_t rank = 0; rank < report.schedule.ranks.size(); ++rank) {
    os << "    [";
    const std::vector<Action> &actions = report.schedule.ranks[rank];
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action &action = actions[i];
      os << (i ? ",\n     " : "") << "{\"kind\": \"" << kindName(action.kind)
         << "\", \"stage\": " << action.stage
         << ", \"microbatch\": " << action.microbatch;
      if (report.simulated) {
        const TimedAction &timed = sim.timeline[rank][i];
        os << ", \"start\": " << number(timed.start)
           << ", \"end\": " << number(timed.end);
      }
      os << "}";
    }
    os << "]" << (rank + 1 < report.schedule.ranks.size() ? "," : "") << "\n";
  }
  os << "  ]\n}\n";
}

void writeChromeTrace(const ScheduleReport &report, std::ostream &os) {
  os << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"schedule\": \""
     << jsonEscape(report.schedule.name) << "\"}, \"traceEvents\": [\n";
  bool first = true;
  auto separator = [&]() -> const char * {
    const char *text = first ? "" : ",\n";
    first = false;
    return text;
  };
  os << separator()
     << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, "
        "\"args\": {\"name\": \"pipeline "
     << jsonEscape(report.schedule.name) << "\"}}";
  // A measured run of several replicas has a lane per process.
  std::size_t lanes = std::max(
      report.schedule.ranks.size(),
      report.simulated ? report.simulation.timeline.size() : std::size_t(0));
  for (std::size_t rank = 0; rank < lanes; ++rank)
    os << separator()
       << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": "
       << rank << ", \"args\": {\"name\": \"rank " << rank << "\"}}";
  if (report.simulated) {
    for (std::size_t rank = 0; rank < report.simulation.timeline.size();
         ++rank) {
      for (const TimedAction &timed : report.simulation.timeline[rank]) {
        const Action &action = timed.action;
        os << separator() << "{\"name\": \"" << kindName(action.kind)
           << action.microbatch << "\", \"cat\": \"" << kindName(action.kind)
           << "\", \"ph\": \"X\", \"pid\": 0, \"tid\": " << rank
           << ", \"ts\": " << number(timed.start * 1000)
           << ", \"dur\": " << number((timed.end - timed.start) * 1000)
           << ", \"args\": {\"stage\": " << action.stage
           << ", \"microbatch\": " << action.microbatch << "}}";
      }
    }
  }
  os << "\n]}\n";
}

static const char *svgColor(ActionKind kind) {
  switch (kind) {
  case ActionKind::F:
    return "#4e79a7";
  case ActionKind::B:
    return "#f28e2b";
  case ActionKind::W:
    return "#59a14f";
  case ActionKind::BW:
    return "#e15759";
  }
  return "#000000";
}

void writeSvg(const ScheduleReport &report, std::ostream &os) {
  const int left = 70, top = 50, lane = 28, right = 20;
  int numRanks = static_cast<int>(report.schedule.ranks.size());
  double makespan = report.simulated ? report.simulation.makespan : 0.0;
  double scale = makespan > 0 ? std::min(40.0, 1200.0 / makespan) : 1.0;
  int width = left + static_cast<int>(std::ceil(makespan * scale)) + right;
  int height = top + numRanks * lane + 40;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
     << "\" height=\"" << height << "\" font-family=\"sans-serif\" "
     << "font-size=\"11\">\n";
  os << "<title>" << xmlEscape(report.schedule.name) << "</title>\n";
  std::ostringstream heading;
  heading << report.schedule.name << ": p=" << report.problem.numRanks
          << " m=" << report.problem.numMicrobatches
          << " v=" << report.problem.numChunks;
  if (report.simulated)
    heading << ", makespan " << number(makespan) << ", bubble rate "
            << percent(report.simulation.bubbleRate) << ", lower bound "
            << number(report.lowerBound.makespan);
  os << "<text x=\"" << left << "\" y=\"18\" font-size=\"13\">"
     << xmlEscape(heading.str()) << "</text>\n";
  // Legend.
  const std::pair<ActionKind, const char *> legend[] = {{ActionKind::F, "F"},
                                                        {ActionKind::B, "B"},
                                                        {ActionKind::W, "W"},
                                                        {ActionKind::BW, "BW"}};
  int x = left;
  for (const auto &[kind, label] : legend) {
    os << "<rect x=\"" << x << "\" y=\"26\" width=\"12\" height=\"12\" fill=\""
       << svgColor(kind) << "\"/><text x=\"" << x + 16 << "\" y=\"36\">"
       << label << "</text>\n";
    x += 50;
  }
  os << "<rect x=\"" << x << "\" y=\"26\" width=\"12\" height=\"12\" "
     << "fill=\"#e0e0e0\"/><text x=\"" << x + 16 << "\" y=\"36\">idle</text>\n";
  for (int rank = 0; rank < numRanks; ++rank) {
    int y = top + rank * lane;
    os << "<text x=\"4\" y=\"" << y + 17 << "\">rank " << rank << "</text>\n";
    // The idle background: whatever no action covers stays grey.
    os << "<rect class=\"idle\" x=\"" << left << "\" y=\"" << y + 2
       << "\" width=\"" << number(makespan * scale) << "\" height=\""
       << lane - 4 << "\" fill=\"#e0e0e0\"/>\n";
    if (!report.simulated)
      continue;
    for (const TimedAction &timed : report.simulation.timeline[rank]) {
      double ax = left + timed.start * scale;
      double aw = (timed.end - timed.start) * scale;
      const Action &action = timed.action;
      os << "<rect class=\"" << kindName(action.kind) << "\" x=\"" << number(ax)
         << "\" y=\"" << y + 2 << "\" width=\"" << number(aw) << "\" height=\""
         << lane - 4 << "\" fill=\"" << svgColor(action.kind)
         << "\" stroke=\"#ffffff\" "
         << "stroke-width=\"0.5\"><title>" << describe(action) << " ["
         << number(timed.start) << ", " << number(timed.end)
         << ")</title></rect>\n";
      if (aw >= 12)
        os << "<text x=\"" << number(ax + aw / 2) << "\" y=\"" << y + 18
           << "\" text-anchor=\"middle\" fill=\"#ffffff\">" << action.microbatch
           << "</text>\n";
    }
  }
  os << "</svg>\n";
}

void writeCsv(const Schedule &schedule, std::ostream &os) {
  for (const std::vector<Action> &actions : schedule.ranks) {
    for (std::size_t i = 0; i < actions.size(); ++i)
      os << (i ? "," : "") << csvCell(actions[i]);
    os << "\n";
  }
}

std::string exportReport(const ScheduleReport &report, ExportFormat format) {
  std::ostringstream os;
  switch (format) {
  case ExportFormat::Text:
    writeText(report, os);
    break;
  case ExportFormat::Json:
    writeJson(report, os);
    break;
  case ExportFormat::Chrome:
    writeChromeTrace(report, os);
    break;
  case ExportFormat::Svg:
    writeSvg(report, os);
    break;
  case ExportFormat::Csv:
    writeCsv(report.schedule, os);
    break;
  }
  return os.str();
}

static std::string trim(const std::string &text) {
  std::size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin])))
    ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1])))
    --end;
  return text.substr(begin, end - begin);
}

/// Parses a non-negative decimal integer spanning all of `text`.
static bool parseIndex(const std::string &text, int &value) {
  if (text.empty() || text.size() > 9)
    return false;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  value = std::stoi(text);
  return true;
}

/// One action of a PyTorch schedule CSV, e.g. 0F1; none for the
/// communication and FSDP actions, which the library derives or lacks.
static Result<std::optional<Action>> parseCsvAction(const std::string &token,
                                                    const std::string &where) {
  std::size_t digits = 0;
  while (digits < token.size() &&
         std::isdigit(static_cast<unsigned char>(token[digits])))
    ++digits;
  std::size_t tail = token.size();
  while (tail > digits &&
         std::isdigit(static_cast<unsigned char>(token[tail - 1])))
    --tail;
  int stage, mb;
  std::string kind = token.substr(digits, tail - digits);
  if (digits == 0 || tail == token.size() ||
      !parseIndex(token.substr(0, digits), stage) ||
      !parseIndex(token.substr(tail), mb))
    return Failure{where + "'" + zbrt::printable(token) +
                   "' is not an action (expected <stage><F|I|W|B>"
                   "<microbatch>, e.g. 0F1)"};
  if (kind.rfind("SEND_", 0) == 0 || kind.rfind("RECV_", 0) == 0 ||
      kind == "UNSHARD" || kind == "RESHARD" || kind == "REDUCE_GRAD")
    return std::optional<Action>();
  Action action{ActionKind::F, stage, mb};
  if (kind == "F")
    action.kind = ActionKind::F;
  else if (kind == "I")
    action.kind = ActionKind::B;
  else if (kind == "W")
    action.kind = ActionKind::W;
  else if (kind == "B")
    action.kind = ActionKind::BW;
  else
    return Failure{where + "unknown action kind '" + zbrt::printable(kind) +
                   "' in '" + zbrt::printable(token) +
                   "' (expected F, I, W or B)"};
  return std::optional<Action>(action);
}

Result<Schedule> importCsv(const std::string &text) {
  Schedule schedule;
  schedule.name = "imported";
  std::istringstream lines(text);
  std::string line;
  int lineNumber = 0;
  std::vector<std::vector<Action>> rows;
  while (std::getline(lines, line)) {
    ++lineNumber;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    std::vector<Action> row;
    std::istringstream cells(line);
    std::string cell;
    int cellNumber = 0;
    while (std::getline(cells, cell, ',')) {
      ++cellNumber;
      std::string token = trim(cell);
      if (token.empty())
        continue;
      std::string where = "line " + std::to_string(lineNumber) + ", cell " +
                          std::to_string(cellNumber) + ": ";
      // An overlapped pair, "(0F5;7B2)OVERLAP_F_B" (DualPipeV): its actions
      // one after the other.
      std::vector<std::string> tokens{token};
      static const std::string kOverlap = ")OVERLAP_F_B";
      if (token.front() == '(' && token.size() > kOverlap.size() &&
          token.compare(token.size() - kOverlap.size(), kOverlap.size(),
                        kOverlap) == 0) {
        tokens.clear();
        std::istringstream parts(
            token.substr(1, token.size() - 1 - kOverlap.size()));
        std::string part;
        while (std::getline(parts, part, ';'))
          if (!trim(part).empty())
            tokens.push_back(trim(part));
        if (tokens.empty())
          return Failure{where + "'" + zbrt::printable(token) +
                         "' overlaps no actions"};
      }
      for (const std::string &one : tokens) {
        Result<std::optional<Action>> action = parseCsvAction(one, where);
        if (!action)
          return Failure{action.error()};
        if (*action)
          row.push_back(**action);
      }
    }
    rows.push_back(std::move(row));
  }
  // Trailing blank lines are not ranks.
  while (!rows.empty() && rows.back().empty())
    rows.pop_back();
  if (rows.empty())
    return Failure{"the CSV has no actions"};
  schedule.ranks = std::move(rows);
  return schedule;
}

} // namespace zb::schedule

std::optional<std::string> zb::schedule::readInputFile(const std::string &path,
                                                       uint64_t limitBytes,
                                                       std::string &text) {
  std::error_code ec;
  std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec)
    return "cannot read it: " + ec.message();
  if (!std::filesystem::is_regular_file(status))
    return std::string("it is not a regular file");
  uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec)
    return "cannot read it: " + ec.message();
  if (size > limitBytes)
    return "it holds " + std::to_string(size) + " bytes, more than the " +
           std::to_string(limitBytes >> 20) + " MiB allowed";
  std::ifstream in(path, std::ios::binary);
  text.assign(size, '\0');
  if (!in || !in.read(text.data(), static_cast<std::streamsize>(size)))
    return "cannot read it: " + std::string(std::strerror(errno));
  return std::nullopt;
}
