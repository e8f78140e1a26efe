//===- StepFunctions.h - Building the per-rank step functions ---*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//
//
// Between the two halves of --zb-lower-to-runtime: the functions the stages
// became (PipeToRuntime.cpp) and the step function built from them and a
// rank's program (StepFunctions.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ZB_LIB_CONVERSION_STEPFUNCTIONS_H
#define ZB_LIB_CONVERSION_STEPFUNCTIONS_H

#include "zb/Dialect/Pipe/PipeOps.h"
#include "zb/Dialect/Sched/SchedOps.h"
#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <array>
#include <string>

namespace zb::detail {

/// A function a stage region became. It returns each distinct value the
/// region yields once, and never its own arguments (a caller already has
/// them): `sources[i]` says where the region's i-th yielded value is, as
/// {true, argument index} or {false, result index}.
struct Outlined {
  mutable mlir::func::FuncOp fn;
  llvm::SmallVector<std::pair<bool, unsigned>> sources;
  /// For a function that yields the stage's parameter gradients, built by
  /// the loop form on first use: `<fn>_acc`, which takes the gradient sums
  /// after `fn`'s arguments and returns `fn`'s results other than the
  /// gradients (`kept`: their numbers in `fn`) followed by the sums with
  /// the gradients added, computed in place.
  mutable mlir::func::FuncOp accumulating;
  mutable llvm::SmallVector<unsigned> kept;

  explicit operator bool() const { return static_cast<bool>(fn); }
};

/// The functions one stage became.
struct StageFunctions {
  mutable pipe::StageOp stage;
  Outlined forward, backward, backwardInput, backwardWeight;
  /// `(sums..., grads...) -> sums + grads` over the stage's parameters:
  /// built on first use, so that the unrolled form accumulates one
  /// microbatch's gradients with one call.
  mutable mlir::func::FuncOp addGrads;
  unsigned numResults = 0, numStash = 0, numWStash = 0;
};

/// Emits rank `rank`'s step function `@zb_rank<rank>_step` for the actions
/// of `region`, its part of `program` (see --zb-lower-to-runtime): as one
/// loop over a table of the actions with every value that outlives its
/// action in one arena, or with `unroll` every action inline.
mlir::LogicalResult lowerRankProgram(mlir::OpBuilder &b,
                                     mlir::func::FuncOp model,
                                     llvm::ArrayRef<StageFunctions> stages,
                                     int64_t numMicrobatches,
                                     sched::ProgramOp program, int64_t rank,
                                     mlir::Region &region, bool unroll);

/// The element types the runtime's transfers carry, in the order of
/// transferIndex: f32, f64 (zbrt_send_f32 / zbrt_recv_f32, ...), and the
/// integers a stage may hand the next one (a mixture of experts' routing,
/// masks computed from activations): i32, i64, and booleans (a padded
/// batch's attention mask, made once and read by every layer): i1, one byte
/// per element as memrefs hold them.
inline constexpr size_t kTransferElements = 5;

/// The transferred element types, in transferIndex's order.
inline std::array<mlir::Type, kTransferElements>
transferElements(mlir::MLIRContext *context) {
  mlir::Builder types(context);
  return {types.getF32Type(), types.getF64Type(), types.getI32Type(),
          types.getI64Type(), types.getI1Type()};
}

/// The index of `element` among the transferred element types, or
/// kTransferElements for one the runtime does not transfer.
inline size_t transferIndex(mlir::Type element) {
  std::array<mlir::Type, kTransferElements> all =
      transferElements(element.getContext());
  return std::find(all.begin(), all.end(), element) - all.begin();
}

/// Whether the runtime's transfers carry tensors of type `type`.
inline bool isTransferable(mlir::Type type) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type);
  return tensor && transferIndex(tensor.getElementType()) < kTransferElements;
}

/// The runtime's transfer function for elements of `element` (a transferred
/// type): "zbrt_send_f32", "zbrt_recv_i64", ...
inline std::string transferFunctionName(bool send, mlir::Type element) {
  std::string name = send ? "zbrt_send_" : "zbrt_recv_";
  llvm::raw_string_ostream(name) << element;
  return name;
}

/// Whether the runtime's group sums and replica means add gradients of
/// element type `element`: f32 and f64 (zbrt_group_sum_f32, ..._f64).
inline bool isSummable(mlir::Type element) {
  return element.isF32() || element.isF64();
}

/// The runtime's group sum of `element` gradients (a summable type), or its
/// replica mean in a program with replicas: "zbrt_group_sum_f32",
/// "zbrt_replica_mean_f64", ...
inline std::string sumFunctionName(bool replicas, mlir::Type element) {
  std::string name = replicas ? "zbrt_replica_mean_" : "zbrt_group_sum_";
  llvm::raw_string_ostream(name) << element;
  return name;
}

/// The attribute on a `memref.view` of the arena that a call's result is
/// copied into when that view aliases none of the call's other operands;
/// `--zb-results-to-slots` then lets the call write there directly.
inline constexpr llvm::StringLiteral kOutSlotAttr = ZBDialect::kOutSlotAttrName;

} // namespace zb::detail

#endif // ZB_LIB_CONVERSION_STEPFUNCTIONS_H
