//===- Export.h - Schedule reports, exporters and CSV import -----*- C++
//-*-===//
//
// A ScheduleReport bundles a schedule with everything measured about it
// (simulation, validation, lower bound). Exporters render a report as an
// ASCII timeline, JSON, a Chrome trace (chrome://tracing, Perfetto), an SVG
// picture, or the PyTorch torch.distributed.pipelining CSV; importCsv() reads
// that CSV back.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_EXPORT_H
#define ZB_SCHEDULE_EXPORT_H

#include "zb/Schedule/LowerBound.h"
#include "zb/Schedule/Problem.h"
#include "zb/Schedule/Result.h"
#include "zb/Schedule/Schedule.h"
#include "zb/Schedule/Simulator.h"
#include "zb/Schedule/Validator.h"

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace zb::schedule {

/// A schedule with its measurements.
struct ScheduleReport {
  Problem problem;
  Schedule schedule;
  /// False when simulation failed; `simulationError` says why.
  bool simulated = false;
  SimulationResult simulation;
  std::string simulationError;
  LowerBound lowerBound;
  std::vector<Diagnostic> diagnostics;
  /// The exact solver's figures when it ran (Optimal.h): the best makespan
  /// it found, its lower bound on the optimum, and whether they are proven
  /// equal (the optimum).
  bool hasOptimum = false;
  double optimum = 0.0;
  double optimumBound = 0.0;
  bool optimumProven = false;

  bool valid() const { return simulated && diagnostics.empty(); }
};

/// Simulates and validates `schedule` and computes the lower bound.
ScheduleReport analyze(const Problem &problem, const Schedule &schedule);

/// Output formats of the exporters.
enum class ExportFormat { Text, Json, Chrome, Svg, Csv };
/// Parses "text", "json", "chrome", "svg" or "csv".
bool parseExportFormat(const std::string &text, ExportFormat &format);

/// Summary lines and one ASCII row per rank ('.' = idle).
void writeText(const ScheduleReport &report, std::ostream &os);
/// JSON with schedule, stages, microbatches, chunks, makespan, bubble_rate,
/// lower_bound, peak_memory, valid, diagnostics and per-rank actions.
void writeJson(const ScheduleReport &report, std::ostream &os);
/// Chrome trace event JSON: one thread per rank, 1 cost unit = 1 ms.
void writeChromeTrace(const ScheduleReport &report, std::ostream &os);
/// An SVG timeline: one lane per rank, F/B/W/BW coloured, idle in grey.
void writeSvg(const ScheduleReport &report, std::ostream &os);
/// PyTorch pipelining CSV: one row per rank, cells <stage><F|I|W|B><mb>
/// (I = input gradient B, W = weight gradient, B = fused backward BW).
void writeCsv(const Schedule &schedule, std::ostream &os);

/// Renders `report` in `format` into a string.
std::string exportReport(const ScheduleReport &report, ExportFormat format);

/// Reads a schedule input (a CSV to import, a profile of stage times) whole
/// into `text`: a regular file of at most `limitBytes` (a device or a pipe
/// would be read without end). Returns why it cannot ("it is not a regular
/// file", "cannot read it: ..."), or nullopt.
std::optional<std::string>
readInputFile(const std::string &path, uint64_t limitBytes, std::string &text);

/// Reads a PyTorch pipelining CSV (row r = rank r). Communication and
/// resharding cells (SEND_F, RECV_B, UNSHARD, ...) and empty cells are
/// skipped. Fails with "line L, cell C: ..." on a malformed cell.
Result<Schedule> importCsv(const std::string &text);

} // namespace zb::schedule

#endif // ZB_SCHEDULE_EXPORT_H
