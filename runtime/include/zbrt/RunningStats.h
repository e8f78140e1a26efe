//===- RunningStats.h - Values recorded for running statistics -*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The store behind zbrt_record_stat_f32/f64 (zbrt.h): compiled code hands
// it the value of each running statistic (pipe.running_stat) a forward
// computes, under the buffer's name; the driver takes the values after a
// step and folds them into the buffers, in the order they came.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_RUNNINGSTATS_H
#define ZBRT_RUNNINGSTATS_H

#include <map>
#include <string>
#include <vector>

namespace zbrt {

/// Per buffer name, the values recorded, in the order compiled code
/// recorded them (one per forward, so microbatch order), each in row-major
/// order.
using StatRecords = std::map<std::string, std::vector<std::vector<double>>>;

/// Starts keeping what compiled code records, or (false) stops and forgets
/// it. Off at first: a forward run for a loss or a gradient check keeps
/// nothing.
void setRecordingStats(bool on);

/// Returns the values recorded since the last call and forgets them.
StatRecords takeStatRecords();

} // namespace zbrt

#endif // ZBRT_RUNNINGSTATS_H
