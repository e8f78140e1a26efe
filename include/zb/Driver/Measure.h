//===- Measure.h - What a pipelined run measured ----------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// Turns the runtime's action records (zbrt/Trace.h) of every rank into the
// figures zb-run reports: the measured bubble rate, the mean F/B/W time per
// stage (the profile), the simulator's bubble rate for the schedule that ran
// with those times, the peak stash memory per rank next to the simulator's
// prediction, and a Chrome trace in zb-sched's format.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_MEASURE_H
#define ZB_DRIVER_MEASURE_H

#include "zb/Dialect/ZB/StageTable.h"
#include "zb/Schedule/Export.h"

#include "zbrt/Comm.h"
#include "zbrt/Lending.h"
#include "zbrt/Trace.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace zb::run {

/// One rank's part of one step: records with times in seconds since the
/// rank passed the step's opening barrier, and the bytes compiled code held
/// at that barrier and at most during the step.
struct RankStep {
  std::vector<zbrt::ActionRecord> actions;
  int64_t baseBytes = 0;
  int64_t peakBytes = 0;
  /// Seconds from the rank's first-step barrier to this step's, on the
  /// rank's own clock (its actions stay in order in the trace).
  double offset = 0.0;
  /// Seconds the step waited at its end for its gradient reductions.
  double reductionWait = 0.0;
  /// The products that borrowed an idle rank's core (zbrt/Lending.h).
  zbrt::LendingCounts lending;
};

/// Byte strings for Comm::gather.
std::string serialize(const RankStep &step);
bool deserialize(const std::string &bytes, RankStep &step);

struct RunMeasurement {
  /// Measured bubble rate per step: (maxSpan - work) / maxSpan, the
  /// simulator's definition, with measured spans and busy times.
  std::vector<double> stepBubble;
  /// Mean of stepBubble over the steps after the first (warm-up), or the
  /// only step's.
  double bubble = 0.0;
  /// The simulator's bubble rate for the schedule that ran, with the
  /// measured mean times per stage and no transfer latency.
  double simulatedBubble = 0.0;
  /// Per stage, mean milliseconds of F, B and W (a fused BW is split in the
  /// ratio of the cost model's B and W).
  std::vector<double> timeF, timeB, timeW;
  /// Per rank: the most bytes compiled code held at the end of an action,
  /// beyond what it held when the step began (activations stashed between
  /// actions, received values, gradient sums), and the simulator's
  /// prediction of the stash from the stages' mem_b/mem_w.
  std::vector<int64_t> peakStash, predictedStash;
  /// Per rank: the bytes one microbatch stashes from F to B on its stages
  /// (their mem_b): 1F1B's busiest rank holds P of them, and so may every
  /// rank under ZB-H1.
  std::vector<int64_t> microbatchStash;
  /// Per rank: the bytes one microbatch stashes from B to W on its stages
  /// (their mem_w).
  std::vector<int64_t> microbatchWStash;
  /// Per rank: the most bytes compiled code held at any time in a step.
  std::vector<int64_t> peakMemory;
  /// Per rank, over the steps after the first: the products (or batches)
  /// that borrowed an idle rank's core, and the share of their row blocks
  /// (or items) the borrowed core ran.
  std::vector<int64_t> borrowedProducts;
  std::vector<double> borrowedShare;
  /// Data parallelism: the milliseconds per step the gradient reductions
  /// added at the end of the step (the longest wait of any process, mean
  /// over the steps after the first), and the simulator's figure for the
  /// schedule that ran with the measured stage times and reduction costs.
  double reductionWait = 0.0;
  double simulatedReduction = 0.0;
  /// Every step on one time line, for writeChromeTrace.
  zb::schedule::ScheduleReport trace;
};

/// `steps[k][r]` is rank r's part of step k (with replicas, process r's:
/// replica r / P's rank r % P). `layout` gives the ranks, chunks,
/// placement and microbatches, and, with replicas, the milliseconds each
/// stage's gradient bucket takes to reduce (stageCostReduce).
RunMeasurement measure(const std::vector<std::vector<RankStep>> &steps,
                       const zb::StageTable &table,
                       const zb::schedule::Problem &layout,
                       const std::string &scheduleName);

/// `{"stages": [{"stage": 0, "f": .., "b": .., "w": ..}, ...]}` in ms: what
/// `zb-schedule costs=` and `--zb-pipeline costs=` read.
std::string profileJson(const RunMeasurement &measurement);

/// With replicas: per stage, the milliseconds its gradient bucket takes to
/// average over the `numReplicas` replicas of a pipeline of `numRanks`
/// ranks with nothing else running (the reduction cost the simulator
/// takes), on `world`'s rank 0 (empty elsewhere); `rank` is this process's
/// pipeline rank. Each rank times the mean of all its stages' parameters
/// over its replicas, and a stage takes its share of its rank's time by
/// bytes.
std::vector<double> measureReductions(zbrt::Comm &world, int numRanks,
                                      int numReplicas, int rank,
                                      const zb::StageTable &table);

} // namespace zb::run

#endif // ZB_DRIVER_MEASURE_H
