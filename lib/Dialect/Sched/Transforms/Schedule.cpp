//===- Schedule.cpp - Build a sched.program from pipe.stage ops -----------===//
//
// Part of ZeroBubble MLIR.
//
// --zb-schedule: reads the scheduling problem off the model's pipe.stage ops
// (placement, per-stage costs and memory), asks the schedule library for the
// named schedule and appends it to the module as a sched.program.
//
//===----------------------------------------------------------------------===//

#include "zb/Dialect/Sched/Transforms/Passes.h"

#include "zb/Dialect/Pipe/PipeOps.h"
#include "zb/Dialect/Sched/Profile.h"
#include "zb/Dialect/Sched/SchedOps.h"
#include "zb/Dialect/Sched/ScheduleInterop.h"
#include "zb/Model/Model.h"
#include "zb/Schedule/Communication.h"
#include "zb/Schedule/Generators.h"
#include "zb/Schedule/Validator.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace zb::sched {
#define GEN_PASS_DEF_ZBSCHEDULE
#include "zb/Dialect/Sched/Transforms/Passes.h.inc"
} // namespace zb::sched

using namespace mlir;
namespace zs = zb::schedule;

namespace {

struct SchedulePass : zb::sched::impl::ZBScheduleBase<SchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(schedule()))
      signalPassFailure();
  }

  LogicalResult schedule();
  /// Fills the problem's per-stage costs from the profile or the attributes.
  LogicalResult readCosts(Operation *func, ArrayRef<zb::pipe::StageOp> stages,
                          zs::Problem &problem);
  /// Fills the problem's activation memory from mem_b / mem_w.
  void readMemory(Operation *func, ArrayRef<zb::pipe::StageOp> stages,
                  const std::vector<int> &stageRanks, zs::Problem &problem);
};

} // namespace

LogicalResult SchedulePass::readCosts(Operation *func,
                                      ArrayRef<zb::pipe::StageOp> stages,
                                      zs::Problem &problem) {
  int numStages = static_cast<int>(stages.size());
  if (!costsFile.empty()) {
    zb::sched::StageProfile costs;
    if (std::optional<std::string> error =
            zb::sched::readProfile(costsFile, numStages, costs))
      return func->emitError()
             << "costs file '" << costsFile << "': " << *error;
    problem.stageCostF = costs.f;
    problem.stageCostB = costs.b;
    problem.stageCostW = costs.w;
    return success();
  }

  // Measured times, where the partition was made from a profile.
  if (llvm::all_of(stages, [](zb::pipe::StageOp stage) {
        return stage.getTimeFAttr() && stage.getTimeBAttr() &&
               stage.getTimeWAttr();
      })) {
    for (zb::pipe::StageOp stage : stages) {
      problem.stageCostF.push_back(stage.getTimeFAttr().getValueAsDouble());
      problem.stageCostB.push_back(stage.getTimeBAttr().getValueAsDouble());
      problem.stageCostW.push_back(stage.getTimeWAttr().getValueAsDouble());
    }
    return success();
  }

  // An unsplit stage's cost_b is its whole backward (its W is 0); a split
  // stage needs cost_w as well.
  for (zb::pipe::StageOp stage : stages) {
    StringRef missing;
    if (!stage.getCostFAttr())
      missing = "cost_f";
    else if (!stage.getCostBAttr())
      missing = "cost_b";
    else if (stage.isSplit() && !stage.getCostWAttr())
      missing = "cost_w";
    if (missing.empty()) {
      problem.stageCostF.push_back(stage.getCostFAttr().getValueAsDouble());
      problem.stageCostB.push_back(stage.getCostBAttr().getValueAsDouble());
      problem.stageCostW.push_back(
          stage.isSplit() ? stage.getCostWAttr().getValueAsDouble() : 0.0);
      continue;
    }
    func->emitRemark() << "stage " << stage.getStage() << " has no '" << missing
                       << "' attribute: using unit costs (F = B = W = 1)";
    problem.stageCostF.assign(numStages, 1.0);
    problem.stageCostB.assign(numStages, 1.0);
    problem.stageCostW.assign(numStages, 1.0);
    return success();
  }
  return success();
}

void SchedulePass::readMemory(Operation *func,
                              ArrayRef<zb::pipe::StageOp> stages,
                              const std::vector<int> &stageRanks,
                              zs::Problem &problem) {
  std::vector<double> memB, memW;
  for (zb::pipe::StageOp stage : stages) {
    if (!stage.getMemBAttr()) {
      if (memLimit > 0)
        func->emitRemark() << "stage " << stage.getStage()
                           << " has no 'mem_b' attribute: mem-limit counts "
                              "microbatches' activations per rank";
      return;
    }
    memB.push_back(stage.getMemBAttr().getInt());
    memW.push_back(stage.getMemWAttr() ? stage.getMemWAttr().getInt() : 0);
  }
  zs::setStageMemory(problem, stageRanks, memB, memW);
}

/// The program's `param_stages`: each parameter that stages on more than
/// one rank use (a tied weight), with those stages, and with `all` (a
/// program with replicas) every parameter; null when there is none. A
/// parameter is named as zb::argName names it.
static DictionaryAttr sharedParamStages(OpBuilder &b, Operation *func,
                                        ArrayRef<zb::pipe::StageOp> stages,
                                        ArrayRef<int> stageRanks, bool all) {
  llvm::MapVector<Value, SmallVector<int64_t>> users;
  for (zb::pipe::StageOp stage : stages)
    for (Value param : stage.getParams())
      users[param].push_back(static_cast<int64_t>(stage.getStage()));
  SmallVector<NamedAttribute> entries;
  for (auto &[param, stageList] : users) {
    llvm::SmallSetVector<int, 4> ranks;
    for (int64_t s : stageList)
      ranks.insert(stageRanks[s]);
    if (ranks.size() < 2 && !all)
      continue;
    // A parameter that is no argument of the model is diagnosed by
    // --zb-lower-to-runtime.
    auto arg = dyn_cast<BlockArgument>(param);
    auto fn = dyn_cast<func::FuncOp>(func);
    if (!arg || !fn || arg.getOwner() != &fn.front())
      continue;
    entries.push_back(b.getNamedAttr(zb::argName(fn, arg.getArgNumber()),
                                     b.getDenseI64ArrayAttr(stageList)));
  }
  if (entries.empty())
    return DictionaryAttr();
  return b.getDictionaryAttr(entries);
}

LogicalResult SchedulePass::schedule() {
  ModuleOp module = getOperation();
  SmallVector<zb::pipe::StageOp> found;
  module.walk([&](zb::pipe::StageOp stage) { found.push_back(stage); });
  if (found.empty())
    return module.emitError(
        "no 'pipe.stage' ops to schedule; run --zb-partition-stages first");

  // One function holds the model's stages.
  Operation *func = found.front()->getParentOfType<FunctionOpInterface>();
  if (!func)
    func = found.front()->getParentOp();
  for (zb::pipe::StageOp stage : found) {
    Operation *owner = stage->getParentOfType<FunctionOpInterface>();
    if (owner && owner != func)
      return stage.emitOpError()
             << "is in another function than stage " << found.front().getStage()
             << "; --zb-schedule expects one function holding the stages";
  }

  // Stages numbered 0 .. S-1, each once, each with a backward.
  int numStages = static_cast<int>(found.size());
  SmallVector<zb::pipe::StageOp> stages(numStages);
  for (zb::pipe::StageOp stage : found) {
    uint64_t number = stage.getStage();
    if (number >= static_cast<uint64_t>(numStages))
      return stage.emitOpError()
             << "has stage number " << number << ", but there are only "
             << numStages << " stages (expected 0.." << numStages - 1 << ")";
    if (stages[number]) {
      InFlightDiagnostic diag = stage.emitOpError()
                                << "duplicates stage " << number;
      diag.attachNote(stages[number].getLoc()) << "first stage " << number;
      return diag;
    }
    if (!stage.hasBackward())
      return stage.emitOpError()
             << "has no backward region; --zb-schedule needs a "
                "differentiated model (run --zb-autodiff)";
    stages[number] = stage;
  }

  // Placement.
  std::vector<int> stageRanks;
  int numRanks = 0;
  for (zb::pipe::StageOp stage : stages) {
    stageRanks.push_back(static_cast<int>(stage.getRank()));
    numRanks = std::max(numRanks, stageRanks.back() + 1);
  }
  // Stages that fit both placements (one rank holds them all) take the
  // schedule's own.
  const zs::ScheduleInfo *info = zs::lookupSchedule(scheduleName);
  if (!info)
    return emitError(func->getLoc())
           << "unknown schedule '" << scheduleName
           << "' (known: " << zs::knownScheduleNames() << ")";
  zs::PlacementFit fit =
      zs::inferPlacement(stageRanks, numRanks, info->defaultPlacement);
  if (!fit.ok) {
    InFlightDiagnostic diag =
        fit.stage >= 0 ? stages[fit.stage].emitOpError() : func->emitError();
    return diag << "cannot derive the placement of " << numStages
                << " stages on " << numRanks << " ranks: " << fit.message;
  }

  // The schedule and whether the stages fit it.
  if (info->splitBackward) {
    for (zb::pipe::StageOp stage : stages) {
      if (stage.isSplit())
        continue;
      std::string fused;
      for (const zs::ScheduleInfo &other : zs::knownSchedules())
        if (!other.splitBackward)
          fused += (fused.empty() ? "" : ", ") + other.name;
      return stage.emitOpError()
             << "has a fused 'backward' region, but schedule '" << scheduleName
             << "' splits the backward into B and W; run "
                "--zb-split-backward first or use a schedule with a fused "
                "backward ("
             << fused << ")";
    }
  }
  // The options' errors name the function's place, not its IR.
  Location loc = func->getLoc();
  if (numMicrobatches < 1)
    return emitError(loc)
           << "--zb-schedule needs 'microbatches' of at least 1, got "
           << static_cast<int>(numMicrobatches);
  if (numReplicas < 1)
    return emitError(loc)
           << "--zb-schedule needs 'replicas' of at least 1, got "
           << static_cast<int>(numReplicas);
  if (forwardOnly && numReplicas > 1)
    return emitError(loc) << "--zb-schedule: a forward-only program "
                             "evaluates one pipeline; it takes no "
                             "'replicas'";
  if (std::string problem = zs::memLimitProblem(memLimit); !problem.empty())
    return emitError(loc) << "--zb-schedule: " << problem;
  if (!std::isfinite(commCost) || commCost < 0)
    return emitError(loc)
           << "--zb-schedule needs a finite 'comm-cost' of 0 or more, got "
           << commCost;

  zs::Problem problem;
  problem.numRanks = numRanks;
  problem.numChunks = fit.numChunks;
  problem.placement = fit.placement;
  problem.numMicrobatches = numMicrobatches;
  problem.costComm = commCost;
  problem.memLimit = memLimit;
  if (failed(readCosts(func, stages, problem)))
    return failure();
  readMemory(func, stages, stageRanks, problem);

  zs::Result<zs::Schedule> generated =
      zs::generateSchedule(scheduleName, problem);
  if (!generated)
    return func->emitError() << "cannot generate schedule '" << scheduleName
                             << "': " << generated.error();
  if (!generated->note.empty())
    emitRemark(func->getLoc()) << generated->note;
  // Fixed-shape schedules do not look at the limit: check it.
  if (memLimit > 0) {
    std::vector<zs::Diagnostic> diagnostics = zs::validate(problem, *generated);
    if (!diagnostics.empty())
      return func->emitError()
             << "schedule '" << scheduleName
             << "' does not fit mem-limit: " << diagnostics.front().message;
  }

  if (forwardOnly)
    *generated = zs::forwardPart(*generated);

  OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
  SmallVector<int64_t> ranksAttr(stageRanks.begin(), stageRanks.end());
  auto program = zb::sched::ProgramOp::create(
      builder, loc, static_cast<uint64_t>(numRanks),
      static_cast<uint64_t>(numStages), static_cast<uint64_t>(numMicrobatches),
      builder.getStringAttr(scheduleName),
      builder.getDenseI64ArrayAttr(ranksAttr),
      forwardOnly ? DictionaryAttr()
                  : sharedParamStages(builder, func, stages, stageRanks,
                                      numReplicas > 1),
      numReplicas > 1 ? builder.getI64IntegerAttr(numReplicas) : IntegerAttr(),
      forwardOnly.getValue(), numRanks);
  for (auto [rank, region] : llvm::enumerate(program.getRanks())) {
    builder.setInsertionPointToEnd(&region.emplaceBlock());
    for (const zs::Action &action : generated->ranks[rank])
      zb::sched::ComputeOp::create(
          builder, loc, zb::sched::toPhase(action.kind), action.stage,
          builder.getI64IntegerAttr(action.microbatch));
  }
  return success();
}
