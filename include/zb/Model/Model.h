//===- Model.h - The model input convention ---------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// A model is one public func.func with static shapes written for one
// microbatch: arguments marked {zb.param} (optionally {zb.param = "name"})
// are parameters, the others data (dim 0 = samples; optionally named by
// {zb.data = "name"}, integer data bounded by {zb.range = N}, a random key
// the runner supplies per microbatch marked {zb.rng}); the single
// result is the scalar loss tensor<f32> (tensor<f64> is accepted too, for
// gradient checks in double precision).
//
//===----------------------------------------------------------------------===//

#ifndef ZB_MODEL_MODEL_H
#define ZB_MODEL_MODEL_H

#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zb {

/// Attribute names of the convention (the zb dialect's, which verifies
/// them).
inline constexpr llvm::StringLiteral kParamAttr = ZBDialect::kParamAttrName;
inline constexpr llvm::StringLiteral kDataAttr = ZBDialect::kDataAttrName;
inline constexpr llvm::StringLiteral kRangeAttr = ZBDialect::kRangeAttrName;
inline constexpr llvm::StringLiteral kRangeFromAttr =
    ZBDialect::kRangeFromAttrName;
inline constexpr llvm::StringLiteral kRangeIgnoredAttr =
    ZBDialect::kRangeIgnoredAttrName;
inline constexpr llvm::StringLiteral kRngAttr = ZBDialect::kRngAttrName;

/// One argument of the model function.
struct ModelArg {
  enum class Kind { Param, Data };
  Kind kind;
  /// The parameter's name, the data's zb.data name, or "arg<i>".
  std::string name;
  /// Position in the signature.
  unsigned position;
  mlir::RankedTensorType type;
  /// For integer data: values lie in [rangeFrom, range); range 0 when not
  /// given, rangeFrom 0 but where zb.range_from allows negative values.
  int64_t range = 0;
  int64_t rangeFrom = 0;
  /// One more value the data may hold outside [rangeFrom, range), which
  /// every use leaves out (zb.range_ignored: a loss's ignore_index).
  std::optional<int64_t> rangeIgnored;
  /// A random key ({zb.rng}): the runner fills it per microbatch
  /// (zbrt::rngKey), never from input files.
  bool rng = false;

  bool isParam() const { return kind == Kind::Param; }
  std::vector<int64_t> shape() const {
    return std::vector<int64_t>(type.getShape().begin(), type.getShape().end());
  }
};

/// A running average the forward keeps (`pipe.running_stat`): a buffer
/// that is not a parameter, such as a batch norm's running mean.
struct RunningStat {
  std::string name;
  double momentum = 0.0;
  /// Every element's value before the first update.
  double init = 0.0;
  mlir::RankedTensorType type;
  std::vector<int64_t> shape() const {
    return std::vector<int64_t>(type.getShape().begin(), type.getShape().end());
  }
};

/// The model function and its arguments.
struct ModelSignature {
  mlir::func::FuncOp func;
  std::vector<ModelArg> args;
  /// The running statistics, sorted by name.
  std::vector<RunningStat> runningStats;
};

/// The name of argument `i` of a model function: its `zb.param` or
/// `zb.data` string, else "arg<i>" (ModelArg::name, and how sched programs
/// name parameters).
std::string argName(mlir::func::FuncOp fn, unsigned i);

/// The ops of model function `fn` a partition gives to stages: its body's,
/// the return aside. Every stage holds one or more, so no more stages than
/// these can be cut.
int64_t cuttableOps(mlir::func::FuncOp fn);

/// The bytes a static tensor of `type` holds, nullopt when they overflow
/// 64 bits.
std::optional<uint64_t> tensorBytes(mlir::RankedTensorType type);

/// Finds the model function in `module` and checks it against the
/// convention and the set of ops the backends support. Emits a diagnostic
/// naming the offending function, argument or op on failure.
mlir::FailureOr<ModelSignature> analyzeModel(mlir::ModuleOp module);

} // namespace zb

#endif // ZB_MODEL_MODEL_H
