//===- PipeToRuntime.cpp - Stages and rank programs to functions ----------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"

#include "zb/Autodiff/Autodiff.h"
#include "zb/Dialect/Pipe/PipeOps.h"
#include "zb/Dialect/Sched/SchedOps.h"
#include "zb/Dialect/Sched/ScheduleInterop.h"
#include "zb/Model/Model.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"

#include <map>

namespace zb {
#define GEN_PASS_DEF_ZBLOWERTORUNTIME
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;
using namespace zb;

namespace {
/// A function a stage region became. It returns each distinct value the
/// region yields once, and never its own arguments (a caller already has
/// them): `sources[i]` says where the region's i-th yielded value is, as
/// {true, argument index} or {false, result index}.
struct Outlined {
  mutable func::FuncOp fn;
  SmallVector<std::pair<bool, unsigned>> sources;

  explicit operator bool() const { return static_cast<bool>(fn); }
};

/// The functions one stage became.
struct StageFunctions {
  mutable pipe::StageOp stage;
  Outlined forward, backward, backwardInput, backwardWeight;
  /// `(sums..., grads...) -> sums + grads` over the stage's parameters:
  /// built on first use, so that a step function accumulates one
  /// microbatch's gradients with one call.
  mutable func::FuncOp addGrads;
  unsigned numResults = 0, numStash = 0, numWStash = 0;
};

/// Builds one rank's step function.
class RankLowering {
public:
  RankLowering(OpBuilder &b, func::FuncOp model,
               ArrayRef<StageFunctions> stages, int64_t numMicrobatches)
      : b(b), model(model), stages(stages), numMicrobatches(numMicrobatches) {
  }

  FailureOr<func::FuncOp> lower(sched::ProgramOp program, int64_t rank,
                                Region &region);

private:
  Value sliceData(Value stacked, int64_t mb);
  void callFunction(const Outlined &fn, ValueRange args,
                    SmallVectorImpl<Value> &results);
  LogicalResult runForward(Location loc, int64_t stage, int64_t mb);
  LogicalResult runBackwardInput(Location loc, int64_t stage, int64_t mb,
                                 bool fused);
  LogicalResult runBackwardWeight(Location loc, int64_t stage, int64_t mb);
  void accumulateGrads(int64_t stage, ValueRange grads);
  FailureOr<SmallVector<Value>> cotangentsOf(Location loc, int64_t stage,
                                             int64_t mb);

  OpBuilder &b;
  func::FuncOp model;
  ArrayRef<StageFunctions> stages;
  int64_t numMicrobatches;
  int64_t rank = 0;
  func::FuncOp step;
  /// Model argument -> step function argument.
  DenseMap<Value, Value> argMap;
  using Key = std::pair<int64_t, int64_t>; // (stage, microbatch)
  std::map<Key, SmallVector<Value>> activations, stash, inputGrads, wStash;
  /// Received payloads by (phase, stage, microbatch).
  std::map<std::tuple<int, int64_t, int64_t>, SmallVector<Value>> received;
  llvm::MapVector<Value, Value> gradSums; // model param -> running sum
  Value lossSum;
  func::FuncOp sendFn, recvFn, beginFn, endFn;
};
} // namespace

Value RankLowering::sliceData(Value stacked, int64_t mb) {
  auto type = cast<RankedTensorType>(stacked.getType());
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)),
      sizes, strides(rank, b.getIndexAttr(1));
  offsets[0] = b.getIndexAttr(mb);
  sizes.push_back(b.getIndexAttr(1));
  for (int64_t d = 1; d < rank; ++d)
    sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
  auto sliceType = RankedTensorType::get(type.getShape().drop_front(),
                                         type.getElementType());
  return tensor::ExtractSliceOp::create(b, stacked.getLoc(), sliceType,
                                        stacked, offsets, sizes, strides);
}

void RankLowering::callFunction(const Outlined &fn, ValueRange args,
                                SmallVectorImpl<Value> &results) {
  auto call = func::CallOp::create(b, fn.fn.getLoc(), fn.fn, args);
  results.clear();
  for (auto [isArg, index] : fn.sources)
    results.push_back(isArg ? args[index] : call.getResult(index));
}

FailureOr<SmallVector<Value>>
RankLowering::cotangentsOf(Location loc, int64_t s, int64_t mb) {
  const StageFunctions &fns = stages[s];
  if (s + 1 == static_cast<int64_t>(stages.size())) {
    // The loss of a step is the mean over microbatches: seed with 1/M.
    SmallVector<Value> seeds;
    for (Type t : fns.stage.getResultTypes()) {
      auto type = cast<RankedTensorType>(t);
      seeds.push_back(arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(
              type, b.getFloatAttr(type.getElementType(),
                                   1.0 / static_cast<double>(
                                             numMicrobatches)))));
    }
    return seeds;
  }
  if (auto it = inputGrads.find({s + 1, mb}); it != inputGrads.end())
    return it->second;
  for (int phase : {static_cast<int>(sched::Phase::B),
                    static_cast<int>(sched::Phase::BW)})
    if (auto it = received.find({phase, s + 1, mb}); it != received.end())
      return it->second;
  return emitError(loc) << "rank " << rank << " runs the backward of stage "
                        << s << " microbatch " << mb
                        << " before the gradient from stage " << s + 1
                        << " is computed or received";
}

LogicalResult RankLowering::runForward(Location loc, int64_t s, int64_t mb) {
  const StageFunctions &fns = stages[s];
  pipe::StageOp stage = fns.stage;
  SmallVector<Value> args;
  if (!stage.getInputs().empty()) {
    SmallVector<Value> inputs;
    if (auto it = activations.find({s - 1, mb}); it != activations.end())
      inputs = it->second;
    else if (auto it = received.find(
                 {static_cast<int>(sched::Phase::F), s - 1, mb});
             it != received.end())
      inputs = it->second;
    else
      return emitError(loc) << "rank " << rank << " runs F of stage " << s
                            << " microbatch " << mb
                            << " before its input is computed or received";
    args.append(inputs);
  }
  for (Value d : stage.getData())
    args.push_back(sliceData(argMap.lookup(d), mb));
  for (Value p : stage.getParams())
    args.push_back(argMap.lookup(p));
  SmallVector<Value> results;
  callFunction(fns.forward, args, results);
  ArrayRef<Value> all(results);
  activations[{s, mb}].assign(all.begin(), all.begin() + fns.numResults);
  stash[{s, mb}].assign(all.begin() + fns.numResults, all.end());
  if (s + 1 == static_cast<int64_t>(stages.size()))
    lossSum = autodiff::buildAdd(b, loc, lossSum, results.front());
  return success();
}

void RankLowering::accumulateGrads(int64_t s, ValueRange grads) {
  const StageFunctions &fns = stages[s];
  ValueRange params = fns.stage.getParams();
  if (params.empty())
    return;
  if (!gradSums.count(params.front())) {
    for (auto [param, grad] : llvm::zip(params, grads))
      gradSums[param] = grad;
    return;
  }
  Location loc = fns.stage.getLoc();
  if (!fns.addGrads) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(step);
    SmallVector<Type> types(params.getTypes());
    SmallVector<Type> argTypes(types);
    argTypes.append(types);
    fns.addGrads = func::FuncOp::create(
        b, loc, ("zb_stage" + Twine(s) + "_add_grads").str(),
        FunctionType::get(b.getContext(), argTypes, types));
    fns.addGrads.setPrivate();
    Block *entry = fns.addGrads.addEntryBlock();
    b.setInsertionPointToStart(entry);
    SmallVector<Value> sums;
    for (size_t i = 0, e = types.size(); i < e; ++i)
      sums.push_back(autodiff::buildAdd(b, loc, entry->getArgument(i),
                                        entry->getArgument(e + i)));
    func::ReturnOp::create(b, loc, sums);
  }
  SmallVector<Value> args;
  for (Value param : params)
    args.push_back(gradSums.lookup(param));
  args.append(grads.begin(), grads.end());
  auto call = func::CallOp::create(b, loc, fns.addGrads, args);
  for (auto [param, sum] : llvm::zip(params, call.getResults()))
    gradSums[param] = sum;
}

LogicalResult RankLowering::runBackwardInput(Location loc, int64_t s,
                                             int64_t mb, bool fused) {
  const StageFunctions &fns = stages[s];
  auto it = stash.find({s, mb});
  if (it == stash.end())
    return emitError(loc) << "rank " << rank << " runs the backward of stage "
                          << s << " microbatch " << mb << " before its F";
  FailureOr<SmallVector<Value>> cotangents = cotangentsOf(loc, s, mb);
  if (failed(cotangents))
    return failure();
  SmallVector<Value> args(it->second);
  args.append(*cotangents);
  SmallVector<Value> results;
  unsigned numInputs = fns.stage.getInputs().size();
  if (fns.backward) {
    if (!fused)
      return emitError(loc) << "stage " << s
                            << " is not split into B and W; its schedule "
                               "must use the fused backward (BW)";
    callFunction(fns.backward, args, results);
    inputGrads[{s, mb}].assign(results.begin(), results.begin() + numInputs);
    accumulateGrads(s, ValueRange(results).drop_front(numInputs));
    stash.erase(it);
    return success();
  }
  callFunction(fns.backwardInput, args, results);
  inputGrads[{s, mb}].assign(results.begin(), results.begin() + numInputs);
  wStash[{s, mb}].assign(results.begin() + numInputs, results.end());
  stash.erase(it);
  if (fused)
    return runBackwardWeight(loc, s, mb);
  return success();
}

LogicalResult RankLowering::runBackwardWeight(Location loc, int64_t s,
                                              int64_t mb) {
  auto it = wStash.find({s, mb});
  if (it == wStash.end())
    return emitError(loc) << "rank " << rank << " runs W of stage " << s
                          << " microbatch " << mb << " before its B";
  SmallVector<Value> grads;
  callFunction(stages[s].backwardWeight, it->second, grads);
  accumulateGrads(s, grads);
  wStash.erase(it);
  return success();
}

FailureOr<func::FuncOp> RankLowering::lower(sched::ProgramOp program,
                                            int64_t r, Region &region) {
  rank = r;
  MLIRContext *ctx = b.getContext();
  ModuleOp module = model->getParentOfType<ModuleOp>();
  sendFn = module.lookupSymbol<func::FuncOp>("zbrt_send_f32");
  recvFn = module.lookupSymbol<func::FuncOp>("zbrt_recv_f32");
  beginFn = module.lookupSymbol<func::FuncOp>("zbrt_action_begin");
  endFn = module.lookupSymbol<func::FuncOp>("zbrt_action_end");

  // Signature: this rank's parameters (model order), then all data.
  SmallVector<Value> params, data;
  llvm::SetVector<Value> rankParams;
  for (const StageFunctions &fns : stages)
    if (fns.stage.getRank() == static_cast<uint64_t>(r))
      rankParams.insert(fns.stage.getParams().begin(),
                        fns.stage.getParams().end());
  SmallVector<Attribute> paramNames;
  SmallVector<Type> argTypes, dataTypes, resultTypes;
  auto lossType = RankedTensorType::get({}, b.getF32Type());
  resultTypes.push_back(lossType);
  for (BlockArgument arg : model.getArguments()) {
    Attribute name = model.getArgAttr(arg.getArgNumber(), kParamAttr);
    if (name) {
      if (!rankParams.contains(arg))
        continue;
      params.push_back(arg);
      paramNames.push_back(name);
      argTypes.push_back(arg.getType());
      resultTypes.push_back(arg.getType());
      continue;
    }
    auto type = cast<RankedTensorType>(arg.getType());
    SmallVector<int64_t> shape = {numMicrobatches};
    shape.append(type.getShape().begin(), type.getShape().end());
    data.push_back(arg);
    dataTypes.push_back(RankedTensorType::get(shape, type.getElementType()));
  }
  argTypes.append(dataTypes);

  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(model);
  step = func::FuncOp::create(
      b, program.getLoc(), ("zb_rank" + Twine(r) + "_step").str(),
      FunctionType::get(ctx, argTypes, resultTypes));
  step->setAttr("zb.rank", b.getI64IntegerAttr(r));
  step->setAttr("zb.params", b.getArrayAttr(paramNames));
  step->setAttr("zb.microbatches", b.getI64IntegerAttr(numMicrobatches));
  Block *entry = step.addEntryBlock();
  for (auto [v, arg] : llvm::zip(llvm::concat<Value>(params, data),
                                 entry->getArguments()))
    argMap[v] = arg;
  b.setInsertionPointToEnd(entry);

  for (Operation &op : region.front()) {
    Location loc = op.getLoc();
    if (auto compute = dyn_cast<sched::ComputeOp>(op)) {
      int64_t s = compute.getStage();
      if (compute.getPhase() == sched::Phase::Optimizer)
        continue; // The runtime steps the optimizer after the step.
      int64_t mb = *compute.getMicrobatch();
      // The runtime records every action (zbrt_action_begin/end).
      SmallVector<Value> action = {
          arith::ConstantIntOp::create(
              b, loc,
              static_cast<int64_t>(sched::toActionKind(compute.getPhase())),
              32),
          arith::ConstantIntOp::create(b, loc, s, 64),
          arith::ConstantIntOp::create(b, loc, mb, 64)};
      func::CallOp::create(b, loc, beginFn, action);
      LogicalResult result = success();
      switch (compute.getPhase()) {
      case sched::Phase::F:
        result = runForward(loc, s, mb);
        break;
      case sched::Phase::B:
        result = runBackwardInput(loc, s, mb, /*fused=*/false);
        break;
      case sched::Phase::BW:
        result = runBackwardInput(loc, s, mb, /*fused=*/true);
        break;
      case sched::Phase::W:
        result = runBackwardWeight(loc, s, mb);
        break;
      case sched::Phase::Optimizer:
        break;
      }
      if (failed(result))
        return failure();
      func::CallOp::create(b, loc, endFn, action);
      continue;
    }
    bool isSend = isa<sched::SendOp>(op);
    auto fields = [](auto t) {
      return std::make_tuple(t.getPhase(), static_cast<int64_t>(t.getStage()),
                             static_cast<int64_t>(t.getMicrobatch()),
                             static_cast<int64_t>(t.getPeer()),
                             static_cast<int64_t>(t.getChannel()));
    };
    auto [phase, s, mb, peer, channel] =
        isSend ? fields(cast<sched::SendOp>(op))
               : fields(cast<sched::RecvOp>(op));
    bool isForward = phase == sched::Phase::F;
    Value peerValue = arith::ConstantIntOp::create(b, loc, peer, 64);
    Value channelValue = arith::ConstantIntOp::create(b, loc, channel, 64);
    if (isSend) {
      auto &payload = isForward ? activations : inputGrads;
      auto it = payload.find({s, mb});
      if (it == payload.end())
        return op.emitError("sends a value rank ")
               << r << " has not computed yet";
      for (Value v : it->second) {
        auto type = cast<RankedTensorType>(v.getType());
        if (!type.getElementType().isF32())
          return op.emitError("only f32 values can be transferred, got ")
                 << type;
        Value buffer = bufferization::ToBufferOp::create(
            b, loc, MemRefType::get(type.getShape(), type.getElementType()),
            v, /*read_only=*/true);
        Value unranked = memref::CastOp::create(
            b, loc, UnrankedMemRefType::get(type.getElementType(), 0),
            buffer);
        func::CallOp::create(b, loc, sendFn,
                             ValueRange{unranked, peerValue, channelValue});
      }
      continue;
    }
    TypeRange types = isForward
                          ? TypeRange(stages[s].stage.getResultTypes())
                          : TypeRange(stages[s].stage.getInputs().getTypes());
    SmallVector<Value> values;
    for (Type t : types) {
      auto type = cast<RankedTensorType>(t);
      if (!type.getElementType().isF32())
        return op.emitError("only f32 values can be transferred, got ")
               << type;
      Value buffer = memref::AllocOp::create(
          b, loc, MemRefType::get(type.getShape(), type.getElementType()));
      Value unranked = memref::CastOp::create(
          b, loc, UnrankedMemRefType::get(type.getElementType(), 0), buffer);
      func::CallOp::create(b, loc, recvFn,
                           ValueRange{unranked, peerValue, channelValue});
      values.push_back(bufferization::ToTensorOp::create(
          b, loc, type, buffer, /*restrict=*/true, /*writable=*/true));
    }
    received[{static_cast<int>(phase), s, mb}] = std::move(values);
  }

  Location loc = program.getLoc();
  if (!stash.empty() || !wStash.empty())
    return program.emitError("rank ")
           << r << "'s program leaves a backward unfinished";
  SmallVector<Value> results;
  if (lossSum) {
    // Mean over the microbatches.
    Value empty = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{},
                                          b.getF32Type());
    Value scale = arith::ConstantOp::create(
        b, loc, b.getF32FloatAttr(1.0f / static_cast<float>(numMicrobatches)));
    results.push_back(
        linalg::GenericOp::create(
            b, loc, TypeRange{lossType}, ValueRange{lossSum},
            ValueRange{empty},
            ArrayRef<AffineMap>{AffineMap::get(0, 0, ctx),
                                AffineMap::get(0, 0, ctx)},
            ArrayRef<utils::IteratorType>{},
            [&](OpBuilder &nb, Location nloc, ValueRange args) {
              linalg::YieldOp::create(
                  nb, nloc,
                  Value(arith::MulFOp::create(nb, nloc, args[0], scale)));
            })
            .getResult(0));
  } else {
    results.push_back(autodiff::buildZeros(b, loc, lossType));
  }
  for (Value p : params) {
    Value sum = gradSums.lookup(p);
    if (!sum)
      sum = autodiff::buildZeros(b, loc, cast<RankedTensorType>(p.getType()));
    results.push_back(sum);
  }
  func::ReturnOp::create(b, loc, results);
  return step;
}

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

/// Records what the runtime needs to know of the stages as the module
/// attribute `zb.stages`: per stage (in stage order) its rank and its
/// cost_f/b/w and mem_b/w (0 where absent).
static void recordStageTable(ModuleOp module, ArrayRef<pipe::StageOp> ops) {
  SmallVector<pipe::StageOp> stages(ops.begin(), ops.end());
  llvm::sort(stages, [](pipe::StageOp a, pipe::StageOp b) {
    return a.getStage() < b.getStage();
  });
  SmallVector<int64_t> ranks, memB, memW;
  SmallVector<double> costF, costB, costW;
  for (pipe::StageOp stage : stages) {
    ranks.push_back(stage.getRank());
    auto cost = [](FloatAttr a) { return a ? a.getValueAsDouble() : 0.0; };
    auto mem = [](IntegerAttr a) { return a ? a.getInt() : int64_t(0); };
    costF.push_back(cost(stage.getCostFAttr()));
    costB.push_back(cost(stage.getCostBAttr()));
    costW.push_back(cost(stage.getCostWAttr()));
    memB.push_back(mem(stage.getMemBAttr()));
    memW.push_back(mem(stage.getMemWAttr()));
  }
  Builder b(module.getContext());
  module->setAttr(
      "zb.stages",
      b.getDictionaryAttr({b.getNamedAttr("rank", b.getDenseI64ArrayAttr(ranks)),
                           b.getNamedAttr("cost_f", b.getDenseF64ArrayAttr(costF)),
                           b.getNamedAttr("cost_b", b.getDenseF64ArrayAttr(costB)),
                           b.getNamedAttr("cost_w", b.getDenseF64ArrayAttr(costW)),
                           b.getNamedAttr("mem_b", b.getDenseI64ArrayAttr(memB)),
                           b.getNamedAttr("mem_w", b.getDenseI64ArrayAttr(memW))}));
}

namespace {
struct LowerToRuntimePass
    : zb::impl::ZBLowerToRuntimeBase<LowerToRuntimePass> {
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

    OpBuilder b(model);
    // The runtime's transfer functions.
    MLIRContext *ctx = &getContext();
    auto unranked = UnrankedMemRefType::get(Float32Type::get(ctx), 0);
    auto i64 = IntegerType::get(ctx, 64);
    for (StringRef name : {"zbrt_send_f32", "zbrt_recv_f32"}) {
      if (module.lookupSymbol(name))
        continue;
      auto fn = func::FuncOp::create(
          b, model.getLoc(), name,
          FunctionType::get(ctx, {unranked, i64, i64}, {}));
      fn.setPrivate();
      fn->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  UnitAttr::get(ctx));
    }

    auto i32 = IntegerType::get(ctx, 32);
    for (StringRef name : {"zbrt_action_begin", "zbrt_action_end"}) {
      if (module.lookupSymbol(name))
        continue;
      func::FuncOp::create(b, model.getLoc(), name,
                           FunctionType::get(ctx, {i32, i64, i64}, {}))
          .setPrivate();
    }
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
        fns.backwardWeight = outline(b, stage.getBackwardWeight(),
                                     prefix + "backward_weight", unused,
                                     unused);
      } else {
        fns.backward = outline(b, stage.getBackward(), prefix + "backward",
                               unused, unused);
      }
    }

    int64_t numMicrobatches = program.getNumMicrobatches();
    for (auto [r, region] : llvm::enumerate(program.getRanks())) {
      RankLowering lowering(b, model, stages, numMicrobatches);
      if (failed(lowering.lower(program, r, region)))
        return signalPassFailure();
    }
    program.erase();
    model.erase();
  }
};
} // namespace
