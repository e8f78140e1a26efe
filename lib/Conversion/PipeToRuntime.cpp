//===- PipeToRuntime.cpp - Stages and rank programs to functions ----------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"
#include "zb/Conversion/Transforms.h"

#include "StepFunctions.h"
#include "zb/Dialect/Pipe/PipeOps.h"
#include "zb/Dialect/Sched/SchedOps.h"
#include "zb/Dialect/ZB/StageTable.h"
#include "zb/Model/Model.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"

namespace zb {
#define GEN_PASS_DEF_ZBLOWERTORUNTIME
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;
using namespace zb;
using namespace zb::detail;

/// Moves `region` into a new private function named `name`.
static Outlined outline(OpBuilder &b, Region &region, StringRef name,
                        unsigned &numValues, unsigned &numStash) {
  auto yield = cast<pipe::YieldOp>(region.front().getTerminator());
  numValues = yield.getValues().size();
  numStash = yield.getStash().size();
  Outlined result;
  SmallVector<Value> returned;
  DenseMap<Value, unsigned> position;
  for (Value v : llvm::concat<Value>(yield.getValues(), yield.getStash())) {
    if (auto arg = dyn_cast<BlockArgument>(v);
        arg && arg.getOwner() == &region.front()) {
      result.sources.push_back({true, arg.getArgNumber()});
      continue;
    }
    auto [it, inserted] = position.try_emplace(v, returned.size());
    if (inserted)
      returned.push_back(v);
    result.sources.push_back({false, it->second});
  }
  result.fn = func::FuncOp::create(
      b, region.getLoc(), name,
      FunctionType::get(b.getContext(), region.front().getArgumentTypes(),
                        ValueRange(returned).getTypes()));
  result.fn.setPrivate();
  result.fn.getBody().takeBody(region);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(yield);
  func::ReturnOp::create(b, yield.getLoc(), returned);
  yield.erase();
  return result;
}

/// Records the stage table (zb/Dialect/ZB/StageTable.h) on `module`.
static void recordStageTable(ModuleOp module, ArrayRef<pipe::StageOp> ops) {
  SmallVector<pipe::StageOp> stages(ops.begin(), ops.end());
  llvm::sort(stages, [](pipe::StageOp a, pipe::StageOp b) {
    return a.getStage() < b.getStage();
  });
  StageTable table;
  auto cost = [](FloatAttr a) { return a ? a.getValueAsDouble() : 0.0; };
  auto mem = [](IntegerAttr a) { return a ? double(a.getInt()) : 0.0; };
  for (pipe::StageOp stage : stages) {
    table.ranks.push_back(static_cast<int>(stage.getRank()));
    table.costF.push_back(cost(stage.getCostFAttr()));
    table.costB.push_back(cost(stage.getCostBAttr()));
    table.costW.push_back(cost(stage.getCostWAttr()));
    table.memB.push_back(mem(stage.getMemBAttr()));
    table.memW.push_back(mem(stage.getMemWAttr()));
    double bytes = 0;
    for (Value param : stage.getParams())
      if (auto type = dyn_cast<RankedTensorType>(param.getType()))
        bytes += double(type.getNumElements()) *
                 double(type.getElementTypeBitWidth()) / 8;
    table.paramBytes.push_back(bytes);
  }
  writeStageTable(module, table);
}

void zb::declareRuntimeFunction(OpBuilder &builder, ModuleOp module,
                                StringRef name, FunctionType type,
                                bool cInterface) {
  if (module.lookupSymbol(name))
    return;
  auto fn = func::FuncOp::create(builder, module.getLoc(), name, type);
  fn.setPrivate();
  if (cInterface)
    fn->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                builder.getUnitAttr());
}

/// Checks the chain the lowering assumes of `model`'s stages, in order:
/// the model's arguments are ranked tensors, stage s is numbered s, takes
/// as inputs exactly stage s - 1's results (stage 0 none), its data from
/// the model's data arguments and its parameters from its zb.param
/// arguments, and the last stage yields the loss first.
static LogicalResult verifyStageChain(func::FuncOp model,
                                      ArrayRef<pipe::StageOp> stages) {
  Block &body = model.getBody().front();
  for (BlockArgument arg : body.getArguments())
    if (!isa<RankedTensorType>(arg.getType()))
      return model.emitOpError("argument #")
             << arg.getArgNumber() << " has type " << arg.getType()
             << "; the model's arguments must be ranked tensors";
  // The last stage's first result is the loss, one float.
  if (!stages.empty()) {
    pipe::StageOp last = stages.back();
    auto loss = last.getNumResults()
                    ? dyn_cast<RankedTensorType>(last.getResult(0).getType())
                    : RankedTensorType();
    if (!loss || loss.getRank() != 0 || !isa<FloatType>(loss.getElementType()))
      return last.emitOpError("is the last stage, whose first result must be "
                              "the loss, a 0-d float tensor");
  }
  auto argument = [&](Value v) -> std::optional<unsigned> {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &body)
      return std::nullopt;
    return arg.getArgNumber();
  };
  for (auto [s, stageOp] : llvm::enumerate(stages)) {
    pipe::StageOp stage = stageOp;
    if (stage.getStage() != s)
      return stage.emitOpError("is stage ")
             << stage.getStage() << ", but stands at position " << s << " of '"
             << model.getSymName() << "'";
    ValueRange previous =
        s == 0 ? ValueRange()
               : ValueRange(pipe::StageOp(stages[s - 1]).getResults());
    if (!llvm::equal(stage.getInputs(), previous))
      return stage.emitOpError("must take as inputs ")
             << (s == 0 ? "nothing (it is the first stage)"
                        : "the previous stage's results, in order");
    for (Value v : stage.getData()) {
      std::optional<unsigned> i = argument(v);
      if (!i || model.getArgAttr(*i, ZBDialect::kParamAttrName))
        return stage.emitOpError("takes data that is no data argument of '")
               << model.getSymName() << "'";
    }
    for (Value v : stage.getParams()) {
      std::optional<unsigned> i = argument(v);
      if (!i || !model.getArgAttr(*i, ZBDialect::kParamAttrName))
        return stage.emitOpError("takes a parameter that is no zb.param "
                                 "argument of '")
               << model.getSymName() << "'";
    }
  }
  return success();
}

namespace {
struct LowerToRuntimePass : zb::impl::ZBLowerToRuntimeBase<LowerToRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<sched::ProgramOp> programs(module.getOps<sched::ProgramOp>());
    func::FuncOp model;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.getOps<pipe::StageOp>().empty())
        model = fn;
    if (programs.size() != 1 || !model) {
      module.emitError("--zb-lower-to-runtime needs one function of "
                       "pipe.stage ops and one sched.program (see "
                       "--zb-partition-stages and --zb-schedule)");
      return signalPassFailure();
    }
    sched::ProgramOp program = programs.front();
    SmallVector<pipe::StageOp> stageOps(model.getOps<pipe::StageOp>());
    if (static_cast<int64_t>(stageOps.size()) !=
        static_cast<int64_t>(program.getNumStages())) {
      program.emitError("has ")
          << program.getNumStages() << " stages, but '" << model.getSymName()
          << "' has " << stageOps.size();
      return signalPassFailure();
    }

    if (failed(verifyStageChain(model, stageOps)))
      return signalPassFailure();

    OpBuilder b(model);
    // The runtime's transfer functions: f32 always, the other transferred
    // element types where a stage takes or yields such values.
    MLIRContext *ctx = &getContext();
    auto i64 = IntegerType::get(ctx, 64);
    llvm::SetVector<Type> transferred;
    transferred.insert(Float32Type::get(ctx));
    auto note = [&](TypeRange types) {
      for (Type t : types)
        if (zb::detail::isTransferable(t))
          transferred.insert(cast<RankedTensorType>(t).getElementType());
    };
    for (pipe::StageOp stage : stageOps) {
      note(stage.getResultTypes());
      note(stage.getInputs().getTypes());
    }
    for (Type element : transferred)
      for (bool send : {true, false})
        declareRuntimeFunction(
            b, module, zb::detail::transferFunctionName(send, element),
            FunctionType::get(
                ctx, {UnrankedMemRefType::get(element, 0), i64, i64}, {}),
            /*cInterface=*/true);

    // The runtime's group sums (replica means in a program with replicas)
    // for the element types of the parameters sched.allreduce ops reduce.
    bool hasReductions = false;
    llvm::StringSet<> reducedNames;
    program.walk([&](sched::AllReduceOp reduce) {
      hasReductions = true;
      for (Attribute name : reduce.getParams())
        reducedNames.insert(cast<StringAttr>(name).getValue());
    });
    llvm::SetVector<Type> summed;
    for (BlockArgument arg : model.getArguments())
      if (model.getArgAttr(arg.getArgNumber(), ZBDialect::kParamAttrName) &&
          reducedNames.contains(argName(model, arg.getArgNumber())))
        if (auto type = dyn_cast<RankedTensorType>(arg.getType());
            type && zb::detail::isSummable(type.getElementType()))
          summed.insert(type.getElementType());
    if (hasReductions) {
      auto groupType = UnrankedMemRefType::get(i64, 0);
      for (Type element : summed)
        declareRuntimeFunction(
            b, module,
            zb::detail::sumFunctionName(program.getNumReplicas() > 1, element),
            FunctionType::get(
                ctx, {UnrankedMemRefType::get(element, 0), groupType}, {}),
            /*cInterface=*/true);
      declareRuntimeFunction(b, module, "zbrt_wait_group_sums",
                             FunctionType::get(ctx, {}, {}),
                             /*cInterface=*/false);
    }

    auto i32 = IntegerType::get(ctx, 32);
    for (StringRef name : {"zbrt_action_begin", "zbrt_action_end"})
      declareRuntimeFunction(b, module, name,
                             FunctionType::get(ctx, {i32, i64, i64}, {}),
                             /*cInterface=*/false);
    recordStageTable(module, stageOps);

    std::vector<StageFunctions> stages(stageOps.size());
    for (pipe::StageOp stage : stageOps) {
      int64_t s = stage.getStage();
      if (s >= static_cast<int64_t>(stages.size()) || stages[s].stage) {
        stage.emitOpError("has a stage index that is out of range or "
                          "repeated");
        return signalPassFailure();
      }
      if (!stage.hasBackward()) {
        stage.emitOpError("has no backward; run --zb-autodiff first");
        return signalPassFailure();
      }
      StageFunctions &fns = stages[s];
      fns.stage = stage;
      std::string prefix = ("zb_stage" + Twine(s) + "_").str();
      unsigned unused;
      fns.forward = outline(b, stage.getForward(), prefix + "forward",
                            fns.numResults, fns.numStash);
      if (stage.isSplit()) {
        fns.backwardInput =
            outline(b, stage.getBackwardInput(), prefix + "backward_input",
                    unused, fns.numWStash);
        fns.backwardWeight =
            outline(b, stage.getBackwardWeight(), prefix + "backward_weight",
                    unused, unused);
      } else {
        fns.backward = outline(b, stage.getBackward(), prefix + "backward",
                               unused, unused);
      }
    }

    int64_t numMicrobatches = program.getNumMicrobatches();
    for (auto [r, region] : llvm::enumerate(program.getRanks())) {
      if (failed(lowerRankProgram(b, model, stages, numMicrobatches, program, r,
                                  region, unroll)))
        return signalPassFailure();
    }
    program.erase();
    model.erase();
    // A stage function whose calls all became its accumulating form's.
    for (const StageFunctions &fns : stages)
      for (const Outlined *o : {&fns.backward, &fns.backwardWeight})
        if (o->accumulating && SymbolTable::symbolKnownUseEmpty(o->fn, module))
          o->fn.erase();
  }
};
} // namespace
