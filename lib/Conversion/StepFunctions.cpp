//===- StepFunctions.cpp - Rank programs to step functions ----------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//
//
// A rank's program is first planned symbolically: which function each
// action calls with which values (parameters, data slices, seeds, or values
// earlier actions produced), and from which action to which every value
// lives; a program that uses a value before it exists is rejected here.
// Then one of two emitters builds the step function:
//
// - the loop form: actions that do the same thing to another microbatch
//   share a template; values that outlive their action get an offset in one
//   arena (best fit, in program order). The step function loops over a
//   constant table with one row per action, [template, microbatch,
//   offsets...], and switches to the template's code, which reads its
//   inputs from and writes its results to views of the arena;
// - the unrolled form: every action inline, every value an SSA value.
//
//===----------------------------------------------------------------------===//

#include "StepFunctions.h"

#include "zb/Autodiff/Autodiff.h"
#include "zb/Conversion/ArenaPlanner.h"
#include "zb/Dialect/Sched/ScheduleInterop.h"
#include "zb/Dialect/ZB/ZBDialect.h"
#include "zb/Model/Model.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <map>

using namespace mlir;
using namespace zb;
using namespace zb::detail;

namespace {
/// Where an action's operand comes from.
struct Ref {
  enum Kind : uint8_t { Param, Data, Seed, Value };
  Kind kind;
  /// Param, Data: the model argument's number; Seed: the last stage's
  /// result it seeds; Value: the planned value's id.
  int64_t index;
};

/// One call an action makes.
struct Call {
  enum Fn : uint8_t { Forward, Backward, BackwardInput, BackwardWeight };
  Fn fn;
  SmallVector<Ref> args;
  /// The planned value of each of the function's results.
  SmallVector<int64_t> results;
  /// The region's yielded values, in terms of `args` and `results`.
  SmallVector<Ref> yielded;
  /// Where the gradients start in `yielded`, -1 without any.
  int64_t gradsFrom = -1;
};

/// One action of the rank's program.
struct Action {
  Operation *op;
  enum Kind : uint8_t { Compute, Send, Recv, Reduce } kind;
  sched::Phase phase;
  /// Reduce: stage -1, and `peer` numbers the rank's reductions.
  int64_t stage, microbatch, peer = 0, channel = 0;
  SmallVector<Call, 2> calls;
  /// The loss a last-stage F adds to the step's sum.
  std::optional<Ref> loss;
  /// Send: the values sent; Recv: the values received (produced here).
  SmallVector<Ref> payload;
  /// Reduce: the parameters (model argument numbers) whose gradient sums
  /// are summed over `group`.
  SmallVector<int64_t> reduced;
  SmallVector<int64_t> group;
};

/// A tensor value some action produces.
struct PlannedValue {
  RankedTensorType type;
  int64_t producer, lastUse;
  /// Where in the producer: call and result index, or payload index
  /// (call = -1).
  int64_t call, position;
  /// Its byte offset in the arena; -1 for a value no later action reads.
  int64_t offset = -1;
};

/// Which operand of an action a table column holds.
struct Slot {
  enum Where : uint8_t { CallArg, CallResult, Loss, Payload } where;
  int64_t call, position;
  int64_t value;
};

/// Plans one rank's program and emits its step function in either form.
class RankLowering {
public:
  RankLowering(OpBuilder &b, func::FuncOp model,
               ArrayRef<StageFunctions> stages, int64_t numMicrobatches)
      : b(b), model(model), stages(stages), numMicrobatches(numMicrobatches) {}

  LogicalResult lower(sched::ProgramOp program, int64_t rank, Region &region,
                      bool unroll);

private:
  // Planning.
  LogicalResult plan(Region &region);
  LogicalResult planForward(Action &a);
  LogicalResult planBackwardInput(Action &a, bool fused);
  LogicalResult planBackwardWeight(Action &a);
  LogicalResult planReduction(Action &a, sched::AllReduceOp reduce);
  FailureOr<SmallVector<Ref>> cotangentsOf(const Action &a);
  Call &addCall(Action &a, Call::Fn fn, const Outlined &outlined,
                ArrayRef<Ref> args);
  void use(ArrayRef<Ref> refs);
  int64_t newValue(Type type, int64_t call, int64_t position);
  int64_t planArena();
  SmallVector<Slot> slotsOf(const Action &a) const;
  SmallVector<int64_t> signatureOf(const Action &a) const;

  // Emission.
  void lookUpRuntime();
  LogicalResult emitLoop(sched::ProgramOp program);
  LogicalResult emitUnrolled(sched::ProgramOp program);
  void emitTemplate(const Action &a, Value row);
  void emitUnrolledAction(const Action &a);
  void emitReduction(const Action &a, llvm::function_ref<Value(Value)> bufferOf,
                     llvm::function_ref<void(Value, Value)> after = nullptr);
  void emitWaitForReductions();
  void emitCall(const Action &a, const Call &c, ArrayRef<Value> outs = {});
  Value offsetOf(const Slot &slot);
  Value viewOf(const PlannedValue &v, Value offset, bool out);
  Value tensorOf(const Ref &ref, const Action &a);
  Value sliceData(Value stacked, OpFoldResult mb);

  OpBuilder &b;
  func::FuncOp model;
  ArrayRef<StageFunctions> stages;
  int64_t numMicrobatches;
  int64_t rank = 0;

  // The plan.
  std::vector<Action> actions;
  std::vector<PlannedValue> values;
  int64_t current = 0;                     // the action being planned
  using Key = std::pair<int64_t, int64_t>; // (stage, microbatch)
  std::map<Key, SmallVector<Ref>> activations, stash, inputGrads, wStash;
  std::map<std::tuple<int, int64_t, int64_t>, SmallVector<Ref>> received;

  // Emission state.
  bool unroll = false;
  func::FuncOp step;
  DenseMap<Value, Value> argMap;
  Value arena, table, mbIndex, mbI64, rowIndex;
  /// Value id -> its SSA value (in a template, or anywhere when unrolled).
  DenseMap<int64_t, Value> local;
  /// Unrolled: data slices by (model argument, microbatch).
  std::map<std::pair<int64_t, int64_t>, Value> dataSlices;
  /// Unrolled: the running sums, the first one a microbatch's gradient.
  llvm::MapVector<Value, Value> gradSums;
  Value lossSum;
  DenseMap<int64_t, int64_t> columnOf; // slotKey -> table column
  llvm::MapVector<Value, Value> sums;  // model param -> its sum buffer
  Value lossBuffer;
  func::FuncOp sendFn, recvFn, beginFn, endFn, groupSumFn, replicaMeanFn,
      waitSumsFn;
  int64_t numReductions = 0;
};
} // namespace

//===----------------------------------------------------------------------===//
// What both forms build
//===----------------------------------------------------------------------===//

/// The stage's `zb_stage<s>_add_grads`, created before `before` on first
/// use. `inPlace`: the sums are the `outs` of the additions, so that
/// bufferization adds into the caller's sum buffers (the loop form);
/// otherwise each sum is a new tensor (the unrolled form, whose chains of
/// sums bufferization would otherwise have to analyse for in-place writes
/// across the whole step).
static func::FuncOp getAddGrads(OpBuilder &b, const StageFunctions &fns,
                                int64_t s, Operation *before, bool inPlace) {
  if (fns.addGrads)
    return fns.addGrads;
  ValueRange params = fns.stage.getParams();
  Location loc = fns.stage.getLoc();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(before);
  SmallVector<Type> types(params.getTypes());
  SmallVector<Type> argTypes(types);
  argTypes.append(types);
  fns.addGrads =
      func::FuncOp::create(b, loc, ("zb_stage" + Twine(s) + "_add_grads").str(),
                           FunctionType::get(b.getContext(), argTypes, types));
  fns.addGrads.setPrivate();
  Block *entry = fns.addGrads.addEntryBlock();
  b.setInsertionPointToStart(entry);
  SmallVector<Value> sums;
  for (size_t i = 0, e = types.size(); i < e; ++i) {
    Value sum = entry->getArgument(i), grad = entry->getArgument(e + i);
    sums.push_back(inPlace ? autodiff::buildAddInto(b, loc, sum, grad)
                           : autodiff::buildAdd(b, loc, sum, grad));
  }
  func::ReturnOp::create(b, loc, sums);
  return fns.addGrads;
}

namespace {
/// An empty `@zb_rank<r>_step(params of rank r..., data...) -> (loss,
/// grads...)`: `argMap` maps the model's arguments to its arguments,
/// `params` lists the rank's parameters (model arguments) in order.
struct StepFunction {
  func::FuncOp fn;
  DenseMap<Value, Value> argMap;
  SmallVector<Value> params;
};
} // namespace

/// Creates rank `r`'s empty step function, with its attributes, before
/// `model`.
static StepFunction createStepFunction(OpBuilder &b, func::FuncOp model,
                                       ArrayRef<StageFunctions> stages,
                                       int64_t r, int64_t numMicrobatches,
                                       Location loc) {
  MLIRContext *ctx = b.getContext();
  // Signature: this rank's parameters (model order), then all data.
  StepFunction result;
  SmallVector<Value> data;
  llvm::SetVector<Value> rankParams;
  for (const StageFunctions &fns : stages)
    if (fns.stage.getRank() == static_cast<uint64_t>(r))
      rankParams.insert(fns.stage.getParams().begin(),
                        fns.stage.getParams().end());
  SmallVector<Attribute> paramNames;
  SmallVector<Type> argTypes, dataTypes, resultTypes;
  resultTypes.push_back(RankedTensorType::get({}, b.getF32Type()));
  for (BlockArgument arg : model.getArguments()) {
    Attribute name = model.getArgAttr(arg.getArgNumber(), kParamAttr);
    if (name) {
      if (!rankParams.contains(arg))
        continue;
      result.params.push_back(arg);
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
  func::FuncOp step =
      func::FuncOp::create(b, loc, ("zb_rank" + Twine(r) + "_step").str(),
                           FunctionType::get(ctx, argTypes, resultTypes));
  step->setAttr(ZBDialect::kRankAttrName, b.getI64IntegerAttr(r));
  step->setAttr(ZBDialect::kParamsAttrName, b.getArrayAttr(paramNames));
  step->setAttr(ZBDialect::kMicrobatchesAttrName,
                b.getI64IntegerAttr(numMicrobatches));
  Block *entry = step.addEntryBlock();
  for (auto [v, arg] : llvm::zip(llvm::concat<Value>(result.params, data),
                                 entry->getArguments()))
    result.argMap[v] = arg;
  result.fn = step;
  return result;
}

/// `lossSum / numMicrobatches` as a 0-d tensor.
static Value buildLossMean(OpBuilder &b, Location loc, Value lossSum,
                           int64_t numMicrobatches) {
  MLIRContext *ctx = b.getContext();
  auto lossType = RankedTensorType::get({}, b.getF32Type());
  Value empty =
      tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, b.getF32Type());
  Value scale = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(1.0f / static_cast<float>(numMicrobatches)));
  return linalg::GenericOp::create(
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
      .getResult(0);
}

/// The constant seed of the last stage's backward: 1/M of `type`.
static Value buildSeed(OpBuilder &b, Location loc, RankedTensorType type,
                       int64_t numMicrobatches) {
  return arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(
          type, b.getFloatAttr(type.getElementType(),
                               1.0 / static_cast<double>(numMicrobatches))));
}

//===----------------------------------------------------------------------===//
// Planning
//===----------------------------------------------------------------------===//

int64_t RankLowering::newValue(Type type, int64_t call, int64_t position) {
  values.push_back(
      {cast<RankedTensorType>(type), current, current, call, position});
  return static_cast<int64_t>(values.size()) - 1;
}

/// Whether a value of `type` can live in the arena: a tensor of static
/// shape with integer or float elements.
static bool isStorable(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() &&
         tensor.getElementType().isIntOrFloat();
}

void RankLowering::use(ArrayRef<Ref> refs) {
  for (const Ref &r : refs)
    if (r.kind == Ref::Value)
      values[r.index].lastUse = std::max(values[r.index].lastUse, current);
}

Call &RankLowering::addCall(Action &a, Call::Fn fn, const Outlined &outlined,
                            ArrayRef<Ref> args) {
  Call c;
  c.fn = fn;
  c.args.assign(args.begin(), args.end());
  use(args);
  int64_t callIndex = static_cast<int64_t>(a.calls.size());
  for (auto [i, t] : llvm::enumerate(outlined.fn.getResultTypes()))
    c.results.push_back(newValue(t, callIndex, i));
  for (auto [isArg, index] : outlined.sources)
    c.yielded.push_back(isArg ? args[index]
                              : Ref{Ref::Value, c.results[index]});
  a.calls.push_back(std::move(c));
  return a.calls.back();
}

/// The model argument `v` is, or failure with a diagnostic.
static FailureOr<int64_t> argumentNumber(Value v, func::FuncOp model) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &model.getBody().front())
    return emitError(v.getLoc(), "a stage's data or parameter is not an "
                                 "argument of '")
           << model.getSymName() << "'";
  return static_cast<int64_t>(arg.getArgNumber());
}

LogicalResult RankLowering::planForward(Action &a) {
  int64_t s = a.stage, mb = a.microbatch;
  const StageFunctions &fns = stages[s];
  pipe::StageOp stage = fns.stage;
  SmallVector<Ref> args;
  if (!stage.getInputs().empty()) {
    if (auto it = activations.find({s - 1, mb}); it != activations.end())
      args = it->second;
    else if (auto it =
                 received.find({static_cast<int>(sched::Phase::F), s - 1, mb});
             it != received.end())
      args = it->second;
    else
      return emitError(a.op->getLoc())
             << "rank " << rank << " runs F of stage " << s << " microbatch "
             << mb << " before its input is computed or received";
  }
  for (Value d : stage.getData()) {
    FailureOr<int64_t> n = argumentNumber(d, model);
    if (failed(n))
      return failure();
    args.push_back({Ref::Data, *n});
  }
  for (Value p : stage.getParams()) {
    FailureOr<int64_t> n = argumentNumber(p, model);
    if (failed(n))
      return failure();
    args.push_back({Ref::Param, *n});
  }
  Call &c = addCall(a, Call::Forward, fns.forward, args);
  ArrayRef<Ref> all(c.yielded);
  activations[{s, mb}].assign(all.begin(), all.begin() + fns.numResults);
  stash[{s, mb}].assign(all.begin() + fns.numResults, all.end());
  if (s + 1 == static_cast<int64_t>(stages.size())) {
    a.loss = all.front();
    use(all.front());
  }
  return success();
}

FailureOr<SmallVector<Ref>> RankLowering::cotangentsOf(const Action &a) {
  int64_t s = a.stage, mb = a.microbatch;
  if (s + 1 == static_cast<int64_t>(stages.size())) {
    SmallVector<Ref> seeds;
    for (unsigned i = 0, e = stages[s].stage.getNumResults(); i < e; ++i)
      seeds.push_back({Ref::Seed, i});
    return seeds;
  }
  if (auto it = inputGrads.find({s + 1, mb}); it != inputGrads.end())
    return it->second;
  for (int phase :
       {static_cast<int>(sched::Phase::B), static_cast<int>(sched::Phase::BW)})
    if (auto it = received.find({phase, s + 1, mb}); it != received.end())
      return it->second;
  return emitError(a.op->getLoc())
         << "rank " << rank << " runs the backward of stage " << s
         << " microbatch " << mb << " before the gradient from stage " << s + 1
         << " is computed or received";
}

LogicalResult RankLowering::planBackwardInput(Action &a, bool fused) {
  int64_t s = a.stage, mb = a.microbatch;
  const StageFunctions &fns = stages[s];
  auto it = stash.find({s, mb});
  if (it == stash.end())
    return emitError(a.op->getLoc())
           << "rank " << rank << " runs the backward of stage " << s
           << " microbatch " << mb << " before its F";
  FailureOr<SmallVector<Ref>> cotangents = cotangentsOf(a);
  if (failed(cotangents))
    return failure();
  SmallVector<Ref> args(it->second);
  args.append(*cotangents);
  unsigned numInputs = fns.stage.getInputs().size();
  if (fns.backward) {
    if (!fused)
      return emitError(a.op->getLoc())
             << "stage " << s
             << " is not split into B and W; its schedule must use the fused "
                "backward (BW)";
    Call &c = addCall(a, Call::Backward, fns.backward, args);
    inputGrads[{s, mb}].assign(c.yielded.begin(),
                               c.yielded.begin() + numInputs);
    if (!fns.stage.getParams().empty()) {
      c.gradsFrom = numInputs;
      use(ArrayRef<Ref>(c.yielded).drop_front(numInputs));
    }
    stash.erase(it);
    return success();
  }
  Call &c = addCall(a, Call::BackwardInput, fns.backwardInput, args);
  inputGrads[{s, mb}].assign(c.yielded.begin(), c.yielded.begin() + numInputs);
  wStash[{s, mb}].assign(c.yielded.begin() + numInputs, c.yielded.end());
  stash.erase(it);
  if (fused)
    return planBackwardWeight(a);
  return success();
}

LogicalResult RankLowering::planBackwardWeight(Action &a) {
  int64_t s = a.stage, mb = a.microbatch;
  auto it = wStash.find({s, mb});
  if (it == wStash.end())
    return emitError(a.op->getLoc())
           << "rank " << rank << " runs W of stage " << s << " microbatch "
           << mb << " before its B";
  SmallVector<Ref> args(it->second);
  Call &c = addCall(a, Call::BackwardWeight, stages[s].backwardWeight, args);
  if (!stages[s].stage.getParams().empty()) {
    c.gradsFrom = 0;
    use(c.yielded);
  }
  wStash.erase(it);
  return success();
}

LogicalResult RankLowering::planReduction(Action &a,
                                          sched::AllReduceOp reduce) {
  a.kind = Action::Reduce;
  a.phase = sched::Phase::W;
  a.stage = -1;
  a.microbatch = 0;
  a.peer = numReductions++;
  a.group.assign(reduce.getGroup().begin(), reduce.getGroup().end());
  llvm::SetVector<Value> rankParams;
  for (const StageFunctions &fns : stages)
    if (static_cast<int64_t>(fns.stage.getRank()) == rank)
      rankParams.insert(fns.stage.getParams().begin(),
                        fns.stage.getParams().end());
  for (Attribute attr : reduce.getParams()) {
    StringRef name = cast<StringAttr>(attr).getValue();
    std::optional<int64_t> found;
    for (BlockArgument arg : model.getArguments())
      if (model.getArgAttr(arg.getArgNumber(), kParamAttr) &&
          argName(model, arg.getArgNumber()) == name)
        found = arg.getArgNumber();
    if (!found || !rankParams.contains(model.getArgument(*found)))
      return reduce.emitOpError()
             << "reduces '" << name << "', which no stage of rank " << rank
             << " uses";
    auto type = cast<RankedTensorType>(model.getArgument(*found).getType());
    if (!type.getElementType().isF32())
      return reduce.emitOpError()
             << "reduces '" << name << "' of type " << type
             << "; only f32 gradients can be summed between ranks";
    a.reduced.push_back(*found);
  }
  return success();
}

LogicalResult RankLowering::plan(Region &region) {
  for (const StageFunctions &fns : stages) {
    if (static_cast<int64_t>(fns.stage.getRank()) != rank)
      continue;
    for (const Outlined *o :
         {&fns.forward, &fns.backward, &fns.backwardInput, &fns.backwardWeight})
      if (*o)
        for (Type t : o->fn.getResultTypes())
          if (!isStorable(t))
            return fns.stage.emitOpError("yields a value of type ")
                   << t
                   << ", which a step function cannot hold (tensors of "
                      "static shape with integer or float elements)";
  }
  for (Operation &op : region.front()) {
    Action a;
    a.op = &op;
    current = static_cast<int64_t>(actions.size());
    if (auto reduce = dyn_cast<sched::AllReduceOp>(op)) {
      if (failed(planReduction(a, reduce)))
        return failure();
      actions.push_back(std::move(a));
      continue;
    }
    if (auto compute = dyn_cast<sched::ComputeOp>(op)) {
      if (compute.getPhase() == sched::Phase::Optimizer)
        continue; // The runtime steps the optimizer after the step.
      a.kind = Action::Compute;
      a.phase = compute.getPhase();
      a.stage = compute.getStage();
      a.microbatch = *compute.getMicrobatch();
      if (a.stage >= static_cast<int64_t>(stages.size()) ||
          static_cast<int64_t>(stages[a.stage].stage.getRank()) != rank)
        return emitError(op.getLoc())
               << "rank " << rank << " runs stage " << a.stage
               << ", which is not one of its stages";
      LogicalResult result = success();
      switch (a.phase) {
      case sched::Phase::F:
        result = planForward(a);
        break;
      case sched::Phase::B:
        result = planBackwardInput(a, /*fused=*/false);
        break;
      case sched::Phase::BW:
        result = planBackwardInput(a, /*fused=*/true);
        break;
      case sched::Phase::W:
        result = planBackwardWeight(a);
        break;
      case sched::Phase::Optimizer:
        break;
      }
      if (failed(result))
        return failure();
      actions.push_back(std::move(a));
      continue;
    }
    auto fields = [](auto t) {
      return std::make_tuple(t.getPhase(), static_cast<int64_t>(t.getStage()),
                             static_cast<int64_t>(t.getMicrobatch()),
                             static_cast<int64_t>(t.getPeer()),
                             static_cast<int64_t>(t.getChannel()));
    };
    bool isSend = isa<sched::SendOp>(op);
    std::tie(a.phase, a.stage, a.microbatch, a.peer, a.channel) =
        isSend ? fields(cast<sched::SendOp>(op))
               : fields(cast<sched::RecvOp>(op));
    bool isForward = a.phase == sched::Phase::F;
    int64_t s = a.stage, mb = a.microbatch;
    if (isSend) {
      a.kind = Action::Send;
      auto &payload = isForward ? activations : inputGrads;
      auto it = payload.find({s, mb});
      if (it == payload.end())
        return op.emitError("sends a value rank ")
               << rank << " has not computed yet";
      a.payload = it->second;
      for (const Ref &r : a.payload) {
        Type t = r.kind == Ref::Value ? Type(values[r.index].type)
                                      : model.getArgument(r.index).getType();
        if (!cast<RankedTensorType>(t).getElementType().isF32())
          return op.emitError("only f32 values can be transferred, got ") << t;
      }
      use(a.payload);
    } else {
      a.kind = Action::Recv;
      TypeRange types = isForward
                            ? TypeRange(stages[s].stage.getResultTypes())
                            : TypeRange(stages[s].stage.getInputs().getTypes());
      for (auto [i, t] : llvm::enumerate(types)) {
        if (!cast<RankedTensorType>(t).getElementType().isF32())
          return op.emitError("only f32 values can be transferred, got ") << t;
        a.payload.push_back({Ref::Value, newValue(t, -1, i)});
      }
      received[{static_cast<int>(a.phase), s, mb}] = a.payload;
    }
    actions.push_back(std::move(a));
  }
  if (!stash.empty() || !wStash.empty())
    return region.getParentOp()->emitError("rank ")
           << rank << "'s program leaves a backward unfinished";
  // Every copy of a parameter shared between ranks is reduced (with
  // replicas, every parameter).
  auto program = cast<sched::ProgramOp>(region.getParentOp());
  if (std::optional<DictionaryAttr> shared = program.getParamStages()) {
    std::optional<ArrayRef<int64_t>> placement = program.getStageRanks();
    for (NamedAttribute entry : *shared) {
      auto users = cast<DenseI64ArrayAttr>(entry.getValue()).asArrayRef();
      bool mine = placement && llvm::any_of(users, [&](int64_t s) {
                    return (*placement)[s] == rank;
                  });
      bool reduced = llvm::any_of(actions, [&](const Action &a) {
        return a.kind == Action::Reduce &&
               llvm::any_of(a.reduced, [&](int64_t arg) {
                 return argName(model, arg) == entry.getName().getValue();
               });
      });
      if (mine && !reduced)
        return program.emitOpError()
               << "rank " << rank << " holds '" << entry.getName().getValue()
               << "', a parameter "
               << (program.getNumReplicas() > 1 ? "of replicated ranks"
                                                : "shared between ranks")
               << ", but never reduces its gradient (see --zb-insert-comm)";
    }
  }
  return success();
}

/// Bytes of one `type`, rounded up to a cache line.
static int64_t slotBytes(RankedTensorType type) {
  int64_t elementBytes =
      (type.getElementType().getIntOrFloatBitWidth() + 7) / 8;
  int64_t bytes = type.getNumElements() * elementBytes;
  return std::max<int64_t>(64, (bytes + 63) / 64 * 64);
}

/// Offsets every value that a later action reads (and every received
/// value) in one arena (zb::planArena). Returns the arena's size.
int64_t RankLowering::planArena() {
  // A later action reads it, or a receive writes it.
  auto needsSlot = [](const PlannedValue &v) {
    return v.lastUse > v.producer || v.call < 0;
  };
  SmallVector<ArenaValue> placed;
  SmallVector<size_t> ids;
  for (auto [id, v] : llvm::enumerate(values))
    if (needsSlot(v)) {
      placed.push_back({slotBytes(v.type), v.producer, v.lastUse});
      ids.push_back(id);
    }
  ArenaPlan plan = zb::planArena(placed);
  for (auto [i, id] : llvm::enumerate(ids))
    values[id].offset = plan.offsets[i];
  return plan.size;
}

/// The operands of `a` that live in the arena, in the order of the table's
/// columns: per call its arguments from earlier actions, then its results
/// that later actions read; the loss; the payload.
SmallVector<Slot> RankLowering::slotsOf(const Action &a) const {
  SmallVector<Slot> slots;
  int64_t self = &a - actions.data();
  auto earlier = [&](const Ref &r) {
    return r.kind == Ref::Value && values[r.index].producer != self;
  };
  for (auto [ci, c] : llvm::enumerate(a.calls)) {
    for (auto [ai, r] : llvm::enumerate(c.args))
      if (earlier(r))
        slots.push_back({Slot::CallArg, static_cast<int64_t>(ci),
                         static_cast<int64_t>(ai), r.index});
    for (auto [ri, id] : llvm::enumerate(c.results))
      if (values[id].offset >= 0)
        slots.push_back({Slot::CallResult, static_cast<int64_t>(ci),
                         static_cast<int64_t>(ri), id});
  }
  if (a.loss && earlier(*a.loss))
    slots.push_back({Slot::Loss, 0, 0, a.loss->index});
  for (auto [pi, r] : llvm::enumerate(a.payload))
    if (r.kind == Ref::Value)
      slots.push_back({Slot::Payload, 0, static_cast<int64_t>(pi), r.index});
  return slots;
}

/// What makes two actions one template: everything but the microbatch and
/// where their values live.
SmallVector<int64_t> RankLowering::signatureOf(const Action &a) const {
  int64_t self = &a - actions.data();
  SmallVector<int64_t> sig = {static_cast<int64_t>(a.kind),
                              static_cast<int64_t>(a.phase), a.stage, a.peer,
                              a.channel};
  // Earlier values by first appearance: [v, v] and [v, w] differ.
  DenseMap<int64_t, int64_t> ordinal;
  auto ref = [&](const Ref &r) {
    sig.push_back(static_cast<int64_t>(r.kind));
    if (r.kind != Ref::Value) {
      sig.push_back(r.index);
      return;
    }
    const PlannedValue &v = values[r.index];
    // A value of this action: which call and result; else from the arena.
    if (v.producer == self) {
      sig.append({v.call, v.position});
      return;
    }
    auto it = ordinal.try_emplace(r.index, ordinal.size()).first;
    sig.append({-2, it->second});
  };
  for (const Call &c : a.calls) {
    sig.append({static_cast<int64_t>(c.fn), static_cast<int64_t>(c.args.size()),
                c.gradsFrom});
    for (const Ref &r : c.args)
      ref(r);
    for (int64_t id : c.results)
      sig.push_back(values[id].offset >= 0);
    sig.push_back(static_cast<int64_t>(c.yielded.size()));
    for (const Ref &r : c.yielded)
      ref(r);
  }
  sig.push_back(a.loss.has_value());
  if (a.loss)
    ref(*a.loss);
  sig.push_back(static_cast<int64_t>(a.payload.size()));
  for (const Ref &r : a.payload)
    ref(r);
  return sig;
}

//===----------------------------------------------------------------------===//
// Emission
//===----------------------------------------------------------------------===//

Value RankLowering::sliceData(Value stacked, OpFoldResult mb) {
  auto type = cast<RankedTensorType>(stacked.getType());
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)), sizes,
      strides(rank, b.getIndexAttr(1));
  offsets[0] = mb;
  sizes.push_back(b.getIndexAttr(1));
  for (int64_t d = 1; d < rank; ++d)
    sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
  auto sliceType = RankedTensorType::get(type.getShape().drop_front(),
                                         type.getElementType());
  return tensor::ExtractSliceOp::create(b, stacked.getLoc(), sliceType, stacked,
                                        offsets, sizes, strides);
}

static int64_t slotKey(const Slot &s) {
  return (static_cast<int64_t>(s.where) << 56) | (s.call << 28) | s.position;
}

Value RankLowering::offsetOf(const Slot &slot) {
  Location loc = step.getLoc();
  auto it = columnOf.find(slotKey(slot));
  assert(it != columnOf.end() && "every slot has a column");
  int64_t column = it->second;
  Value c = arith::ConstantIndexOp::create(b, loc, column);
  Value offset = memref::LoadOp::create(b, loc, table, ValueRange{rowIndex, c});
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), offset);
}

Value RankLowering::viewOf(const PlannedValue &v, Value offset, bool out) {
  Location loc = step.getLoc();
  auto type = MemRefType::get(v.type.getShape(), v.type.getElementType());
  auto view = memref::ViewOp::create(b, loc, type, arena, offset, ValueRange{});
  if (out)
    view->setAttr(kOutSlotAttr, b.getUnitAttr());
  return view;
}

Value RankLowering::tensorOf(const Ref &ref, const Action &a) {
  Location loc = step.getLoc();
  switch (ref.kind) {
  case Ref::Param:
    return argMap.lookup(model.getArgument(ref.index));
  case Ref::Data: {
    Value stacked = argMap.lookup(model.getArgument(ref.index));
    if (!unroll)
      return sliceData(stacked, mbIndex);
    Value &slice = dataSlices[{ref.index, a.microbatch}];
    if (!slice)
      slice = sliceData(stacked, b.getIndexAttr(a.microbatch));
    return slice;
  }
  case Ref::Seed:
    return buildSeed(b, loc,
                     cast<RankedTensorType>(
                         stages[a.stage].stage.getResultTypes()[ref.index]),
                     numMicrobatches);
  case Ref::Value:
    break;
  }
  if (Value v = local.lookup(ref.index))
    return v;
  llvm_unreachable("a value from an earlier action is read through its slot");
}

/// The function `fn` of a stage.
static const Outlined &outlinedOf(const StageFunctions &fns, Call::Fn fn) {
  switch (fn) {
  case Call::Forward:
    return fns.forward;
  case Call::Backward:
    return fns.backward;
  case Call::BackwardInput:
    return fns.backwardInput;
  case Call::BackwardWeight:
    return fns.backwardWeight;
  }
  llvm_unreachable("unknown stage function");
}

/// Calls `c`'s function; its results become the values of `local` and, where
/// `outs` has a slot for one, are written there.
void RankLowering::emitCall(const Action &a, const Call &c,
                            ArrayRef<Value> outs) {
  Location loc = a.op->getLoc();
  SmallVector<Value> args;
  for (const Ref &r : c.args)
    args.push_back(tensorOf(r, a));
  auto call =
      func::CallOp::create(b, loc, outlinedOf(stages[a.stage], c.fn).fn, args);
  for (auto [ri, id] : llvm::enumerate(c.results)) {
    local[id] = call.getResult(ri);
    if (!outs.empty() && outs[ri])
      bufferization::MaterializeInDestinationOp::create(
          b, loc, Type(), call.getResult(ri), outs[ri], /*restrict=*/true,
          /*writable=*/true);
  }
}

/// The record of a computation: phase, stage, microbatch.
static SmallVector<Value> actionRecord(OpBuilder &b, Location loc,
                                       sched::Phase phase, int64_t stage,
                                       llvm::function_ref<Value()> microbatch) {
  Value kind = arith::ConstantIntOp::create(
      b, loc, static_cast<int64_t>(sched::toActionKind(phase)), 32);
  Value stageValue = arith::ConstantIntOp::create(b, loc, stage, 64);
  return {kind, stageValue, microbatch()};
}

/// Calls the runtime's send or receive of `a` on `bufferOf(i)` for each
/// value i of its payload, then `after(i, buffer)` if given.
static void transfer(OpBuilder &b, const Action &a, func::FuncOp fn,
                     llvm::function_ref<Value(size_t)> bufferOf,
                     llvm::function_ref<void(size_t, Value)> after = nullptr) {
  Location loc = a.op->getLoc();
  Value peerValue = arith::ConstantIntOp::create(b, loc, a.peer, 64);
  Value channelValue = arith::ConstantIntOp::create(b, loc, a.channel, 64);
  for (size_t i = 0, e = a.payload.size(); i < e; ++i) {
    Value buffer = bufferOf(i);
    auto type = cast<MemRefType>(buffer.getType());
    Value unranked = memref::CastOp::create(
        b, loc, UnrankedMemRefType::get(type.getElementType(), 0), buffer);
    func::CallOp::create(b, loc, fn,
                         ValueRange{unranked, peerValue, channelValue});
    if (after)
      after(i, buffer);
  }
}

/// A read-only buffer of tensor `t` for the runtime to send.
static Value bufferOf(OpBuilder &b, Location loc, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()), t,
      /*read_only=*/true);
}

void RankLowering::emitTemplate(const Action &a, Value row) {
  Location loc = a.op->getLoc();
  rowIndex = row;
  local.clear();
  columnOf.clear();
  SmallVector<Slot> slots = slotsOf(a);
  for (auto [i, slot] : llvm::enumerate(slots))
    columnOf[slotKey(slot)] = 2 + static_cast<int64_t>(i);

  if (a.kind == Action::Reduce) {
    emitReduction(a, [&](Value param) { return sums.lookup(param); });
    return;
  }
  if (a.kind != Action::Compute) {
    transfer(b, a, a.kind == Action::Send ? sendFn : recvFn, [&](size_t i) {
      const Ref &r = a.payload[i];
      if (r.kind != Ref::Value)
        return bufferOf(b, loc, tensorOf(r, a));
      Slot slot{Slot::Payload, 0, static_cast<int64_t>(i), r.index};
      return viewOf(values[r.index], offsetOf(slot), /*out=*/false);
    });
    return;
  }

  // A computation's operands from earlier actions, read from the arena.
  for (const Slot &slot : slots) {
    bool read = slot.where == Slot::CallArg || slot.where == Slot::Loss;
    if (!read || local.count(slot.value))
      continue;
    const PlannedValue &v = values[slot.value];
    local[slot.value] = bufferization::ToTensorOp::create(
        b, loc, v.type, viewOf(v, offsetOf(slot), /*out=*/false),
        /*restrict=*/true, /*writable=*/false);
  }
  // The runtime records every action (zbrt_action_begin/end).
  SmallVector<Value> record =
      actionRecord(b, loc, a.phase, a.stage, [&] { return mbI64; });
  func::CallOp::create(b, loc, beginFn, record);
  const StageFunctions &fns = stages[a.stage];
  for (auto [ci, c] : llvm::enumerate(a.calls)) {
    // The slots results go to, before the call that fills them.
    SmallVector<Value> outs;
    for (auto [ri, id] : llvm::enumerate(c.results)) {
      if (values[id].offset < 0) {
        outs.push_back(Value());
        continue;
      }
      Slot slot{Slot::CallResult, static_cast<int64_t>(ci),
                static_cast<int64_t>(ri), id};
      outs.push_back(viewOf(values[id], offsetOf(slot), /*out=*/true));
    }
    emitCall(a, c, outs);
    if (c.gradsFrom < 0)
      continue;
    // Add this microbatch's gradients to the sums, in place.
    ValueRange params = fns.stage.getParams();
    func::FuncOp addGrads =
        getAddGrads(b, fns, a.stage, step, /*inPlace=*/true);
    SmallVector<Value> addArgs;
    for (Value p : params)
      addArgs.push_back(bufferization::ToTensorOp::create(
          b, loc, cast<RankedTensorType>(p.getType()), sums.lookup(p),
          /*restrict=*/true, /*writable=*/true));
    for (const Ref &r : ArrayRef<Ref>(c.yielded).drop_front(c.gradsFrom))
      addArgs.push_back(tensorOf(r, a));
    auto add = func::CallOp::create(b, loc, addGrads, addArgs);
    for (auto [p, sum] : llvm::zip(params, add.getResults()))
      bufferization::MaterializeInDestinationOp::create(
          b, loc, Type(), sum, sums.lookup(p), /*restrict=*/true,
          /*writable=*/true);
  }
  if (a.loss) {
    Value sum = bufferization::ToTensorOp::create(
        b, loc, RankedTensorType::get({}, b.getF32Type()), lossBuffer,
        /*restrict=*/true, /*writable=*/true);
    bufferization::MaterializeInDestinationOp::create(
        b, loc, Type(), autodiff::buildAdd(b, loc, sum, tensorOf(*a.loss, a)),
        lossBuffer, /*restrict=*/true, /*writable=*/true);
  }
  func::CallOp::create(b, loc, endFn, record);
}

void RankLowering::emitUnrolledAction(const Action &a) {
  Location loc = a.op->getLoc();
  if (a.kind == Action::Reduce) {
    // Each sum moves to a buffer the runtime sums in place; the tensor of
    // that buffer is the sum from here on.
    emitReduction(
        a,
        [&](Value param) -> Value {
          auto type = cast<RankedTensorType>(param.getType());
          Value sum = gradSums.lookup(param);
          if (!sum)
            sum = autodiff::buildZeros(b, loc, type);
          Value buffer = memref::AllocOp::create(
              b, loc, MemRefType::get(type.getShape(), type.getElementType()));
          bufferization::MaterializeInDestinationOp::create(
              b, loc, Type(), sum, buffer, /*restrict=*/true,
              /*writable=*/true);
          return buffer;
        },
        [&](Value param, Value buffer) {
          gradSums[param] = bufferization::ToTensorOp::create(
              b, loc, cast<RankedTensorType>(param.getType()), buffer,
              /*restrict=*/true, /*writable=*/true);
        });
    return;
  }
  if (a.kind == Action::Send) {
    transfer(b, a, sendFn, [&](size_t i) {
      return bufferOf(b, loc, tensorOf(a.payload[i], a));
    });
    return;
  }
  if (a.kind == Action::Recv) {
    transfer(
        b, a, recvFn,
        [&](size_t i) -> Value {
          RankedTensorType type = values[a.payload[i].index].type;
          return memref::AllocOp::create(
              b, loc, MemRefType::get(type.getShape(), type.getElementType()));
        },
        [&](size_t i, Value buffer) {
          int64_t id = a.payload[i].index;
          local[id] = bufferization::ToTensorOp::create(
              b, loc, values[id].type, buffer, /*restrict=*/true,
              /*writable=*/true);
        });
    return;
  }
  SmallVector<Value> record = actionRecord(b, loc, a.phase, a.stage, [&] {
    return arith::ConstantIntOp::create(b, loc, a.microbatch, 64);
  });
  func::CallOp::create(b, loc, beginFn, record);
  const StageFunctions &fns = stages[a.stage];
  for (const Call &c : a.calls) {
    emitCall(a, c);
    if (c.gradsFrom < 0)
      continue;
    // The first microbatch's gradients start the sums; each later one's
    // are added with one call.
    ValueRange params = fns.stage.getParams();
    SmallVector<Value> grads;
    for (const Ref &r : ArrayRef<Ref>(c.yielded).drop_front(c.gradsFrom))
      grads.push_back(tensorOf(r, a));
    if (llvm::none_of(params, [&](Value p) { return gradSums.count(p); })) {
      for (auto [param, grad] : llvm::zip(params, grads))
        gradSums[param] = grad;
      continue;
    }
    // A parameter another stage of this rank shares may have a sum already
    // while the others of this stage start theirs.
    SmallVector<Value> args;
    for (Value param : params) {
      Value sum = gradSums.lookup(param);
      if (!sum)
        sum = autodiff::buildZeros(b, loc,
                                   cast<RankedTensorType>(param.getType()));
      args.push_back(sum);
    }
    args.append(grads);
    auto add = func::CallOp::create(
        b, loc, getAddGrads(b, fns, a.stage, step, /*inPlace=*/false), args);
    for (auto [param, sum] : llvm::zip(params, add.getResults()))
      gradSums[param] = sum;
  }
  if (a.loss)
    lossSum = autodiff::buildAdd(b, loc, lossSum, tensorOf(*a.loss, a));
  func::CallOp::create(b, loc, endFn, record);
}

/// Starts the group sum of each of `a`'s parameters' gradient sums, the
/// buffer `bufferOf(param)`, then calls `after(param, buffer)` if given.
void RankLowering::emitReduction(const Action &a,
                                 llvm::function_ref<Value(Value)> bufferOf,
                                 llvm::function_ref<void(Value, Value)> after) {
  Location loc = a.op->getLoc();
  ModuleOp module = model->getParentOfType<ModuleOp>();
  auto groupType =
      MemRefType::get({static_cast<int64_t>(a.group.size())}, b.getI64Type());
  std::string name = ("zb_rank" + Twine(rank) + "_group" + Twine(a.peer)).str();
  if (!module.lookupSymbol(name)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(step);
    memref::GlobalOp::create(
        b, loc, b.getStringAttr(name), b.getStringAttr("private"),
        TypeAttr::get(groupType),
        DenseElementsAttr::get(
            RankedTensorType::get(groupType.getShape(), b.getI64Type()),
            ArrayRef<int64_t>(a.group)),
        b.getUnitAttr(), /*alignment=*/IntegerAttr());
  }
  Value group = memref::GetGlobalOp::create(
      b, loc, groupType, FlatSymbolRefAttr::get(b.getContext(), name));
  Value groupArg = memref::CastOp::create(
      b, loc, UnrankedMemRefType::get(b.getI64Type(), 0), group);
  bool replicas =
      a.op->getParentOfType<sched::ProgramOp>().getNumReplicas() > 1;
  for (int64_t index : a.reduced) {
    Value buffer = bufferOf(model.getArgument(index));
    auto type = cast<MemRefType>(buffer.getType());
    Value unranked = memref::CastOp::create(
        b, loc, UnrankedMemRefType::get(type.getElementType(), 0), buffer);
    func::CallOp::create(b, loc, replicas ? replicaMeanFn : groupSumFn,
                         ValueRange{unranked, groupArg});
    if (after)
      after(model.getArgument(index), buffer);
  }
}

/// Completes the rank's group sums before the step returns its gradients.
void RankLowering::emitWaitForReductions() {
  if (numReductions)
    func::CallOp::create(b, step.getLoc(), waitSumsFn, ValueRange{});
}

/// A zeroed buffer of `type`'s shape.
static Value zeroedBuffer(OpBuilder &b, Location loc, RankedTensorType type) {
  Value buffer = memref::AllocOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()));
  Value zero =
      arith::ConstantOp::create(b, loc, b.getZeroAttr(type.getElementType()));
  linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{buffer});
  return buffer;
}

void RankLowering::lookUpRuntime() {
  ModuleOp module = model->getParentOfType<ModuleOp>();
  sendFn = module.lookupSymbol<func::FuncOp>("zbrt_send_f32");
  recvFn = module.lookupSymbol<func::FuncOp>("zbrt_recv_f32");
  beginFn = module.lookupSymbol<func::FuncOp>("zbrt_action_begin");
  endFn = module.lookupSymbol<func::FuncOp>("zbrt_action_end");
  groupSumFn = module.lookupSymbol<func::FuncOp>("zbrt_group_sum_f32");
  replicaMeanFn = module.lookupSymbol<func::FuncOp>("zbrt_replica_mean_f32");
  waitSumsFn = module.lookupSymbol<func::FuncOp>("zbrt_wait_group_sums");
}

LogicalResult RankLowering::emitUnrolled(sched::ProgramOp program) {
  Location loc = program.getLoc();
  StepFunction fn =
      createStepFunction(b, model, stages, rank, numMicrobatches, loc);
  step = fn.fn;
  argMap = std::move(fn.argMap);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(&step.getBody().front());
  for (const Action &a : actions)
    emitUnrolledAction(a);
  emitWaitForReductions();
  auto lossType = RankedTensorType::get({}, b.getF32Type());
  SmallVector<Value> results;
  results.push_back(lossSum ? buildLossMean(b, loc, lossSum, numMicrobatches)
                            : autodiff::buildZeros(b, loc, lossType));
  for (Value p : fn.params) {
    Value sum = gradSums.lookup(p);
    if (!sum)
      sum = autodiff::buildZeros(b, loc, cast<RankedTensorType>(p.getType()));
    results.push_back(sum);
  }
  func::ReturnOp::create(b, loc, results);
  return success();
}

LogicalResult RankLowering::emitLoop(sched::ProgramOp program) {
  int64_t arenaBytes = planArena();

  // Templates, and the table: one row per action.
  std::map<SmallVector<int64_t>, int64_t> templateOf;
  SmallVector<int64_t> exemplars; // template -> its first action
  SmallVector<int64_t> rowTemplate;
  SmallVector<SmallVector<Slot>> rowSlots;
  size_t width = 2;
  for (const Action &a : actions) {
    auto [it, inserted] =
        templateOf.try_emplace(signatureOf(a), exemplars.size());
    if (inserted)
      exemplars.push_back(&a - actions.data());
    rowTemplate.push_back(it->second);
    rowSlots.push_back(slotsOf(a));
    width = std::max(width, 2 + rowSlots.back().size());
  }
  SmallVector<int64_t> rows;
  for (auto [k, a] : llvm::enumerate(actions)) {
    rows.append({rowTemplate[k], a.microbatch});
    for (const Slot &s : rowSlots[k])
      rows.push_back(values[s.value].offset);
    rows.append(width - 2 - rowSlots[k].size(), 0);
  }

  Location loc = program.getLoc();
  StepFunction fn =
      createStepFunction(b, model, stages, rank, numMicrobatches, loc);
  step = fn.fn;
  argMap = std::move(fn.argMap);
  step->setAttr(ZBDialect::kArenaBytesAttrName,
                b.getI64IntegerAttr(arenaBytes));

  OpBuilder::InsertionGuard guard(b);
  auto tableType = MemRefType::get(
      {static_cast<int64_t>(actions.size()), static_cast<int64_t>(width)},
      b.getI64Type());
  std::string tableName = ("zb_rank" + Twine(rank) + "_actions").str();
  if (!actions.empty()) {
    b.setInsertionPoint(step);
    auto tensorType =
        RankedTensorType::get(tableType.getShape(), b.getI64Type());
    memref::GlobalOp::create(
        b, loc, b.getStringAttr(tableName), b.getStringAttr("private"),
        TypeAttr::get(tableType),
        DenseElementsAttr::get(tensorType, ArrayRef<int64_t>(rows)),
        b.getUnitAttr(), /*alignment=*/IntegerAttr());
  }

  b.setInsertionPointToEnd(&step.getBody().front());
  arena = memref::AllocOp::create(
      b, loc,
      MemRefType::get({std::max<int64_t>(arenaBytes, 1)}, b.getI8Type()),
      b.getI64IntegerAttr(64));
  for (Value p : fn.params)
    sums[p] = zeroedBuffer(b, loc, cast<RankedTensorType>(p.getType()));
  auto lossType = RankedTensorType::get({}, b.getF32Type());
  bool hasLoss =
      llvm::any_of(actions, [](const Action &a) { return a.loss.has_value(); });
  if (hasLoss)
    lossBuffer = zeroedBuffer(b, loc, lossType);

  if (!actions.empty()) {
    table = memref::GetGlobalOp::create(
        b, loc, tableType, FlatSymbolRefAttr::get(b.getContext(), tableName));
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value count = arith::ConstantIndexOp::create(b, loc, actions.size());
    auto loop = scf::ForOp::create(b, loc, zero, count, one);
    b.setInsertionPointToStart(loop.getBody());
    Value i = loop.getInductionVar();
    Value kind = arith::IndexCastOp::create(
        b, loc, b.getIndexType(),
        memref::LoadOp::create(b, loc, table, ValueRange{i, zero}));
    mbI64 = memref::LoadOp::create(b, loc, table, ValueRange{i, one});
    mbIndex = arith::IndexCastOp::create(b, loc, b.getIndexType(), mbI64);
    SmallVector<int64_t> cases =
        llvm::to_vector(llvm::seq<int64_t>(0, exemplars.size()));
    auto sw = scf::IndexSwitchOp::create(b, loc, TypeRange{}, kind, cases,
                                         cases.size());
    for (auto [t, k] : llvm::enumerate(exemplars)) {
      Block *block = b.createBlock(&sw.getCaseRegions()[t]);
      b.setInsertionPointToEnd(block);
      emitTemplate(actions[k], i);
      scf::YieldOp::create(b, loc);
    }
    b.createBlock(&sw.getDefaultRegion());
    scf::YieldOp::create(b, loc);
    b.setInsertionPointAfter(loop);
  }
  emitWaitForReductions();

  SmallVector<Value> results;
  if (hasLoss)
    results.push_back(buildLossMean(
        b, loc,
        bufferization::ToTensorOp::create(b, loc, lossType, lossBuffer,
                                          /*restrict=*/true),
        numMicrobatches));
  else
    results.push_back(autodiff::buildZeros(b, loc, lossType));
  for (Value p : fn.params)
    results.push_back(bufferization::ToTensorOp::create(
        b, loc, cast<RankedTensorType>(p.getType()), sums.lookup(p),
        /*restrict=*/true));
  memref::DeallocOp::create(b, loc, arena);
  func::ReturnOp::create(b, loc, results);
  return success();
}

LogicalResult RankLowering::lower(sched::ProgramOp program, int64_t r,
                                  Region &region, bool unrolled) {
  rank = r;
  unroll = unrolled;
  if (failed(plan(region)))
    return failure();
  lookUpRuntime();
  return unroll ? emitUnrolled(program) : emitLoop(program);
}

LogicalResult zb::detail::lowerRankProgram(OpBuilder &b, func::FuncOp model,
                                           ArrayRef<StageFunctions> stages,
                                           int64_t numMicrobatches,
                                           sched::ProgramOp program,
                                           int64_t rank, Region &region,
                                           bool unroll) {
  RankLowering lowering(b, model, stages, numMicrobatches);
  return lowering.lower(program, rank, region, unroll);
}
