//===- StepPlan.cpp - Planning a rank's step function
//-----------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "StepLowering.h"

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

void RankLowering::setInputGrads(int64_t s, int64_t mb, ArrayRef<Ref> grads) {
  SmallVector<Ref> &kept = inputGrads[{s, mb}];
  kept.clear();
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(grads, stages[s].stage.getInputs())))
    kept.push_back(autodiff::isDifferentiable(std::get<1>(pair).getType())
                       ? std::get<0>(pair)
                       : Ref{Ref::Zero, static_cast<int64_t>(i)});
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
    setInputGrads(s, mb, ArrayRef<Ref>(c.yielded).take_front(numInputs));
    if (!fns.stage.getParams().empty()) {
      c.gradsFrom = numInputs;
      use(ArrayRef<Ref>(c.yielded).drop_front(numInputs));
    }
    stash.erase(it);
    return success();
  }
  Call &c = addCall(a, Call::BackwardInput, fns.backwardInput, args);
  setInputGrads(s, mb, ArrayRef<Ref>(c.yielded).take_front(numInputs));
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
    if (!isSummable(type.getElementType()))
      return reduce.emitOpError()
             << "reduces '" << name << "' of type " << type
             << "; only f32 and f64 gradients can be summed between ranks";
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
      // A gradient known to be zero is not sent.
      for (const Ref &r : it->second)
        if (r.kind != Ref::Zero)
          a.payload.push_back(r);
      for (const Ref &r : a.payload) {
        Type t = r.kind == Ref::Value ? Type(values[r.index].type)
                                      : model.getArgument(r.index).getType();
        if (!isTransferable(t))
          return op.emitError("only f32, f64, i32, i64 and i1 values can be "
                              "transferred, got ")
                 << t;
      }
      use(a.payload);
    } else {
      a.kind = Action::Recv;
      TypeRange types = isForward
                            ? TypeRange(stages[s].stage.getResultTypes())
                            : TypeRange(stages[s].stage.getInputs().getTypes());
      SmallVector<Ref> &got = received[{static_cast<int>(a.phase), s, mb}];
      got.clear();
      for (auto [i, t] : llvm::enumerate(types)) {
        // The sender sends no gradient of a value without one (a zero).
        if (!isForward && !autodiff::isDifferentiable(t)) {
          got.push_back({Ref::Zero, static_cast<int64_t>(i)});
          continue;
        }
        if (!isTransferable(t))
          return op.emitError("only f32, f64, i32, i64 and i1 values can be "
                              "transferred, got ")
                 << t;
        a.payload.push_back(
            {Ref::Value,
             newValue(t, -1, static_cast<int64_t>(a.payload.size()))});
        got.push_back(a.payload.back());
      }
    }
    actions.push_back(std::move(a));
  }
  // A forward-only program (evaluation) leaves every stash unread.
  auto program = cast<sched::ProgramOp>(region.getParentOp());
  if (!program.getForwardOnly() && (!stash.empty() || !wStash.empty()))
    return program.emitError("rank ")
           << rank << "'s program leaves a backward unfinished";
  // Every copy of a parameter shared between ranks is reduced (with
  // replicas, every parameter).
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
