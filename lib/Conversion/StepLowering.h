//===- StepLowering.h - Planning and emitting a step function ---*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Conversion: the state in which one rank's program becomes
// its step function (StepFunctions.cpp): the plan (StepPlan.cpp: actions,
// their calls and the values between them, the arena) and what the two
// emitters (StepEmit.cpp: the loop form and the unrolled form) keep while
// they build the function.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_LIB_CONVERSION_STEPLOWERING_H
#define ZB_LIB_CONVERSION_STEPLOWERING_H

#include "StepFunctions.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

#include <array>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

namespace zb::detail {

/// Where an action's operand comes from.
struct Ref {
  enum Kind : uint8_t { Param, Data, Seed, Zero, Value };
  Kind kind;
  /// Param, Data: the model argument's number; Seed: the last stage's
  /// result it seeds; Zero: the result of the consuming action's stage
  /// whose gradient this is, a zero tensor (the result is not
  /// differentiable: its gradient is neither sent nor kept); Value: the
  /// planned value's id.
  int64_t index;
};

/// One call an action makes.
struct Call {
  enum Fn : uint8_t { Forward, Backward, BackwardInput, BackwardWeight };
  Fn fn;
  llvm::SmallVector<Ref> args;
  /// The planned value of each of the function's results.
  llvm::SmallVector<int64_t> results;
  /// The region's yielded values, in terms of `args` and `results`.
  llvm::SmallVector<Ref> yielded;
  /// Where the gradients start in `yielded`, -1 without any.
  int64_t gradsFrom = -1;
};

/// One action of the rank's program.
struct Action {
  mlir::Operation *op;
  enum Kind : uint8_t { Compute, Send, Recv, Reduce } kind;
  zb::sched::Phase phase;
  /// Reduce: stage -1, and `peer` numbers the rank's reductions.
  int64_t stage, microbatch, peer = 0, channel = 0;
  llvm::SmallVector<Call, 2> calls;
  /// The loss a last-stage F adds to the step's sum.
  std::optional<Ref> loss;
  /// Send: the values sent; Recv: the values received (produced here).
  llvm::SmallVector<Ref> payload;
  /// Reduce: the parameters (model argument numbers) whose gradient sums
  /// are summed over `group`.
  llvm::SmallVector<int64_t> reduced;
  llvm::SmallVector<int64_t> group;
};

/// A tensor value some action produces.
struct PlannedValue {
  mlir::RankedTensorType type;
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
  RankLowering(mlir::OpBuilder &b, mlir::func::FuncOp model,
               llvm::ArrayRef<StageFunctions> stages, int64_t numMicrobatches)
      : b(b), model(model), stages(stages), numMicrobatches(numMicrobatches) {}

  mlir::LogicalResult lower(zb::sched::ProgramOp program, int64_t rank,
                            mlir::Region &region, bool unroll);

private:
  // Planning.
  mlir::LogicalResult plan(mlir::Region &region);
  mlir::LogicalResult planForward(Action &a);
  mlir::LogicalResult planBackwardInput(Action &a, bool fused);
  mlir::LogicalResult planBackwardWeight(Action &a);
  mlir::LogicalResult planReduction(Action &a, zb::sched::AllReduceOp reduce);
  mlir::FailureOr<llvm::SmallVector<Ref>> cotangentsOf(const Action &a);
  void setInputGrads(int64_t stage, int64_t microbatch,
                     llvm::ArrayRef<Ref> grads);
  Call &addCall(Action &a, Call::Fn fn, const Outlined &outlined,
                llvm::ArrayRef<Ref> args);
  void use(llvm::ArrayRef<Ref> refs);
  int64_t newValue(mlir::Type type, int64_t call, int64_t position);
  int64_t planArena();
  llvm::SmallVector<Slot> slotsOf(const Action &a) const;
  llvm::SmallVector<int64_t> signatureOf(const Action &a) const;

  // Emission.
  void lookUpRuntime();
  mlir::LogicalResult emitLoop(zb::sched::ProgramOp program);
  mlir::LogicalResult emitUnrolled(zb::sched::ProgramOp program);
  void emitTemplate(const Action &a, mlir::Value row);
  void emitUnrolledAction(const Action &a);
  void emitReduction(
      const Action &a, llvm::function_ref<mlir::Value(mlir::Value)> bufferOf,
      llvm::function_ref<void(mlir::Value, mlir::Value)> after = nullptr);
  void emitWaitForReductions();
  void emitCall(const Action &a, const Call &c,
                llvm::ArrayRef<mlir::Value> outs = {}, bool accumulate = false);
  mlir::Value offsetOf(const Slot &slot);
  mlir::Value viewOf(const PlannedValue &v, mlir::Value offset, bool out);
  mlir::Value tensorOf(const Ref &ref, const Action &a);
  mlir::Value sliceData(mlir::Value stacked, mlir::OpFoldResult mb);

  mlir::OpBuilder &b;
  mlir::func::FuncOp model;
  llvm::ArrayRef<StageFunctions> stages;
  int64_t numMicrobatches;
  int64_t rank = 0;

  // The plan.
  std::vector<Action> actions;
  std::vector<PlannedValue> values;
  int64_t current = 0;                     // the action being planned
  using Key = std::pair<int64_t, int64_t>; // (stage, microbatch)
  std::map<Key, llvm::SmallVector<Ref>> activations, stash, inputGrads, wStash;
  std::map<std::tuple<int, int64_t, int64_t>, llvm::SmallVector<Ref>> received;

  // Emission state.
  bool unroll = false;
  mlir::func::FuncOp step;
  llvm::DenseMap<mlir::Value, mlir::Value> argMap;
  mlir::Value arena, table, mbIndex, mbI64, rowIndex;
  /// Value id -> its SSA value (in a template, or anywhere when
  /// unrolled).
  llvm::DenseMap<int64_t, mlir::Value> local;
  /// Unrolled: data slices by (model argument, microbatch).
  std::map<std::pair<int64_t, int64_t>, mlir::Value> dataSlices;
  /// Unrolled: the running sums, the first one a microbatch's gradient.
  llvm::MapVector<mlir::Value, mlir::Value> gradSums;
  mlir::Value lossSum;
  llvm::DenseMap<int64_t, int64_t> columnOf; // slotKey -> table column
  llvm::MapVector<mlir::Value, mlir::Value>
      sums; // model param -> its sum buffer
  mlir::Value lossBuffer;
  mlir::func::FuncOp beginFn, endFn, waitSumsFn;
  /// The runtime's sends and receives, by transferIndex (null where the
  /// program moves no such values).
  std::array<mlir::func::FuncOp, kTransferElements> sendFns, recvFns;
  int64_t numReductions = 0;
};

} // namespace zb::detail

#endif // ZB_LIB_CONVERSION_STEPLOWERING_H
