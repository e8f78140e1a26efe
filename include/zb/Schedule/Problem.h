//===- Problem.h - Pipeline scheduling problem model -------------*- C++
//-*-===//
//
// A pipeline-parallel scheduling problem: p ranks, m microbatches, v chunks
// per rank (p*v stages), a stage-to-rank placement, per-stage costs of the
// F (forward), B (input gradient) and W (weight gradient) phases, the cost of
// one cross-rank transfer, activation memory and a memory limit.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_PROBLEM_H
#define ZB_SCHEDULE_PROBLEM_H

#include <string>
#include <vector>

namespace zb::schedule {

/// How the p*v stages are placed on the p ranks.
enum class Placement {
  /// Interleaved: stage s runs on rank s % p (Megatron's virtual stages).
  Loop,
  /// V-shape: chunk c of rank r is stage c*p + r for even c and
  /// c*p + (p-1-r) for odd c; with v = 2 rank r holds stages r and 2p-1-r.
  V,
};

/// Returns "loop" or "v".
const char *placementName(Placement placement);
/// Parses "loop" or "v"; returns false for anything else.
bool parsePlacement(const std::string &text, Placement &placement);

/// The rank that runs `stage` of a pipeline of `numRanks` ranks placed by
/// `placement`: the one definition of the placement, shared by the schedule
/// library and --zb-partition-stages.
int rankOfStage(int stage, int numRanks, Placement placement);

/// The problem a schedule is made for. Built from plain values; call verify()
/// before use.
///
/// Costs are given per rank per microbatch (one rank's share of the model);
/// a stage (chunk) costs 1/v of them. Per-stage cost lists, when non-empty,
/// override the scalars and give each stage's cost directly (one entry per
/// stage, p*v entries). Memory is per rank per microbatch as well: F
/// allocates memB/v, B turns it into memW/v (frees F's activations and holds
/// what W needs: less than memB when W needs a part of them, more when it
/// also needs the output gradients B computes), W frees memW/v.
struct Problem {
  int numRanks = 1;
  int numMicrobatches = 1;
  int numChunks = 1;
  Placement placement = Placement::Loop;

  double costF = 1.0;
  double costB = 1.0;
  double costW = 1.0;
  std::vector<double> stageCostF;
  std::vector<double> stageCostB;
  std::vector<double> stageCostW;
  /// Latency added to every dependency between stages on different ranks.
  double costComm = 0.0;
  /// Data parallelism: the time to average each stage's gradients over its
  /// replicas, one bucket per stage. A bucket starts when its stage's last
  /// W (or BW) ends; a rank's buckets run one after another on its link,
  /// beside its remaining compute; the step ends when the last one does.
  /// Empty: one replica, nothing to reduce.
  std::vector<double> stageCostReduce;

  double memB = 1.0;
  double memW = 0.0;
  /// Peak activation memory allowed on any rank; 0 means no limit.
  double memLimit = 0.0;

  int numStages() const { return numRanks * numChunks; }
  /// The rank that runs `stage`.
  int rankOfStage(int stage) const;
  /// The chunk index of `stage` on its rank (0 .. v-1).
  int chunkOfStage(int stage) const { return stage / numRanks; }
  /// The stages of `rank`, in increasing stage (= chunk) order.
  std::vector<int> stagesOfRank(int rank) const;

  double forwardCost(int stage) const;
  double backwardInputCost(int stage) const;
  double backwardWeightCost(int stage) const;
  /// Transfer latency between two stages (0 when they share a rank).
  double commCost(int fromStage, int toStage) const;
  /// Activation memory one microbatch holds on a stage from F until B.
  double stageMemB() const { return memB / numChunks; }
  /// Memory one microbatch holds on a stage from B until W.
  double stageMemW() const { return memW / numChunks; }
  /// Sum of all costs of the actions `rank` runs (F+B+W of all its stages
  /// over all microbatches).
  double rankWork(int rank) const;
  /// The largest rankWork over all ranks.
  double maxRankWork() const;

  /// Checks the values; on failure returns false and a one-line message.
  bool verify(std::string &error) const;
  /// The part of verify() that checks the counts (ranks, chunks,
  /// microbatches) alone: what must hold before anything is sized by them.
  bool verifyCounts(std::string &error) const;
};

/// What is wrong with `limit` as a memory limit (mem-limit: finite, 0 for
/// none, or more), naming the value; empty when nothing is. Problem::verify
/// and the pipeline's options check it alike.
std::string memLimitProblem(double limit);

/// The largest counts a problem may have (verifyCounts()).
constexpr int kMaxRanks = 4096;
constexpr int kMaxMicrobatches = 1000000;
constexpr int kMaxChunks = 64;

/// Sets `problem.memB` / `memW` from per-stage activation bytes (what one
/// microbatch holds from F to B, and from B to W, on each stage): the
/// library holds memory per rank, so this takes the busiest rank's sums.
/// `stageRanks[s]` is the rank of stage s.
void setStageMemory(Problem &problem, const std::vector<int> &stageRanks,
                    const std::vector<double> &stageMemB,
                    const std::vector<double> &stageMemW);

} // namespace zb::schedule

#endif // ZB_SCHEDULE_PROBLEM_H
