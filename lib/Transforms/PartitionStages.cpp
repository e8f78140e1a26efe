//===- PartitionStages.cpp - The --zb-partition-stages pass ---------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Transforms/Passes.h"

#include "RegionStash.h"

#include "zb/Analysis/CostModel.h"
#include "zb/Dialect/Pipe/PipeOps.h"
#include "zb/Model/Model.h"
#include "zb/Schedule/Problem.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

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
static FailureOr<SmallVector<int64_t>> stagesFromCuts(const OpGraph &graph,
                                                      func::FuncOp fn,
                                                      int64_t numStages) {
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
    reached = std::max(reached, stage[i] +
                                    (isa<pipe::CutOp>(graph.ops[i]) ? 1 : 0));
  if (reached != numStages - 1)
    return fn.emitError("the ")
           << numCuts << " pipe.cut markers do not form a chain of "
           << numStages << " stages (some markers are side by side)";
  return stage;
}

/// Stages from the cost model: a dynamic program over the valid cut points
/// minimising the most expensive stage, then the bytes transferred and the
/// bytes of parameters the cuts make shared.
static FailureOr<SmallVector<int64_t>> stagesFromCosts(const OpGraph &graph,
                                                       func::FuncOp fn,
                                                       int64_t numStages) {
  unsigned n = graph.ops.size();
  if (n < static_cast<unsigned>(numStages))
    return fn.emitError("cannot cut ")
           << n << " ops into " << numStages << " stages";
  SmallVector<double> prefix(n + 1, 0);
  for (unsigned i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + estimateFlops(graph.ops[i]);
  // Values live across the boundary after op b: defined at j <= b, last
  // used after b.
  SmallVector<int64_t> liveCount(n, 0), liveBytes(n, 0);
  for (unsigned j = 0; j < n; ++j) {
    int64_t bytes = 0;
    for (Value r : graph.ops[j]->getResults())
      bytes += estimateBytes(r.getType());
    for (unsigned b = j; b < std::min<unsigned>(graph.lastUse[j], n); ++b) {
      liveCount[b] += graph.ops[j]->getNumResults();
      liveBytes[b] += bytes;
    }
  }
  // A valid cut point has at most kMaxLive values crossing it: the
  // activation (and, inside a residual block, the residual stream), not a
  // fan of intermediates.
  constexpr int64_t kMaxLive = 2;
  // A cut between a parameter's first and last user makes it shared (each
  // side holds a copy and the step sums their gradients): allowed, as a
  // tied embedding must be, but its bytes count like transferred ones.
  SmallVector<int64_t> splitBytes(n, 0);
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
      splitBytes[b] += estimateBytes(arg.getType());
  }
  SmallVector<unsigned> cuts;
  for (unsigned b = 0; b + 1 < n; ++b)
    if (liveCount[b] >= 1 && liveCount[b] <= kMaxLive)
      cuts.push_back(b);
  if (cuts.size() < static_cast<size_t>(numStages - 1))
    return fn.emitError("only ")
           << cuts.size() << " points in '" << fn.getSymName()
           << "' have at most " << kMaxLive << " values live across them; "
           << numStages << " stages need " << numStages - 1
           << " (place pipe.cut markers to choose the cuts)";

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
        double cost = prefix[endOf(c) + 1] - prefix[cuts[p] + 1];
        Score score = {std::max(best[s - 1][p].first, cost),
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
  // gradients over the ranks that hold them (sched.allreduce).

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
    SmallVector<Value> outputs =
        s + 1 < numStages ? crossing[s] : SmallVector<Value>(ret->getOperands());
    SmallVector<Value> inputOperands;
    for (Value v : inputs)
      inputOperands.push_back(current.lookup(v));
    auto stage = pipe::StageOp::create(
        b, fn.getLoc(), ValueRange(outputs).getTypes(), inputOperands, data,
        params, s, rankOf[s]);
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
    int64_t total = numStages * numChunks;
    SmallVector<int64_t> rankOf;
    for (int64_t s = 0; s < total; ++s)
      rankOf.push_back(schedule::rankOfStage(s, numStages, place));

    SmallVector<pipe::CutOp> cuts(fn.getOps<pipe::CutOp>());
    if (ignoreMismatchedCuts && !cuts.empty() &&
        static_cast<int64_t>(cuts.size()) + 1 != total) {
      // One stage takes no cut: nothing to warn about.
      if (total > 1)
        fn.emitWarning() << cuts.size() << " pipe.cut markers do not make "
                         << total << " stages; partitioning by the cost model";
      for (pipe::CutOp cut : cuts) {
        cut.getResult().replaceAllUsesWith(cut.getInput());
        cut.erase();
      }
      cuts.clear();
    }
    OpGraph graph(fn.front());
    bool hasCuts = !cuts.empty();
    FailureOr<SmallVector<int64_t>> stageOf =
        hasCuts ? stagesFromCuts(graph, fn, total)
                : stagesFromCosts(graph, fn, total);
    if (failed(stageOf) ||
        failed(materialise(fn, *sig, graph, *stageOf, total, rankOf)))
      return signalPassFailure();
  }
};
} // namespace
