//===- SchedOps.cpp - The sched dialect operations ------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Dialect/Sched/SchedOps.h"

#include "zb/Dialect/Sched/ScheduleInterop.h"
#include "zb/Schedule/Communication.h"
#include "zb/Schedule/Problem.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <tuple>
#include <vector>

using namespace mlir;
using namespace zb::sched;

#include "zb/Dialect/Sched/SchedEnums.cpp.inc"

#define GET_OP_CLASSES
#include "zb/Dialect/Sched/SchedOps.cpp.inc"

//===----------------------------------------------------------------------===//
// ProgramOp: custom assembly
//===----------------------------------------------------------------------===//

// sched.program ranks R stages S microbatches M [attributes {...}]
//   rank 0 { ... } rank 1 { ... } ...
ParseResult ProgramOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &b = parser.getBuilder();
  int64_t ranks, stages, microbatches;
  SMLoc ranksLoc;
  if (parser.parseKeyword("ranks") || parser.getCurrentLocation(&ranksLoc) ||
      parser.parseInteger(ranks) || parser.parseKeyword("stages") ||
      parser.parseInteger(stages) || parser.parseKeyword("microbatches") ||
      parser.parseInteger(microbatches))
    return failure();
  result.addAttribute(getNumRanksAttrName(result.name),
                      b.getI64IntegerAttr(ranks));
  result.addAttribute(getNumStagesAttrName(result.name),
                      b.getI64IntegerAttr(stages));
  result.addAttribute(getNumMicrobatchesAttrName(result.name),
                      b.getI64IntegerAttr(microbatches));
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  if (ranks < 1)
    return parser.emitError(ranksLoc, "expected at least one rank");
  for (int64_t rank = 0; rank < ranks; ++rank) {
    int64_t index;
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseKeyword("rank") || parser.parseInteger(index))
      return failure();
    if (index != rank)
      return parser.emitError(loc)
             << "expected 'rank " << rank << "', got 'rank " << index << "'";
    Region *region = result.addRegion();
    if (parser.parseRegion(*region, /*arguments=*/{}))
      return failure();
    if (region->empty())
      region->emplaceBlock();
  }
  return success();
}

void ProgramOp::print(OpAsmPrinter &p) {
  p << " ranks " << getNumRanks() << " stages " << getNumStages()
    << " microbatches " << getNumMicrobatches();
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(), {getNumRanksAttrName(), getNumStagesAttrName(),
                            getNumMicrobatchesAttrName()});
  for (auto [index, region] : llvm::enumerate(getRanks())) {
    p.printNewline();
    p << "rank " << index << " ";
    p.printRegion(region, /*printEntryBlockArgs=*/false,
                  /*printBlockTerminators=*/true);
  }
}

int64_t ProgramOp::getRankOf(Operation *op) {
  return op->getParentRegion()->getRegionNumber();
}

//===----------------------------------------------------------------------===//
// ProgramOp: verification
//===----------------------------------------------------------------------===//

namespace {
/// What a transfer carries: the output of (phase, stage, microbatch).
using Payload = std::tuple<Phase, int64_t, int64_t>;
/// One end of a transfer: (from rank, to rank, channel, seq).
using TransferKey = std::tuple<int64_t, int64_t, int64_t, int64_t>;
} // namespace

/// Formats an action for diagnostics, e.g. "F stage 1 microbatch 3".
static std::string describe(Phase phase, int64_t stage,
                            std::optional<int64_t> microbatch) {
  std::string text = (stringifyPhase(phase) + " stage " + Twine(stage)).str();
  if (microbatch)
    text += (" microbatch " + Twine(*microbatch)).str();
  return text;
}

/// Runs all ranks with non-blocking sends and blocking recvs (the schedule
/// library's checkDeadlock) and reports the wait-for cycle if they get
/// stuck. Expects matched transfers.
static LogicalResult verifyNoDeadlock(ProgramOp program) {
  namespace zs = zb::schedule;
  zs::CommProgram comm;
  comm.numStages = program.getNumStages();
  comm.numMicrobatches = program.getNumMicrobatches();
  // The op behind each entry of comm.ranks; compute ops never block, so
  // only transfers are converted.
  SmallVector<SmallVector<Operation *>> opsOf;
  for (Region &region : program.getRanks()) {
    std::vector<zs::CommOp> &ops = comm.ranks.emplace_back();
    SmallVector<Operation *> &origin = opsOf.emplace_back();
    for (Operation &op : region.front()) {
      auto convert = [&](auto transfer, zs::CommOpKind kind) {
        zs::CommOp commOp;
        commOp.kind = kind;
        commOp.action = {toActionKind(transfer.getPhase()),
                         static_cast<int>(transfer.getStage()),
                         static_cast<int>(transfer.getMicrobatch())};
        commOp.peer = transfer.getPeer();
        commOp.channel = transfer.getChannel();
        commOp.seq = transfer.getSeq();
        ops.push_back(commOp);
        origin.push_back(&op);
      };
      if (auto send = dyn_cast<SendOp>(op))
        convert(send, zs::CommOpKind::Send);
      else if (auto recv = dyn_cast<RecvOp>(op))
        convert(recv, zs::CommOpKind::Recv);
    }
  }
  std::optional<zs::Deadlock> deadlock = zs::checkDeadlock(comm);
  if (!deadlock)
    return success();
  InFlightDiagnostic diag = program.emitOpError() << deadlock->message();
  for (const zs::Deadlock::Wait &wait : deadlock->cycle)
    diag.attachNote(opsOf[wait.rank][wait.index]->getLoc())
        << "rank " << wait.rank << " waits here";
  return diag;
}

LogicalResult ProgramOp::verifyRegions() {
  int64_t numRanks = getNumRanks();
  int64_t numStages = getNumStages();
  int64_t numMicrobatches = getNumMicrobatches();
  // The schedule library's limits: the passes size their tables by these
  // counts.
  namespace zs = zb::schedule;
  for (auto [name, value, limit] :
       {std::tuple<StringRef, int64_t, int64_t>{"num_ranks", numRanks,
                                                zs::kMaxRanks},
        {"num_stages", numStages, int64_t(zs::kMaxRanks) * zs::kMaxChunks},
        {"num_microbatches", numMicrobatches, zs::kMaxMicrobatches}})
    if (value > limit)
      return emitOpError() << "'" << name << "' of " << value
                           << " is past the schedules' limit of " << limit;
  if (static_cast<int64_t>(getRanks().size()) != numRanks)
    return emitOpError() << "has " << getRanks().size()
                         << " rank regions, but 'num_ranks' is " << numRanks;
  std::optional<ArrayRef<int64_t>> stageRanks = getStageRanks();
  if (stageRanks) {
    if (static_cast<int64_t>(stageRanks->size()) != numStages)
      return emitOpError() << "'stage_ranks' has " << stageRanks->size()
                           << " entries, but there are " << numStages
                           << " stages";
    for (auto [stage, rank] : llvm::enumerate(*stageRanks))
      if (rank < 0 || rank >= numRanks)
        return emitOpError()
               << "'stage_ranks' places stage " << stage << " on rank " << rank
               << ", out of range [0, " << numRanks << ")";
  }

  // Shared parameters: the stages and ranks that hold each one.
  llvm::StringMap<SmallVector<int64_t>> paramStages;
  llvm::StringMap<llvm::SmallSetVector<int64_t, 4>> paramRanks;
  if (std::optional<DictionaryAttr> shared = getParamStages()) {
    if (!stageRanks)
      return emitOpError("'param_stages' needs 'stage_ranks'");
    for (NamedAttribute entry : *shared) {
      auto list = dyn_cast<DenseI64ArrayAttr>(entry.getValue());
      if (!list || list.empty())
        return emitOpError()
               << "'param_stages' entry '" << entry.getName().getValue()
               << "' must be a non-empty array<i64> of stages";
      for (int64_t stage : list.asArrayRef()) {
        if (stage < 0 || stage >= numStages)
          return emitOpError() << "'param_stages' lists stage " << stage
                               << " for '" << entry.getName().getValue()
                               << "', out of range [0, " << numStages << ")";
        paramRanks[entry.getName().getValue()].insert((*stageRanks)[stage]);
      }
      paramStages[entry.getName().getValue()] =
          SmallVector<int64_t>(list.asArrayRef());
    }
  }
  // Reductions: per rank the op reducing each parameter; per (group, seq)
  // the op on each rank; the next sequence number per (rank, group).
  SmallVector<llvm::StringMap<Operation *>> reducedAt(numRanks);
  std::map<std::pair<std::vector<int64_t>, int64_t>,
           std::map<int64_t, AllReduceOp>>
      collectives;
  std::map<std::pair<int64_t, std::vector<int64_t>>, int64_t> nextReduction;

  DenseMap<std::tuple<int32_t, int64_t, int64_t>, Operation *> seenActions;
  // Next expected sequence number per (rank, peer, channel, isSend).
  DenseMap<std::tuple<int64_t, int64_t, int64_t, int64_t>, int64_t> nextSeq;
  // All sends and recvs, keyed by (from, to, channel, seq).
  llvm::MapVector<TransferKey, std::pair<Operation *, Payload>> sends, recvs;

  for (auto [rank, region] : llvm::enumerate(getRanks())) {
    for (Operation &op : region.front()) {
      auto checkStage = [&](int64_t stage) -> LogicalResult {
        if (stage >= numStages)
          return op.emitOpError()
                 << "stage " << stage << " is out of range [0, " << numStages
                 << ")";
        return success();
      };
      auto checkMicrobatch = [&](int64_t microbatch) -> LogicalResult {
        if (microbatch >= numMicrobatches)
          return op.emitOpError()
                 << "microbatch " << microbatch << " is out of range [0, "
                 << numMicrobatches << ")";
        return success();
      };

      if (auto compute = dyn_cast<ComputeOp>(op)) {
        if (getForwardOnly() && compute.getPhase() != Phase::F)
          return op.emitOpError()
                 << "runs " << stringifyPhase(compute.getPhase())
                 << " in a forward_only program, which runs F actions only";
        int64_t stage = compute.getStage();
        std::optional<int64_t> mb = compute.getMicrobatch();
        if (failed(checkStage(stage)) || (mb && failed(checkMicrobatch(*mb))))
          return failure();
        if (stageRanks && (*stageRanks)[stage] != static_cast<int64_t>(rank))
          return op.emitOpError()
                 << "runs stage " << stage << " on rank " << rank
                 << ", but 'stage_ranks' places it on rank "
                 << (*stageRanks)[stage];
        // A W (or BW) adds to its stage's gradients: none may follow the
        // reduction of a parameter the stage uses.
        if (compute.getPhase() == Phase::W || compute.getPhase() == Phase::BW)
          for (auto &reduced : reducedAt[rank])
            if (llvm::is_contained(paramStages.lookup(reduced.getKey()),
                                   stage)) {
              StringRef name = reduced.getKey();
              Operation *reducer = reduced.getValue();
              InFlightDiagnostic diag =
                  op.emitOpError()
                  << "adds to the gradient of '" << name
                  << "' after its reduction on rank " << rank
                  << "; a reduction must follow the last W of every stage "
                     "that uses its parameters";
              diag.attachNote(reducer->getLoc()) << "reduction here";
              return diag;
            }
        auto key = std::make_tuple(static_cast<int32_t>(compute.getPhase()),
                                   stage, mb.value_or(-1));
        auto [it, inserted] = seenActions.try_emplace(key, &op);
        if (!inserted) {
          InFlightDiagnostic diag = op.emitOpError()
                                    << "duplicate action '"
                                    << describe(compute.getPhase(), stage, mb)
                                    << "'";
          diag.attachNote(it->second->getLoc()) << "first occurrence here";
          return diag;
        }
        continue;
      }

      if (auto reduce = dyn_cast<AllReduceOp>(op)) {
        if (getForwardOnly())
          return op.emitOpError("reduces gradients in a forward_only "
                                "program, which computes none");
        std::vector<int64_t> group(reduce.getGroup().begin(),
                                   reduce.getGroup().end());
        for (int64_t member : group)
          if (member >= numRanks)
            return op.emitOpError()
                   << "group rank " << member << " is out of range [0, "
                   << numRanks << ")";
        if (!llvm::is_contained(group, static_cast<int64_t>(rank)))
          return op.emitOpError()
                 << "runs on rank " << rank << ", which is not in its group";
        for (Attribute attr : reduce.getParams()) {
          StringRef name = cast<StringAttr>(attr).getValue();
          auto holders = paramRanks.find(name);
          if (holders == paramRanks.end())
            return op.emitOpError()
                   << "reduces '" << name
                   << "', which the program's 'param_stages' does not "
                      "list";
          for (int64_t member : group)
            if (!holders->second.contains(member))
              return op.emitOpError() << "reduces '" << name << "' over rank "
                                      << member << ", which does not hold it";
          auto [it, inserted] = reducedAt[rank].try_emplace(name, &op);
          if (!inserted) {
            InFlightDiagnostic diag = op.emitOpError()
                                      << "reduces '" << name
                                      << "' a second time on rank " << rank;
            diag.attachNote(it->second->getLoc()) << "first reduction here";
            return diag;
          }
        }
        int64_t &expected = nextReduction[{static_cast<int64_t>(rank), group}];
        if (static_cast<int64_t>(reduce.getSeq()) != expected)
          return op.emitOpError()
                 << "has sequence number " << reduce.getSeq()
                 << " but is reduction number " << expected
                 << " over its group on rank " << rank
                 << " (reductions over a group must be numbered in program "
                    "order)";
        ++expected;
        collectives[{group, static_cast<int64_t>(reduce.getSeq())}][rank] =
            reduce;
        continue;
      }

      bool isSend = isa<SendOp>(op);
      if (!isSend && !isa<RecvOp>(op))
        return op.emitOpError() << "is not allowed in a rank of "
                                   "'sched.program'; expected sched.compute, "
                                   "sched.send, sched.recv or sched.allreduce";
      auto fields = [](auto transfer) {
        return std::make_tuple(transfer.getPhase(),
                               static_cast<int64_t>(transfer.getStage()),
                               static_cast<int64_t>(transfer.getMicrobatch()),
                               static_cast<int64_t>(transfer.getPeer()),
                               static_cast<int64_t>(transfer.getChannel()),
                               static_cast<int64_t>(transfer.getSeq()));
      };
      auto [phase, stage, microbatch, peer, channel, seq] =
          isSend ? fields(cast<SendOp>(op)) : fields(cast<RecvOp>(op));
      if (failed(checkStage(stage)) || failed(checkMicrobatch(microbatch)))
        return failure();
      if (peer >= numRanks)
        return op.emitOpError() << "peer rank " << peer
                                << " is out of range [0, " << numRanks << ")";
      if (peer == static_cast<int64_t>(rank))
        return op.emitOpError() << "transfers to its own rank " << rank;
      int64_t &expected = nextSeq[{static_cast<int64_t>(rank), peer, channel,
                                   static_cast<int64_t>(isSend)}];
      if (seq != expected)
        return op.emitOpError()
               << "has sequence number " << seq << " but is transfer number "
               << expected << " on channel " << channel
               << (isSend ? " to rank " : " from rank ") << peer
               << " (transfers on a channel must be numbered in program "
                  "order)";
      ++expected;
      Payload payload{phase, stage, microbatch};
      if (isSend)
        sends[{static_cast<int64_t>(rank), peer, channel, seq}] = {&op,
                                                                   payload};
      else
        recvs[{peer, static_cast<int64_t>(rank), channel, seq}] = {&op,
                                                                   payload};
    }
  }

  // Every send meets a recv with the same payload, and vice versa.
  for (auto &[key, entry] : sends) {
    auto [from, to, channel, seq] = key;
    auto it = recvs.find(key);
    if (it == recvs.end())
      return entry.first->emitOpError()
             << "has no matching 'sched.recv' on rank " << to << " (channel "
             << channel << ", seq " << seq << ")";
    if (it->second.second != entry.second) {
      auto [sentPhase, sentStage, sentMb] = entry.second;
      auto [phase, stage, mb] = it->second.second;
      InFlightDiagnostic diag = entry.first->emitOpError()
                                << "sends '"
                                << describe(sentPhase, sentStage, sentMb)
                                << "' but is received on rank " << to << " as '"
                                << describe(phase, stage, mb) << "'";
      diag.attachNote(it->second.first->getLoc()) << "matching recv here";
      return diag;
    }
  }
  for (auto &[key, entry] : recvs) {
    auto [from, to, channel, seq] = key;
    if (!sends.count(key))
      return entry.first->emitOpError()
             << "has no matching 'sched.send' on rank " << from << " (channel "
             << channel << ", seq " << seq << ")";
  }

  // Each reduction is one collective over its whole group.
  for (auto &[key, members] : collectives) {
    const auto &[group, seq] = key;
    AllReduceOp first = members.begin()->second;
    for (int64_t member : group) {
      auto it = members.find(member);
      if (it == members.end())
        return first.emitOpError()
               << "has no matching 'sched.allreduce' on rank " << member
               << " (seq " << seq << ")";
      if (it->second.getParams() != first.getParams()) {
        InFlightDiagnostic diag =
            it->second.emitOpError()
            << "reduces other parameters than its match on rank "
            << members.begin()->first;
        diag.attachNote(first.getLoc()) << "matching reduction here";
        return diag;
      }
    }
  }
  return verifyNoDeadlock(*this);
}

//===----------------------------------------------------------------------===//
// Schedule library interop
//===----------------------------------------------------------------------===//

zb::schedule::ActionKind zb::sched::toActionKind(Phase phase) {
  switch (phase) {
  case Phase::F:
    return zb::schedule::ActionKind::F;
  case Phase::B:
    return zb::schedule::ActionKind::B;
  case Phase::W:
    return zb::schedule::ActionKind::W;
  case Phase::BW:
  case Phase::Optimizer:
    break;
  }
  return zb::schedule::ActionKind::BW;
}

Phase zb::sched::toPhase(zb::schedule::ActionKind kind) {
  switch (kind) {
  case zb::schedule::ActionKind::F:
    return Phase::F;
  case zb::schedule::ActionKind::B:
    return Phase::B;
  case zb::schedule::ActionKind::W:
    return Phase::W;
  case zb::schedule::ActionKind::BW:
    break;
  }
  return Phase::BW;
}

//===----------------------------------------------------------------------===//
// ComputeOp / SendOp / RecvOp
//===----------------------------------------------------------------------===//

LogicalResult ComputeOp::verify() {
  bool isOptimizer = getPhase() == Phase::Optimizer;
  if (isOptimizer && getMicrobatch())
    return emitOpError("optimizer phase takes no microbatch");
  if (!isOptimizer && !getMicrobatch())
    return emitOpError() << "phase " << stringifyPhase(getPhase())
                         << " needs a microbatch";
  return success();
}

/// Only forward activations and input gradients travel between ranks.
static LogicalResult verifyTransferPhase(Operation *op, Phase phase) {
  if (phase == Phase::W || phase == Phase::Optimizer)
    return op->emitOpError()
           << "cannot transfer the output of phase " << stringifyPhase(phase)
           << "; only F, B and BW outputs cross ranks";
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (getParams().empty())
    return emitOpError("reduces no parameters");
  ArrayRef<int64_t> group = getGroup();
  auto program = (*this)->getParentOfType<ProgramOp>();
  if (group.empty() ||
      (group.size() < 2 && (!program || program.getNumReplicas() < 2)))
    return emitOpError("needs a group of at least two ranks (or, in a "
                       "program with replicas, one)");
  for (size_t i = 0; i < group.size(); ++i)
    if (group[i] < 0 || (i && group[i] <= group[i - 1]))
      return emitOpError("group must list distinct non-negative ranks in "
                         "increasing order");
  return success();
}

LogicalResult SendOp::verify() {
  return verifyTransferPhase(*this, getPhase());
}
LogicalResult RecvOp::verify() {
  return verifyTransferPhase(*this, getPhase());
}
