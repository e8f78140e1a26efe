//===- PartitionStages.cpp - The --zb-partition-stages pass ---------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Partition.h"
#include "zb/Transforms/Passes.h"

#include "RegionStash.h"

#include "zb/Analysis/CostModel.h"
#include "zb/Dialect/Pipe/PipeOps.h"
#include "zb/Dialect/Sched/Profile.h"
#include "zb/Model/Model.h"
#include "zb/Schedule/Generators.h"
#include "zb/Schedule/Problem.h"
#include "zb/Schedule/Simulator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <limits>

namespace zb {
#define GEN_PASS_DEF_ZBPARTITIONSTAGES
#include "zb/Transforms/Passes.h.inc"
} // namespace zb

using namespace mlir;
using namespace zb;

/// The values `op` reads: operands and values used inside its regions.
static llvm::SetVector<Value> readsOf(Operation *op) {
  llvm::SetVector<Value> reads(op->operand_begin(), op->operand_end());
  if (op->getNumRegions())
    getUsedValuesDefinedAbove(op->getRegions(), reads);
  return reads;
}

namespace {
/// The model function's top-level ops and their dependencies.
struct OpGraph {
  /// Ops to place, in program order (no terminator, no constants).
  SmallVector<Operation *> ops;
  DenseMap<Operation *, unsigned> index;
  /// For each op, the indices of the placed ops it reads.
  SmallVector<SmallVector<unsigned>> deps;
  /// For each op, the last index using one of its results (ops.size() for
  /// the return).
  SmallVector<unsigned> lastUse;

  explicit OpGraph(Block &body) {
    for (Operation &op : body.without_terminator())
      if (!isRematerialisable(&op)) {
        index[&op] = ops.size();
        ops.push_back(&op);
      }
    deps.resize(ops.size());
    lastUse.assign(ops.size(), 0);
    for (auto [i, op] : llvm::enumerate(ops)) {
      lastUse[i] = i;
      for (Value v : readsOf(op))
        if (Operation *def = v.getDefiningOp())
          if (auto it = index.find(def); it != index.end())
            deps[i].push_back(it->second);
    }
    for (auto [i, d] : llvm::enumerate(deps))
      for (unsigned j : d)
        lastUse[j] = std::max<unsigned>(lastUse[j], i);
    for (Value v : body.getTerminator()->getOperands())
      if (Operation *def = v.getDefiningOp())
        if (auto it = index.find(def); it != index.end())
          lastUse[it->second] = ops.size();
  }
};
} // namespace

/// Stages from the cut markers: an op's stage is the number of markers it
/// depends on; ops that read only arguments and constants sink to their
/// first user's stage.
static FailureOr<SmallVector<int64_t>>
stagesFromCuts(const OpGraph &graph, func::FuncOp fn, int64_t numStages) {
  unsigned n = graph.ops.size();
  SmallVector<int64_t> stage(n, 0);
  SmallVector<bool> floating(n, true);
  int64_t numCuts = 0;
  for (unsigned i = 0; i < n; ++i) {
    for (unsigned j : graph.deps[i]) {
      int64_t s = stage[j] + (isa<pipe::CutOp>(graph.ops[j]) ? 1 : 0);
      if (floating[j] && !isa<pipe::CutOp>(graph.ops[j]))
        continue;
      floating[i] = false;
      stage[i] = std::max(stage[i], s);
    }
    if (isa<pipe::CutOp>(graph.ops[i])) {
      ++numCuts;
      floating[i] = false;
    }
  }
  if (numCuts != numStages - 1)
    return fn.emitError("found ")
           << numCuts << " pipe.cut markers, but " << numStages
           << " stages need " << numStages - 1;
  // Sink floating ops to their earliest user.
  for (unsigned i = n; i-- > 0;) {
    if (!floating[i])
      continue;
    int64_t first = numStages - 1;
    bool used = false;
    for (unsigned k = i + 1; k < n; ++k)
      if (llvm::is_contained(graph.deps[k], i)) {
        first = std::min(first, stage[k]);
        used = true;
      }
    stage[i] = used ? first : 0;
  }
  int64_t reached = 0;
  for (unsigned i = 0; i < n; ++i)
    reached =
        std::max(reached, stage[i] + (isa<pipe::CutOp>(graph.ops[i]) ? 1 : 0));
  if (reached != numStages - 1)
    return fn.emitError("the ")
           << numCuts << " pipe.cut markers do not form a chain of "
           << numStages << " stages (some markers are side by side)";
  return stage;
}

/// Where the cost model may cut: after op b when 1 to kMaxLive values are
/// live across (the activation and, inside a residual block, the residual
/// stream; inside an attention also its normalised input after one of the
/// query, key and value projections, which makes a cut a twelfth of a
/// transformer block finer; not a fan of intermediates), with the bytes
/// crossing each boundary and the bytes of parameters a cut there makes
/// shared.
struct CutPoints {
  static constexpr int64_t kMaxLive = 3;
  SmallVector<unsigned> cuts;
  SmallVector<int64_t> liveBytes, splitBytes;
};

static CutPoints findCutPoints(const OpGraph &graph, func::FuncOp fn) {
  unsigned n = graph.ops.size();
  CutPoints points;
  // Values live across the boundary after op b: defined at j <= b, last
  // used after b.
  SmallVector<int64_t> liveCount(n, 0);
  points.liveBytes.assign(n, 0);
  for (unsigned j = 0; j < n; ++j) {
    int64_t bytes = 0;
    for (Value r : graph.ops[j]->getResults())
      bytes += estimateBytes(r.getType());
    for (unsigned b = j; b < std::min<unsigned>(graph.lastUse[j], n); ++b) {
      liveCount[b] += graph.ops[j]->getNumResults();
      points.liveBytes[b] += bytes;
    }
  }
  // A cut between a parameter's first and last user makes it shared (each
  // side holds a copy and the step sums their gradients): allowed, as a
  // tied embedding must be, but its bytes count like transferred ones.
  points.splitBytes.assign(n, 0);
  for (BlockArgument arg : fn.getArguments()) {
    if (!fn.getArgAttr(arg.getArgNumber(), kParamAttr))
      continue;
    int64_t first = -1, last = -1;
    for (unsigned i = 0; i < n; ++i)
      if (readsOf(graph.ops[i]).contains(arg)) {
        if (first < 0)
          first = i;
        last = i;
      }
    for (int64_t b = first; b >= 0 && b < last; ++b)
      points.splitBytes[b] += estimateBytes(arg.getType());
  }
  for (unsigned b = 0; b + 1 < n; ++b)
    if (liveCount[b] >= 1 && liveCount[b] <= CutPoints::kMaxLive)
      points.cuts.push_back(b);
  return points;
}

/// The cost model's cost of each op: its FLOPs.
static SmallVector<double> flopsOf(const OpGraph &graph) {
  SmallVector<double> flops;
  for (Operation *op : graph.ops)
    flops.push_back(estimateFlops(op));
  return flops;
}

/// Stages from op costs (the cost model's FLOPs, or measured times): a
/// dynamic program over the valid cut points minimising the most expensive
/// stage, then the bytes transferred and the bytes of parameters the cuts
/// make shared.
static FailureOr<SmallVector<int64_t>> stagesFromCosts(const OpGraph &graph,
                                                       func::FuncOp fn,
                                                       int64_t numStages,
                                                       ArrayRef<double> cost) {
  unsigned n = graph.ops.size();
  if (n < static_cast<unsigned>(numStages))
    return fn.emitError("cannot cut ")
           << n << " ops into " << numStages << " stages";
  SmallVector<double> prefix(n + 1, 0);
  for (unsigned i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + cost[i];
  // Costs past a double's range (the FLOPs of tensors of absurd sizes)
  // leave every split alike; there is nothing to balance.
  if (!std::isfinite(prefix[n]))
    return fn.emitError("the ops' costs sum past a double's range; the "
                        "partition cannot balance them");
  CutPoints points = findCutPoints(graph, fn);
  ArrayRef<unsigned> cuts = points.cuts;
  ArrayRef<int64_t> liveBytes = points.liveBytes;
  ArrayRef<int64_t> splitBytes = points.splitBytes;
  if (cuts.size() < static_cast<size_t>(numStages - 1))
    return fn.emitError("only ")
           << cuts.size() << " points in '" << fn.getSymName()
           << "' have at most " << CutPoints::kMaxLive
           << " values live across them; " << numStages << " stages need "
           << numStages - 1 << " (place pipe.cut markers to choose the cuts)";

  // best[s][c]: stages 0..s with stage s ending at cut c (or at the end).
  using Score = std::pair<double, int64_t>;
  const Score inf = {std::numeric_limits<double>::infinity(), 0};
  unsigned numEnds = cuts.size() + 1;
  auto endOf = [&](unsigned c) { return c < cuts.size() ? cuts[c] : n - 1; };
  SmallVector<SmallVector<Score>> best(numStages,
                                       SmallVector<Score>(numEnds, inf));
  SmallVector<SmallVector<int>> from(numStages, SmallVector<int>(numEnds, -1));
  for (unsigned c = 0; c < numEnds; ++c)
    best[0][c] = {prefix[endOf(c) + 1], 0};
  for (int64_t s = 1; s < numStages; ++s)
    for (unsigned c = 0; c < numEnds; ++c)
      for (unsigned p = 0; p < c && p < cuts.size(); ++p) {
        if (best[s - 1][p].first == inf.first)
          continue;
        double stageCost = prefix[endOf(c) + 1] - prefix[cuts[p] + 1];
        Score score = {std::max(best[s - 1][p].first, stageCost),
                       best[s - 1][p].second + liveBytes[cuts[p]] +
                           splitBytes[cuts[p]]};
        if (score < best[s][c]) {
          best[s][c] = score;
          from[s][c] = p;
        }
      }
  SmallVector<int64_t> stage(n, 0);
  unsigned c = numEnds - 1;
  for (int64_t s = numStages - 1; s >= 0; --s) {
    unsigned begin = s == 0 ? 0 : cuts[from[s][c]] + 1;
    for (unsigned i = begin; i <= endOf(c); ++i)
      stage[i] = s;
    if (s > 0)
      c = from[s][c];
  }
  return stage;
}

/// Rewrites `fn` into the chain of stages `stageOf` assigns.
static LogicalResult materialise(func::FuncOp fn, const ModelSignature &sig,
                                 const OpGraph &graph,
                                 ArrayRef<int64_t> stageOf, int64_t numStages,
                                 ArrayRef<int64_t> rankOf) {
  Block &body = fn.front();
  Operation *ret = body.getTerminator();
  unsigned n = graph.ops.size();

  // Each value's defining stage and last stage of use.
  llvm::MapVector<Value, std::pair<int64_t, int64_t>> span;
  for (unsigned i = 0; i < n; ++i)
    for (Value r : graph.ops[i]->getResults())
      span[r] = {stageOf[i], stageOf[i]};
  SmallVector<llvm::SetVector<Value>> argsOfStage(numStages);
  for (unsigned i = 0; i < n; ++i)
    for (Value v : readsOf(graph.ops[i])) {
      if (auto it = span.find(v); it != span.end())
        it->second.second = std::max(it->second.second, stageOf[i]);
      else if (isa<BlockArgument>(v) && v.getParentBlock() == &body)
        argsOfStage[stageOf[i]].insert(v);
    }
  for (Value v : ret->getOperands()) {
    auto it = span.find(v);
    if (it == span.end())
      return fn.emitError("the loss must be computed by the model, not be "
                          "an argument or constant");
    it->second.second = numStages;
  }

  // A parameter used by several stages (a tied weight) is a parameter of
  // each: every stage holds a copy, and the schedule sums the copies'
  // gradients over the ranks that hold them (sched.allreduce). One that no
  // operation reads is a parameter of the first stage, as the whole model
  // on one process holds it: its gradient is zero, and the rank that holds
  // it trains, writes and restores it.
  for (BlockArgument arg : body.getArguments())
    if (sig.args[arg.getArgNumber()].isParam() &&
        llvm::none_of(argsOfStage, [&](const llvm::SetVector<Value> &args) {
          return args.contains(arg);
        }))
      argsOfStage.front().insert(arg);

  // crossing[b]: values defined up to stage b and used after it.
  SmallVector<SmallVector<Value>> crossing(numStages);
  for (auto &[v, range] : span)
    for (int64_t b = range.first; b < range.second && b < numStages; ++b)
      crossing[b].push_back(v);

  OpBuilder b(ret);
  DenseMap<Value, Value> current; // original value -> value outside stages
  SmallVector<SmallVector<Operation *>> opsOfStage(numStages);
  for (unsigned i = 0; i < n; ++i)
    opsOfStage[stageOf[i]].push_back(graph.ops[i]);
  Value loss;
  for (int64_t s = 0; s < numStages; ++s) {
    SmallVector<Value> inputs = s ? crossing[s - 1] : SmallVector<Value>();
    SmallVector<Value> data, params;
    for (Value v : argsOfStage[s])
      (sig.args[cast<BlockArgument>(v).getArgNumber()].isParam() ? params
                                                                 : data)
          .push_back(v);
    SmallVector<Value> outputs = s + 1 < numStages
                                     ? crossing[s]
                                     : SmallVector<Value>(ret->getOperands());
    SmallVector<Value> inputOperands;
    for (Value v : inputs)
      inputOperands.push_back(current.lookup(v));
    auto stage =
        pipe::StageOp::create(b, fn.getLoc(), ValueRange(outputs).getTypes(),
                              inputOperands, data, params, s, rankOf[s]);
    Block *block = new Block();
    stage.getForward().push_back(block);
    IRMapping mapping;
    for (Value v : llvm::concat<Value>(inputs, data, params))
      mapping.map(v, block->addArgument(v.getType(), v.getLoc()));
    OpBuilder inner = OpBuilder::atBlockEnd(block);
    for (Operation *op : opsOfStage[s]) {
      for (Value v : readsOf(op))
        if (Operation *def = v.getDefiningOp(); def && isRematerialisable(def))
          rematerialise(inner, v, mapping);
      if (auto cut = dyn_cast<pipe::CutOp>(op)) {
        mapping.map(cut.getResult(), mapping.lookup(cut.getInput()));
        continue;
      }
      inner.clone(*op, mapping);
    }
    SmallVector<Value> yielded;
    for (Value v : outputs)
      yielded.push_back(mapping.lookup(v));
    pipe::YieldOp::create(inner, fn.getLoc(), yielded, ValueRange());
    for (auto [v, r] : llvm::zip(outputs, stage.getResults()))
      current[v] = r;
    if (s + 1 == numStages)
      loss = stage.getResult(0);
  }
  ret->setOperand(0, loss);
  for (Operation *op : llvm::reverse(graph.ops))
    op->erase();
  SmallVector<Operation *> unused;
  for (Operation &op : body.without_terminator())
    if (isRematerialisable(&op) && op.use_empty())
      unused.push_back(&op);
  for (Operation *op : unused)
    op->erase();
  return success();
}

/// Replaces each marker by its operand.
static void dropCuts(SmallVectorImpl<pipe::CutOp> &cuts) {
  for (pipe::CutOp cut : cuts) {
    cut.getResult().replaceAllUsesWith(cut.getInput());
    cut.erase();
  }
  cuts.clear();
}

namespace {
/// What a partition is planned for: the schedule that will run it.
struct SchedulePlan {
  /// Empty: no schedule given (the dynamic program's stages stand).
  std::string name;
  int64_t ranks = 1, chunks = 1, microbatches = 1;
  schedule::Placement placement = schedule::Placement::Loop;
};
} // namespace

/// The stages of `stageOf` with their cuts moved, one cut point at a time,
/// while the schedule of `plan` ends sooner in the simulator on the ops'
/// times `opF`/`opB`/`opW` (the stage times the schedule will plan with).
/// The dynamic program evens out each stage's total; what the schedule
/// then makes of the stages also depends on where their F, B and W lie
/// (the first stage's F delays every other rank, a stage without B waits
/// differently), which only the schedule itself measures.
static void refineForSchedule(const OpGraph &graph, func::FuncOp fn,
                              const SchedulePlan &plan, ArrayRef<double> opF,
                              ArrayRef<double> opB, ArrayRef<double> opW,
                              SmallVectorImpl<int64_t> &stageOf) {
  int64_t total = plan.ranks * plan.chunks;
  if (plan.name.empty() || total < 2)
    return;
  unsigned n = graph.ops.size();
  SmallVector<unsigned> cuts = findCutPoints(graph, fn).cuts;
  // at[s]: the index in `cuts` of the cut after stage s (s < total - 1).
  SmallVector<size_t> at;
  for (unsigned i = 0; i + 1 < n; ++i)
    if (stageOf[i] != stageOf[i + 1]) {
      const unsigned *found = llvm::find(cuts, i);
      if (found == cuts.end())
        return;
      at.push_back(found - cuts.begin());
    }
  if (static_cast<int64_t>(at.size()) != total - 1)
    return;
  SmallVector<double> prefixF(n + 1, 0.0), prefixB(n + 1, 0.0),
      prefixW(n + 1, 0.0);
  for (unsigned i = 0; i < n; ++i) {
    prefixF[i + 1] = prefixF[i] + opF[i];
    prefixB[i + 1] = prefixB[i] + opB[i];
    prefixW[i + 1] = prefixW[i] + opW[i];
  }
  const double inf = std::numeric_limits<double>::infinity();
  auto makespan = [&](ArrayRef<size_t> cutAt) {
    schedule::Problem problem;
    problem.numRanks = static_cast<int>(plan.ranks);
    problem.numChunks = static_cast<int>(plan.chunks);
    problem.numMicrobatches = static_cast<int>(plan.microbatches);
    problem.placement = plan.placement;
    for (int64_t s = 0; s < total; ++s) {
      unsigned begin = s == 0 ? 0 : cuts[cutAt[s - 1]] + 1;
      unsigned end = s + 1 == total ? n : cuts[cutAt[s]] + 1;
      problem.stageCostF.push_back(prefixF[end] - prefixF[begin]);
      problem.stageCostB.push_back(prefixB[end] - prefixB[begin]);
      problem.stageCostW.push_back(prefixW[end] - prefixW[begin]);
    }
    std::string error;
    if (!problem.verify(error))
      return inf;
    schedule::Result<schedule::Schedule> planned =
        schedule::generateSchedule(plan.name, problem);
    if (!planned.ok())
      return inf;
    schedule::Result<schedule::SimulationResult> simulated =
        schedule::simulate(problem, *planned, /*timeline=*/false);
    return simulated.ok() ? simulated->makespan : inf;
  };
  double best = makespan(at);
  if (best == inf)
    return;
  // Steepest descent: the best single move of one cut to a neighbouring
  // cut point, while it gains more than rounding, within a bounded number
  // of simulations (each a few milliseconds at P = 8, M = 64).
  constexpr int kMaxSimulations = 512;
  int simulations = 1;
  while (simulations + 2 * static_cast<int>(at.size()) <= kMaxSimulations) {
    SmallVector<size_t> bestAt;
    double bestTime = best * (1.0 - 1e-9);
    for (size_t c = 0; c < at.size(); ++c)
      for (int step : {-1, 1}) {
        if ((step < 0 && at[c] == 0) ||
            (step < 0 && c > 0 && at[c] - 1 == at[c - 1]) ||
            (step > 0 && at[c] + 1 == cuts.size()) ||
            (step > 0 && c + 1 < at.size() && at[c] + 1 == at[c + 1]))
          continue;
        SmallVector<size_t> moved = at;
        moved[c] += step;
        double time = makespan(moved);
        ++simulations;
        if (time < bestTime) {
          bestTime = time;
          bestAt = moved;
        }
      }
    if (bestAt.empty())
      break;
    at = bestAt;
    best = bestTime;
  }
  for (unsigned i = 0, s = 0; i < n; ++i) {
    stageOf[i] = s;
    if (s < at.size() && i == cuts[at[s]])
      ++s;
  }
}

/// The partition of `fn` into `total` stages from the measured times in the
/// profile at `path` of its partition into N stages (see the pass's
/// description); records each stage's share of the times on it.
static LogicalResult partitionByProfile(func::FuncOp fn,
                                        const ModelSignature &sig,
                                        SmallVectorImpl<pipe::CutOp> &cuts,
                                        StringRef path, int64_t total,
                                        ArrayRef<int64_t> rankOf,
                                        const SchedulePlan &plan) {
  sched::StageProfile measured;
  if (std::optional<std::string> error =
          sched::readProfile(path, /*numStages=*/-1, measured))
    return fn.emitError("profile '") << path << "': " << *error;
  auto profiled = static_cast<int64_t>(measured.f.size());
  if (profiled < 1)
    return fn.emitError("profile '") << path << "' lists no stage";
  // The partition that was profiled: markers if they made its stages, else
  // the cost model (the rule of a run with that many stages).
  if (!cuts.empty() && static_cast<int64_t>(cuts.size()) + 1 != profiled)
    dropCuts(cuts);
  OpGraph graph(fn.front());
  SmallVector<double> flops = flopsOf(graph);
  FailureOr<SmallVector<int64_t>> fine =
      cuts.empty() ? stagesFromCosts(graph, fn, profiled, flops)
                   : stagesFromCuts(graph, fn, profiled);
  if (failed(fine))
    return fn.emitError("cannot redo the ")
           << profiled << "-stage partition that profile '" << path
           << "' measured";
  // Each op's share of its profiled stage: by FLOPs, or evenly in a stage
  // without any.
  unsigned n = graph.ops.size();
  SmallVector<double> stageFlops(profiled, 0.0), stageOps(profiled, 0.0);
  for (unsigned i = 0; i < n; ++i) {
    stageFlops[(*fine)[i]] += flops[i];
    stageOps[(*fine)[i]] += 1;
  }
  SmallVector<double> opF(n), opB(n), opW(n), cost(n);
  for (unsigned i = 0; i < n; ++i) {
    int64_t s = (*fine)[i];
    double share =
        stageFlops[s] > 0 ? flops[i] / stageFlops[s] : 1.0 / stageOps[s];
    opF[i] = share * measured.f[s];
    opB[i] = share * measured.b[s];
    opW[i] = share * measured.w[s];
    cost[i] = opF[i] + opB[i] + opW[i];
  }
  FailureOr<SmallVector<int64_t>> stageOf =
      stagesFromCosts(graph, fn, total, cost);
  if (failed(stageOf))
    return failure();
  refineForSchedule(graph, fn, plan, opF, opB, opW, *stageOf);
  if (failed(materialise(fn, sig, graph, *stageOf, total, rankOf)))
    return failure();
  SmallVector<double> timeF(total, 0.0), timeB(total, 0.0), timeW(total, 0.0);
  for (unsigned i = 0; i < n; ++i) {
    int64_t t = (*stageOf)[i];
    timeF[t] += opF[i];
    timeB[t] += opB[i];
    timeW[t] += opW[i];
  }
  Builder b(fn.getContext());
  for (pipe::StageOp stage : fn.getOps<pipe::StageOp>()) {
    int64_t t = stage.getStage();
    stage.setTimeFAttr(b.getF64FloatAttr(timeF[t]));
    stage.setTimeBAttr(b.getF64FloatAttr(timeB[t]));
    stage.setTimeWAttr(b.getF64FloatAttr(timeW[t]));
  }
  return success();
}

int64_t zb::maxCostModelStages(func::FuncOp fn) {
  func::FuncOp copy = fn.clone();
  SmallVector<pipe::CutOp> cuts(copy.getOps<pipe::CutOp>());
  dropCuts(cuts);
  int64_t stages = 1;
  {
    OpGraph graph(copy.front());
    stages = std::min<int64_t>(findCutPoints(graph, copy).cuts.size() + 1,
                               graph.ops.size());
  }
  copy.erase();
  return stages;
}

namespace {
struct PartitionStagesPass
    : zb::impl::ZBPartitionStagesBase<PartitionStagesPass> {
  using ZBPartitionStagesBase::ZBPartitionStagesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (numStages < 1 || numChunks < 1) {
      module.emitError("--zb-partition-stages: 'stages' and 'chunks' must "
                       "be at least 1");
      return signalPassFailure();
    }
    schedule::Placement place;
    if (!schedule::parsePlacement(placement, place)) {
      module.emitError("--zb-partition-stages: unknown placement '")
          << placement << "' (expected loop or v)";
      return signalPassFailure();
    }
    if (place == schedule::Placement::V && numChunks != 2) {
      module.emitError("--zb-partition-stages: placement v needs chunks=2");
      return signalPassFailure();
    }
    FailureOr<ModelSignature> sig = analyzeModel(module);
    if (failed(sig))
      return signalPassFailure();
    func::FuncOp fn = sig->func;
    if (!fn.getOps<pipe::StageOp>().empty()) {
      fn.emitError("'") << fn.getSymName() << "' is already partitioned";
      return signalPassFailure();
    }
    // Every stage holds an op: a count past the function's ops is refused
    // before anything is sized by it.
    int64_t total = 0;
    int64_t ops = cuttableOps(fn);
    if (llvm::MulOverflow<int64_t>(numStages, numChunks, total) ||
        total > ops) {
      fn.emitError("cannot cut ")
          << ops << " ops into " << static_cast<int64_t>(numStages) << " x "
          << static_cast<int64_t>(numChunks) << " stages";
      return signalPassFailure();
    }
    SmallVector<int64_t> rankOf;
    for (int64_t s = 0; s < total; ++s)
      rankOf.push_back(schedule::rankOfStage(s, numStages, place));

    SmallVector<pipe::CutOp> cuts(fn.getOps<pipe::CutOp>());
    if (!profile.empty()) {
      SchedulePlan plan;
      if (!scheduleName.empty()) {
        if (!schedule::lookupSchedule(scheduleName)) {
          module.emitError("--zb-partition-stages: unknown schedule '")
              << scheduleName << "'; known: " << schedule::knownScheduleNames();
          return signalPassFailure();
        }
        if (numMicrobatches < 1) {
          module.emitError("--zb-partition-stages: 'microbatches' must be "
                           "at least 1");
          return signalPassFailure();
        }
        plan = {scheduleName, numStages, numChunks, numMicrobatches, place};
      }
      if (failed(
              partitionByProfile(fn, *sig, cuts, profile, total, rankOf, plan)))
        return signalPassFailure();
      return;
    }
    if (ignoreMismatchedCuts && !cuts.empty() &&
        static_cast<int64_t>(cuts.size()) + 1 != total) {
      // One stage takes no cut: nothing to warn about.
      if (total > 1)
        fn.emitWarning() << cuts.size() << " pipe.cut markers do not make "
                         << total << " stages; partitioning by the cost model";
      dropCuts(cuts);
    }
    OpGraph graph(fn.front());
    bool hasCuts = !cuts.empty();
    FailureOr<SmallVector<int64_t>> stageOf =
        hasCuts ? stagesFromCuts(graph, fn, total)
                : stagesFromCosts(graph, fn, total, flopsOf(graph));
    if (failed(stageOf) ||
        failed(materialise(fn, *sig, graph, *stageOf, total, rankOf)))
      return signalPassFailure();
  }
};
} // namespace
