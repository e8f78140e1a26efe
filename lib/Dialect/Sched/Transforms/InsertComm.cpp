//===- InsertComm.cpp - Insert the sends and recvs of sched programs ------===//
//
// Part of ZeroBubble MLIR.
//
// --zb-insert-comm: hands each transfer-free sched.program to the schedule
// library's insertCommunication and rewrites its ranks with the result, then
// adds the reductions of the parameters shared between ranks.
//
//===----------------------------------------------------------------------===//

#include "zb/Dialect/Sched/Transforms/Passes.h"

#include "zb/Dialect/Sched/SchedOps.h"
#include "zb/Dialect/Sched/ScheduleInterop.h"
#include "zb/Schedule/Communication.h"
#include "zb/Schedule/Validator.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <map>
#include <set>
#include <vector>

namespace zb::sched {
#define GEN_PASS_DEF_ZBINSERTCOMM
#include "zb/Dialect/Sched/Transforms/Passes.h.inc"
} // namespace zb::sched

using namespace mlir;
using namespace zb::sched;
namespace zs = zb::schedule;

/// The stage-to-rank map of `program`: its `stage_ranks`, or where its
/// compute ops are.
static FailureOr<std::vector<int>> stageRanksOf(ProgramOp program) {
  int64_t numStages = program.getNumStages();
  if (std::optional<ArrayRef<int64_t>> attr = program.getStageRanks())
    return std::vector<int>(attr->begin(), attr->end());
  std::vector<int> stageRanks(numStages, -1);
  std::vector<Operation *> firstOp(numStages, nullptr);
  for (auto [rank, region] : llvm::enumerate(program.getRanks())) {
    for (ComputeOp compute : region.front().getOps<ComputeOp>()) {
      int64_t stage = compute.getStage();
      if (stageRanks[stage] < 0) {
        stageRanks[stage] = static_cast<int>(rank);
        firstOp[stage] = compute;
      } else if (stageRanks[stage] != static_cast<int>(rank)) {
        InFlightDiagnostic diag = compute.emitOpError()
                                  << "runs stage " << stage << " on rank "
                                  << rank << ", but stage " << stage
                                  << " also runs on rank " << stageRanks[stage];
        diag.attachNote(firstOp[stage]->getLoc()) << "first action here";
        return diag;
      }
    }
  }
  for (int64_t stage = 0; stage < numStages; ++stage)
    if (stageRanks[stage] < 0)
      return program.emitOpError() << "cannot insert transfers: stage " << stage
                                   << " has no compute actions";
  return stageRanks;
}

static LogicalResult insertTransfers(ProgramOp program, bool inOrderLinks) {
  auto isTransfer = [](Operation &op) { return isa<SendOp, RecvOp>(op); };
  for (Region &region : program.getRanks())
    if (llvm::any_of(region.front(), isTransfer))
      return success();

  FailureOr<std::vector<int>> stageRanks = stageRanksOf(program);
  if (failed(stageRanks))
    return failure();
  int numRanks = static_cast<int>(program.getNumRanks());
  zs::PlacementFit fit = zs::inferPlacement(*stageRanks, numRanks);
  if (!fit.ok)
    return program.emitOpError() << "cannot insert transfers: " << fit.message;

  zs::Problem problem;
  problem.numRanks = numRanks;
  problem.numChunks = fit.numChunks;
  problem.placement = fit.placement;
  problem.numMicrobatches = static_cast<int>(program.getNumMicrobatches());

  // The library's schedule, and for each rank its compute ops in order and
  // the optimizer actions that follow each of them (groups[0]: before the
  // first).
  zs::Schedule schedule;
  schedule.name = program.getSchedule().value_or("").str();
  schedule.forwardOnly = program.getForwardOnly();
  SmallVector<SmallVector<ComputeOp>> computes;
  SmallVector<SmallVector<SmallVector<Operation *>>> groups;
  for (Region &region : program.getRanks()) {
    std::vector<zs::Action> &actions = schedule.ranks.emplace_back();
    SmallVector<ComputeOp> &rankComputes = computes.emplace_back();
    SmallVector<SmallVector<Operation *>> &rankGroups = groups.emplace_back();
    rankGroups.emplace_back();
    for (ComputeOp compute : region.front().getOps<ComputeOp>()) {
      if (compute.getPhase() == Phase::Optimizer) {
        rankGroups.back().push_back(compute);
        continue;
      }
      actions.push_back({toActionKind(compute.getPhase()),
                         static_cast<int>(compute.getStage()),
                         static_cast<int>(*compute.getMicrobatch())});
      rankComputes.push_back(compute);
      rankGroups.emplace_back();
    }
  }

  // Only a complete, ordered, deadlock-free schedule gets transfers.
  std::vector<zs::Diagnostic> diagnostics = zs::validate(problem, schedule);
  if (!diagnostics.empty()) {
    const zs::Diagnostic &first = diagnostics.front();
    Operation *blame = program;
    if (first.rank >= 0 && first.rank < numRanks && first.index >= 0 &&
        first.index < static_cast<int>(computes[first.rank].size()))
      blame = computes[first.rank][first.index];
    return blame->emitOpError() << "cannot insert transfers: " << first.message;
  }
  zs::Result<zs::CommProgram> comm = zs::insertCommunication(
      problem, schedule,
      inOrderLinks ? zs::RecvOrder::PerLink : zs::RecvOrder::PerChannel);
  if (!comm)
    return program.emitOpError() << "cannot insert transfers: " << comm.error();
  if (inOrderLinks) {
    // Receiving whole links in send order can add waits the schedule did
    // not have; the validator checked the per-channel order only.
    if (std::optional<zs::Deadlock> deadlock = zs::checkDeadlock(*comm))
      return program.emitOpError()
             << "cannot insert transfers for a transport that matches them "
                "per link in order (NCCL): receiving each link in its send "
                "order deadlocks: "
             << deadlock->cycleText << "; use another schedule, or MPI";
    if (std::optional<std::string> misorder = zs::checkLinkOrder(*comm))
      return program.emitOpError()
             << "internal error: a link is received out of its send order: "
             << *misorder;
  }

  // Rebuild each rank in place: move the existing compute (and optimizer)
  // ops to the end in the new order, creating the transfers between them.
  OpBuilder builder(program.getContext());
  for (auto [rank, region] : llvm::enumerate(program.getRanks())) {
    Block &block = region.front();
    auto moveToEnd = [&](Operation *op) {
      op->moveBefore(&block, block.end());
    };
    for (Operation *op : groups[rank][0])
      moveToEnd(op);
    // The optimizer actions after compute `next - 1` go after its send.
    size_t next = 0;
    auto flushOptimizers = [&] {
      if (next == 0)
        return;
      for (Operation *optimizer : groups[rank][next])
        moveToEnd(optimizer);
      groups[rank][next].clear();
    };
    for (const zs::CommOp &op : comm->ranks[rank]) {
      if (op.kind != zs::CommOpKind::Send)
        flushOptimizers();
      if (op.kind == zs::CommOpKind::Compute) {
        moveToEnd(computes[rank][next++]);
        continue;
      }
      // A transfer takes the location of the compute op it serves: the
      // producer for a send, the consumer for a recv.
      Location loc = op.kind == zs::CommOpKind::Send
                         ? computes[rank][next - 1].getLoc()
                         : computes[rank][next].getLoc();
      builder.setInsertionPointToEnd(&block);
      Phase phase = toPhase(op.action.kind);
      if (op.kind == zs::CommOpKind::Send)
        SendOp::create(builder, loc, phase, op.action.stage,
                       op.action.microbatch, op.peer, op.channel, op.seq);
      else
        RecvOp::create(builder, loc, phase, op.action.stage,
                       op.action.microbatch, op.peer, op.channel, op.seq);
    }
    flushOptimizers();
  }
  if (!program.getStageRanks()) {
    SmallVector<int64_t> ranks(stageRanks->begin(), stageRanks->end());
    program.setStageRanks(ranks);
  }
  return success();
}

/// Adds the reductions of the program's parameters (`param_stages`): on
/// each rank, one `sched.allreduce` per bucket, after the last W (or BW)
/// of the rank's stages that use the bucket's parameters, and after the
/// sends that directly follow it, so that the reduction overlaps the rank's
/// remaining work. A bucket is a group of holder ranks (the shared
/// parameters it holds) or, for a parameter on one rank (a program with
/// replicas), the rank and the stages that use it; reductions are then
/// numbered per group in program order.
static void insertReductions(ProgramOp program) {
  std::optional<DictionaryAttr> listed = program.getParamStages();
  std::optional<ArrayRef<int64_t>> stageRanks = program.getStageRanks();
  if (!listed || !stageRanks)
    return;
  for (Region &region : program.getRanks())
    if (!region.front().getOps<AllReduceOp>().empty())
      return;
  using Bucket = std::pair<std::vector<int64_t>, std::set<int64_t>>;
  std::map<Bucket, SmallVector<Attribute>> buckets;
  for (NamedAttribute entry : *listed) {
    auto users = cast<DenseI64ArrayAttr>(entry.getValue()).asArrayRef();
    std::set<int64_t> holders, stages(users.begin(), users.end());
    for (int64_t s : users)
      holders.insert((*stageRanks)[s]);
    Bucket key{std::vector<int64_t>(holders.begin(), holders.end()), {}};
    if (holders.size() == 1)
      key.second = stages;
    buckets[key].push_back(entry.getName());
  }
  OpBuilder builder(program.getContext());
  for (auto &[key, names] : buckets) {
    const std::vector<int64_t> &group = key.first;
    std::set<int64_t> stages;
    for (Attribute name : names)
      for (int64_t s :
           cast<DenseI64ArrayAttr>(listed->get(cast<StringAttr>(name)))
               .asArrayRef())
        stages.insert(s);
    for (int64_t rank : group) {
      Block &block = program.getRanks()[rank].front();
      Operation *last = nullptr;
      for (ComputeOp compute : block.getOps<ComputeOp>())
        if ((compute.getPhase() == Phase::W ||
             compute.getPhase() == Phase::BW) &&
            stages.count(compute.getStage()))
          last = compute;
      if (last)
        while (last->getNextNode() && isa<SendOp>(last->getNextNode()))
          last = last->getNextNode();
      if (last)
        builder.setInsertionPointAfter(last);
      else
        builder.setInsertionPointToEnd(&block);
      AllReduceOp::create(builder, last ? last->getLoc() : program.getLoc(),
                          builder.getArrayAttr(names),
                          builder.getDenseI64ArrayAttr(group),
                          builder.getI64IntegerAttr(0));
    }
  }
  for (Region &region : program.getRanks()) {
    std::map<std::vector<int64_t>, int64_t> next;
    for (AllReduceOp reduce : region.front().getOps<AllReduceOp>()) {
      std::vector<int64_t> group(reduce.getGroup().begin(),
                                 reduce.getGroup().end());
      reduce.setSeq(next[group]++);
    }
  }
}

namespace {
struct InsertCommPass : zb::sched::impl::ZBInsertCommBase<InsertCommPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<ProgramOp> programs;
    getOperation().walk(
        [&](ProgramOp program) { programs.push_back(program); });
    for (ProgramOp program : programs) {
      if (failed(insertTransfers(program, inOrderLinks)))
        return signalPassFailure();
      insertReductions(program);
    }
  }
};
} // namespace
