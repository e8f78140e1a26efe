//===- StepEmit.cpp - Emitting a step function in either form
//---------------===//
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
// What both forms build
//===----------------------------------------------------------------------===//

/// The stage's `zb_stage<s>_add_grads` (the unrolled form's), created
/// before `before` on first use. Each sum is a new tensor: bufferization
/// would otherwise have to analyse the unrolled step's chains of sums for
/// in-place writes across the whole step.
static func::FuncOp getAddGrads(OpBuilder &b, const StageFunctions &fns,
                                int64_t s, Operation *before) {
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
  for (size_t i = 0, e = types.size(); i < e; ++i)
    sums.push_back(autodiff::buildAdd(b, loc, entry->getArgument(i),
                                      entry->getArgument(e + i)));
  func::ReturnOp::create(b, loc, sums);
  return fns.addGrads;
}

/// `o`'s accumulating form (Outlined::accumulating,
/// autodiff::buildAccumulating) for the stage of `fns`, whose gradients
/// start at `o`'s yielded value `gradsFrom`, created after `o` on first use.
static func::FuncOp getAccumulating(OpBuilder &b, const StageFunctions &fns,
                                    const Outlined &o, int64_t gradsFrom) {
  if (o.accumulating)
    return o.accumulating;
  assert(o.sources.size() == gradsFrom + fns.stage.getParams().size() &&
         "one gradient per parameter");
  // A result stays a result unless it is only ever a gradient (every
  // result is yielded somewhere).
  SmallVector<bool> kept(o.fn.getNumResults(), false);
  for (auto [isArg, index] : ArrayRef(o.sources).take_front(gradsFrom))
    if (!isArg)
      kept[index] = true;
  o.kept.clear();
  for (auto [ri, keep] : llvm::enumerate(kept))
    if (keep)
      o.kept.push_back(ri);

  o.accumulating = autodiff::buildAccumulating(
      b, o.fn, (o.fn.getSymName() + "_acc").str(),
      ArrayRef(o.sources).drop_front(gradsFrom), o.kept);
  return o.accumulating;
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

/// The loss a step function returns, the mean of its microbatches': the
/// model's (tensor<f32> or tensor<f64>).
static RankedTensorType stepLossType(func::FuncOp model) {
  return cast<RankedTensorType>(model.getFunctionType().getResult(0));
}

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
  resultTypes.push_back(stepLossType(model));
  for (BlockArgument arg : model.getArguments()) {
    if (model.getArgAttr(arg.getArgNumber(), kParamAttr)) {
      if (!rankParams.contains(arg))
        continue;
      result.params.push_back(arg);
      // The name zb-run knows it by (a unit zb.param: "arg<N>").
      paramNames.push_back(
          b.getStringAttr(zb::argName(model, arg.getArgNumber())));
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

/// `fn` of the scalar in 0-d tensor `x`, as a 0-d tensor of its type.
static Value
mapScalar(OpBuilder &b, Location loc, Value x,
          llvm::function_ref<Value(OpBuilder &, Location, Value)> fn) {
  MLIRContext *ctx = b.getContext();
  auto type = cast<RankedTensorType>(x.getType());
  Value empty = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{},
                                        type.getElementType());
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, ValueRange{x}, ValueRange{empty},
             ArrayRef<AffineMap>{AffineMap::get(0, 0, ctx),
                                 AffineMap::get(0, 0, ctx)},
             ArrayRef<utils::IteratorType>{},
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               linalg::YieldOp::create(nb, nloc,
                                       ValueRange{fn(nb, nloc, args[0])});
             })
      .getResult(0);
}

/// `lossSum / numMicrobatches` as a 0-d tensor.
static Value buildLossMean(OpBuilder &b, Location loc, Value lossSum,
                           int64_t numMicrobatches) {
  auto element = cast<FloatType>(
      cast<RankedTensorType>(lossSum.getType()).getElementType());
  // The reciprocal rounded to the loss's type (1/M in f32 for an f32 loss).
  double reciprocal = element.isF32()
                          ? 1.0f / static_cast<float>(numMicrobatches)
                          : 1.0 / static_cast<double>(numMicrobatches);
  Value scale =
      arith::ConstantOp::create(b, loc, b.getFloatAttr(element, reciprocal));
  return mapScalar(b, loc, lossSum,
                   [&](OpBuilder &nb, Location nloc, Value v) -> Value {
                     return arith::MulFOp::create(nb, nloc, v, scale);
                   });
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
  case Ref::Zero:
    return autodiff::buildZeros(
        b, loc,
        cast<RankedTensorType>(
            stages[a.stage].stage.getResultTypes()[ref.index]));
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
/// `outs` has a slot for one, are written there. With `accumulate`, a call
/// that yields gradients calls the accumulating form, which adds them to
/// the sums in place: the gradients themselves (read by this action alone,
/// so never in a slot) are then no values of `local`.
void RankLowering::emitCall(const Action &a, const Call &c,
                            ArrayRef<Value> outs, bool accumulate) {
  Location loc = a.op->getLoc();
  const StageFunctions &fns = stages[a.stage];
  const Outlined &o = outlinedOf(fns, c.fn);
  SmallVector<Value> args;
  for (const Ref &r : c.args)
    args.push_back(tensorOf(r, a));
  accumulate = accumulate && c.gradsFrom >= 0;
  func::FuncOp callee = o.fn;
  SmallVector<unsigned> kept =
      llvm::to_vector(llvm::seq<unsigned>(0, c.results.size()));
  ValueRange params = fns.stage.getParams();
  if (accumulate) {
    callee = getAccumulating(b, fns, o, c.gradsFrom);
    kept = o.kept;
    for (Value p : params)
      args.push_back(bufferization::ToTensorOp::create(
          b, loc, cast<RankedTensorType>(p.getType()), sums.lookup(p),
          /*restrict=*/true, /*writable=*/true));
  }
  auto call = func::CallOp::create(b, loc, callee, args);
  assert((outs.empty() || llvm::all_of(llvm::seq<unsigned>(0, outs.size()),
                                       [&](unsigned ri) {
                                         return !outs[ri] ||
                                                llvm::is_contained(kept, ri);
                                       })) &&
         "a gradient has an arena slot");
  for (auto [i, ri] : llvm::enumerate(kept)) {
    local[c.results[ri]] = call.getResult(i);
    if (!outs.empty() && outs[ri])
      bufferization::MaterializeInDestinationOp::create(
          b, loc, Type(), call.getResult(i), outs[ri], /*restrict=*/true,
          /*writable=*/true);
  }
  if (!accumulate)
    return;
  for (auto [p, sum] :
       llvm::zip(params, call.getResults().drop_front(kept.size())))
    bufferization::MaterializeInDestinationOp::create(
        b, loc, Type(), sum, sums.lookup(p), /*restrict=*/true,
        /*writable=*/true);
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

/// Calls the runtime's send or receive of `a` (`fns`: the function for f32
/// and for f64 buffers) on `bufferOf(i)` for each value i of its payload,
/// then `after(i, buffer)` if given.
static void transfer(OpBuilder &b, const Action &a,
                     const std::array<func::FuncOp, kTransferElements> &fns,
                     llvm::function_ref<Value(size_t)> bufferOf,
                     llvm::function_ref<void(size_t, Value)> after = nullptr) {
  Location loc = a.op->getLoc();
  Value peerValue = arith::ConstantIntOp::create(b, loc, a.peer, 64);
  Value channelValue = arith::ConstantIntOp::create(b, loc, a.channel, 64);
  for (size_t i = 0, e = a.payload.size(); i < e; ++i) {
    Value buffer = bufferOf(i);
    auto type = cast<MemRefType>(buffer.getType());
    func::FuncOp fn = fns[transferIndex(type.getElementType())];
    assert(fn && "transfer function not declared");
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
    transfer(b, a, a.kind == Action::Send ? sendFns : recvFns, [&](size_t i) {
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
    // A call that yields gradients adds them to the sums in place.
    emitCall(a, c, outs, /*accumulate=*/true);
  }
  if (a.loss) {
    Value sum = bufferization::ToTensorOp::create(
        b, loc, stepLossType(model), lossBuffer,
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
    transfer(b, a, sendFns, [&](size_t i) {
      return bufferOf(b, loc, tensorOf(a.payload[i], a));
    });
    return;
  }
  if (a.kind == Action::Recv) {
    transfer(
        b, a, recvFns,
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
    auto add =
        func::CallOp::create(b, loc, getAddGrads(b, fns, a.stage, step), args);
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
    auto sum = module.lookupSymbol<func::FuncOp>(
        sumFunctionName(replicas, type.getElementType()));
    assert(sum && "--zb-lower-to-runtime declares the sums of the reduced "
                  "parameters' element types");
    func::CallOp::create(b, loc, sum, ValueRange{unranked, groupArg});
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
  // Declared by --zb-lower-to-runtime for each element type the program
  // transfers (isTransferable).
  std::array<Type, kTransferElements> elements =
      transferElements(module.getContext());
  for (size_t i = 0; i < kTransferElements; ++i) {
    sendFns[i] = module.lookupSymbol<func::FuncOp>(
        transferFunctionName(/*send=*/true, elements[i]));
    recvFns[i] = module.lookupSymbol<func::FuncOp>(
        transferFunctionName(/*send=*/false, elements[i]));
  }
  beginFn = module.lookupSymbol<func::FuncOp>("zbrt_action_begin");
  endFn = module.lookupSymbol<func::FuncOp>("zbrt_action_end");
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
  RankedTensorType lossType = stepLossType(model);
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
  RankedTensorType lossType = stepLossType(model);
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
