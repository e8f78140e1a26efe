//===- Model.cpp - The model input convention -----------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Model/Model.h"

#include "zb/Dialect/Pipe/PipeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace zb;

/// Dialects whose ops the compiler lowers.
static bool isSupportedDialect(StringRef ns) {
  return llvm::is_contained({"arith", "math", "linalg", "tensor", "func",
                             "pipe", "bufferization", "scf"},
                            ns);
}

static bool isSupportedElementType(Type type) {
  return type.isF32() || type.isF64() || type.isInteger(32) ||
         type.isInteger(64);
}

std::string zb::argName(func::FuncOp fn, unsigned i) {
  if (auto name = fn.getArgAttrOfType<StringAttr>(i, kParamAttr))
    return name.str();
  if (auto name = fn.getArgAttrOfType<StringAttr>(i, kDataAttr))
    return name.str();
  return "arg" + std::to_string(i);
}

/// Tensors of more bytes than this are refused: the compiler sums the
/// bytes of many tensors (a stage's stash, a memory limit) in 64 bits.
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 50;

std::optional<uint64_t> zb::tensorBytes(RankedTensorType type) {
  uint64_t bytes = (type.getElementTypeBitWidth() + 7) / 8;
  for (int64_t extent : type.getShape())
    if (extent < 0 ||
        __builtin_mul_overflow(bytes, static_cast<uint64_t>(extent), &bytes))
      return std::nullopt;
  return bytes;
}

/// Whether a static tensor type holds more than kMaxTensorBytes bytes.
static bool tooManyBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return false;
  std::optional<uint64_t> bytes = tensorBytes(tensor);
  return !bytes || *bytes > kMaxTensorBytes;
}

/// Checks that integer data bounded by {zb.range = `range`} indexes no
/// tensor dimension with fewer entries than the range (and, where
/// zb.range_from or zb.range_ignored lets values below 0 or past the range
/// through, no table at all): follows the
/// argument's values through reshapes, slices and integer casts, and into
/// the bodies of the linalg ops that read them, to the `tensor.extract` ops
/// that take them as an index (a table lookup such as an embedding's).
/// Values computed from the ids (an offset, a clamp) are not followed.
static LogicalResult verifyRangeFitsTables(BlockArgument blockArg,
                                           const ModelArg &arg) {
  StringRef name = arg.name;
  int64_t range = arg.range, from = arg.rangeFrom;
  SmallVector<Value> worklist{blockArg};
  llvm::DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp,
              tensor::ExtractSliceOp, tensor::CastOp, arith::IndexCastOp,
              arith::IndexCastUIOp, arith::ExtSIOp, arith::ExtUIOp>(user)) {
        if (use.getOperandNumber() == 0)
          worklist.push_back(user->getResult(0));
        continue;
      }
      if (auto linalgOp = dyn_cast<linalg::LinalgOp>(user)) {
        if (linalgOp.isDpsInput(&use))
          worklist.push_back(linalgOp.getMatchingBlockArgument(&use));
        continue;
      }
      auto extract = dyn_cast<tensor::ExtractOp>(user);
      if (!extract)
        continue;
      if (use.get() == extract.getTensor()) {
        worklist.push_back(extract.getResult());
        continue;
      }
      RankedTensorType table = extract.getTensor().getType();
      unsigned dim = use.getOperandNumber() - 1;
      if (from < 0)
        return extract.emitError("data argument '")
               << name << "' may hold negative values (zb.range_from = " << from
               << "), but indexes dimension " << dim << " of " << table
               << " here as it is, where they would read before it";
      if (arg.rangeIgnored &&
          (*arg.rangeIgnored < 0 || table.isDynamicDim(dim) ||
           *arg.rangeIgnored >= table.getDimSize(dim)))
        return extract.emitError("data argument '")
               << name << "' may hold " << *arg.rangeIgnored
               << " (zb.range_ignored), but indexes dimension " << dim << " of "
               << table << " here, which has no such entry";
      if (table.isDynamicDim(dim) || table.getDimSize(dim) >= range)
        continue;
      return extract.emitError("data argument '")
             << name << "' holds values in [0, " << range
             << ") (zb.range), but indexes dimension " << dim << " of " << table
             << " here, which has " << table.getDimSize(dim)
             << " entries: values from " << table.getDimSize(dim)
             << " on would read past it";
    }
  }
  return success();
}

int64_t zb::cuttableOps(func::FuncOp fn) {
  return static_cast<int64_t>(fn.front().getOperations().size()) - 1;
}

FailureOr<ModelSignature> zb::analyzeModel(ModuleOp module) {
  SmallVector<func::FuncOp> candidates;
  for (auto fn : module.getOps<func::FuncOp>())
    if (fn.isPublic() && !fn.isExternal())
      candidates.push_back(fn);
  if (candidates.empty())
    return module.emitError("the model has no public function with a body");
  if (candidates.size() > 1) {
    InFlightDiagnostic diag =
        candidates[1].emitError("the model must have one public function, "
                                "but found '")
        << candidates[0].getSymName() << "' and '" << candidates[1].getSymName()
        << "' (make helpers private)";
    return failure();
  }
  func::FuncOp fn = candidates.front();

  FunctionType type = fn.getFunctionType();
  auto lossType = type.getNumResults() == 1
                      ? dyn_cast<RankedTensorType>(type.getResult(0))
                      : RankedTensorType();
  if (!lossType || lossType.getRank() != 0 ||
      !(lossType.getElementType().isF32() || lossType.getElementType().isF64()))
    return fn.emitError("model function '")
           << fn.getSymName()
           << "' must return one scalar loss of type tensor<f32> (or "
              "tensor<f64>), but returns "
           << type.getResults();

  ModelSignature signature;
  signature.func = fn;
  llvm::StringSet<> names;
  for (unsigned i = 0, e = type.getNumInputs(); i < e; ++i) {
    ModelArg arg;
    arg.position = i;
    arg.type = dyn_cast<RankedTensorType>(type.getInput(i));
    Attribute param = fn.getArgAttr(i, kParamAttr);
    arg.kind = param ? ModelArg::Kind::Param : ModelArg::Kind::Data;
    arg.name = argName(fn, i);
    if (!arg.type)
      return fn.emitError("argument #")
             << i << " ('" << arg.name << "') must be a ranked tensor, got "
             << type.getInput(i);
    if (!arg.type.hasStaticShape())
      return fn.emitError("argument #")
             << i << " ('" << arg.name << "') has the dynamic shape "
             << arg.type << "; models need static shapes";
    if (tooManyBytes(arg.type))
      return fn.emitError("argument #")
             << i << " ('" << arg.name << "') of type " << arg.type
             << " holds more than 2^50 bytes (1 PiB), past what the compiler "
                "counts";
    Type elt = arg.type.getElementType();
    if (!isSupportedElementType(elt))
      return fn.emitError("argument #")
             << i << " ('" << arg.name << "') has element type " << elt
             << "; supported are f32, f64, i32 and i64";
    if (arg.isParam() && !isa<FloatType>(elt))
      return fn.emitError("parameter '")
             << arg.name << "' must have a float element type, got " << elt;
    // Gradient files (--dump-grads) hold the step's loss under this name.
    if (arg.isParam() && arg.name == "loss")
      return fn.emitError("parameter 'loss' has the name gradient files give "
                          "the step's loss; rename it");
    if (!arg.isParam() && arg.type.getRank() == 0)
      return fn.emitError("data argument #")
             << i << " ('" << arg.name
             << "') must have a leading sample dimension";
    arg.rng = static_cast<bool>(fn.getArgAttr(i, kRngAttr));
    if (auto range = fn.getArgAttrOfType<IntegerAttr>(i, kRangeAttr)) {
      arg.range = range.getInt();
      if (auto from = fn.getArgAttrOfType<IntegerAttr>(i, kRangeFromAttr))
        arg.rangeFrom = from.getInt();
      if (auto ignored = fn.getArgAttrOfType<IntegerAttr>(i, kRangeIgnoredAttr))
        arg.rangeIgnored = ignored.getInt();
      if (failed(verifyRangeFitsTables(fn.getArgument(i), arg)))
        return failure();
    }
    if (!names.insert(arg.name).second)
      return fn.emitError("two arguments are named '") << arg.name << "'";
    signature.args.push_back(arg);
  }

  WalkResult walk = fn.walk([&](Operation *op) {
    if (!isSupportedDialect(op->getDialect() ? op->getDialect()->getNamespace()
                                             : StringRef())) {
      op->emitError("op '")
          << op->getName() << "' is not supported by the ZeroBubble backends";
      return WalkResult::interrupt();
    }
    for (Type type : op->getResultTypes())
      if (tooManyBytes(type)) {
        op->emitError("result of type ")
            << type << " holds more than 2^50 bytes (1 PiB), past what "
            << "the compiler counts";
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();

  // Each running statistic is recorded once per forward, under a name of
  // its own.
  llvm::StringMap<pipe::RunningStatOp> stats;
  walk = fn.walk([&](pipe::RunningStatOp op) {
    if (names.contains(op.getBuffer())) {
      op.emitError("running statistic '")
          << op.getBuffer() << "' has the name of an argument";
      return WalkResult::interrupt();
    }
    auto [it, inserted] = stats.try_emplace(op.getBuffer(), op);
    if (!inserted) {
      InFlightDiagnostic diag = op.emitError("running statistic '")
                                << op.getBuffer() << "' is recorded twice";
      diag.attachNote(it->second.getLoc()) << "first recorded here";
      return WalkResult::interrupt();
    }
    signature.runningStats.push_back(
        RunningStat{op.getBuffer().str(), op.getMomentum().convertToDouble(),
                    op.getInit().convertToDouble(),
                    cast<RankedTensorType>(op.getValue().getType())});
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  llvm::sort(signature.runningStats,
             [](const RunningStat &a, const RunningStat &b) {
               return a.name < b.name;
             });
  return signature;
}
