//===- ZBDialect.cpp - The zb attribute dialect ---------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Dialect/ZB/ZBDialect.h"

#include "zb/Dialect/ZB/StageTable.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace zb;

#include "zb/Dialect/ZB/ZBDialect.cpp.inc"

void ZBDialect::initialize() {}

/// An integer attribute of at least `min`, or an error naming `name`.
static LogicalResult verifyInteger(Operation *op, NamedAttribute attr,
                                   int64_t min) {
  auto value = dyn_cast<IntegerAttr>(attr.getValue());
  if (!value || value.getInt() < min)
    return op->emitError("'")
           << attr.getName().getValue() << "' must be an integer of at least "
           << min << ", got " << attr.getValue();
  return success();
}

LogicalResult ZBDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto onFunction = [&]() -> LogicalResult {
    if (isa<FunctionOpInterface>(op))
      return success();
    return op->emitError("'") << name << "' belongs on a function";
  };
  if (name == kGradientOfAttrName) {
    if (failed(onFunction()))
      return failure();
    if (!isa<FlatSymbolRefAttr>(attr.getValue()))
      return op->emitError("'")
             << name << "' must name a function (a symbol reference), got "
             << attr.getValue();
    return success();
  }
  if (name == kGradSumsAttrName) {
    if (failed(onFunction()) || failed(verifyInteger(op, attr, 1)))
      return failure();
    int64_t sums = cast<IntegerAttr>(attr.getValue()).getInt();
    unsigned numArgs = cast<FunctionOpInterface>(op).getNumArguments();
    if (sums > numArgs)
      return op->emitError("'")
             << name << "' counts " << sums << " sums but the function takes "
             << numArgs << " arguments";
    return success();
  }
  if (name == kRankAttrName || name == kArenaBytesAttrName)
    return failure(failed(onFunction()) || failed(verifyInteger(op, attr, 0)));
  if (name == kMicrobatchesAttrName)
    return failure(failed(onFunction()) || failed(verifyInteger(op, attr, 1)));
  if (name == kParamsAttrName) {
    if (failed(onFunction()))
      return failure();
    auto names = dyn_cast<ArrayAttr>(attr.getValue());
    if (!names || !llvm::all_of(names, llvm::IsaPred<StringAttr>))
      return op->emitError("'")
             << name << "' must be an array of parameter names, got "
             << attr.getValue();
    return success();
  }
  if (name == kStagesAttrName) {
    auto module = dyn_cast<ModuleOp>(op);
    if (!module)
      return op->emitError("'") << name << "' belongs on a module";
    StageTable table;
    std::string error;
    if (!readStageTable(module, table, error))
      return op->emitError(error);
    return success();
  }
  if (name == kOptimizerAttrName) {
    if (failed(onFunction()))
      return failure();
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError("'")
             << name << "' must name the optimizer (a string), got "
             << attr.getValue();
    return success();
  }
  if (name == kOutSlotAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError("'") << name << "' must be a unit attribute";
    return success();
  }
  if (name == kSkipTermsAttrName) {
    if (op->getName().getDialectNamespace() != "linalg")
      return op->emitError("'") << name << "' belongs on a linalg op";
    auto dims = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!dims || dims.size() != 2 || dims[0] < 0 || dims[1] < 0 ||
        dims[0] == dims[1])
      return op->emitError("'")
             << name << "' must be two distinct loop dimensions, got "
             << attr.getValue();
    return success();
  }
  if (name == kParamAttrName || name == kDataAttrName ||
      name == kRangeAttrName || name == kRangeFromAttrName ||
      name == kRangeIgnoredAttrName || name == kRngAttrName)
    return op->emitError("'")
           << name << "' belongs on an argument of the model function";
  return op->emitError("unknown attribute '") << name << "' of the zb dialect";
}

LogicalResult ZBDialect::verifyRegionArgAttribute(Operation *op,
                                                  unsigned regionIndex,
                                                  unsigned argIndex,
                                                  NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto where = [&]() {
    return op->emitError("argument #") << argIndex << ": '" << name << "' ";
  };
  Region &region = op->getRegion(regionIndex);
  Type type =
      region.empty() ? Type() : region.front().getArgument(argIndex).getType();
  if (auto fn = dyn_cast<FunctionOpInterface>(op))
    type = fn.getArgumentTypes()[argIndex];
  // The element type, while the argument is still a tensor or memref (not
  // once lowered to LLVM pointers).
  auto shaped = dyn_cast_or_null<ShapedType>(type);
  Type element = shaped ? shaped.getElementType() : Type();
  if (name == kParamAttrName) {
    auto text = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<UnitAttr>(attr.getValue()) && (!text || text.empty()))
      return where() << "must be unit or a non-empty name, got "
                     << attr.getValue();
    if (element && !isa<FloatType>(element))
      return where() << "marks a parameter, which needs float elements, got "
                     << type;
    return success();
  }
  if (name == kDataAttrName) {
    auto text = dyn_cast<StringAttr>(attr.getValue());
    if (!text || text.empty())
      return where() << "must be a non-empty name, got " << attr.getValue();
    return success();
  }
  if (name == kRangeAttrName) {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    if (!value || value.getInt() < 1)
      return where() << "must be a positive integer, got " << attr.getValue();
    if (element && !element.isInteger())
      return where() << "bounds integer data, but the argument is " << type;
    return success();
  }
  // zb.range_from and zb.range_ignored widen a zb.range beside them (known
  // where the op is a function).
  auto fn = dyn_cast<FunctionOpInterface>(op);
  auto rangeBeside = [&](StringRef attrName) {
    return fn ? fn.getArgAttrOfType<IntegerAttr>(argIndex, attrName)
              : IntegerAttr();
  };
  if (name == kRangeFromAttrName) {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    if (!value || value.getInt() >= 0)
      return where() << "must be a negative integer, got " << attr.getValue();
    IntegerAttr range = rangeBeside(kRangeAttrName);
    if (fn && !range)
      return where() << "needs 'zb.range' beside it";
    // Indices counted from the end reach back one table's length at most.
    if (range && value.getInt() < -range.getInt())
      return where() << "must be -range or more (" << -range.getInt()
                     << "), got " << value.getInt();
    if (element && !element.isInteger())
      return where() << "bounds integer data, but the argument is " << type;
    return success();
  }
  if (name == kRangeIgnoredAttrName) {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    if (!value)
      return where() << "must be an integer, got " << attr.getValue();
    IntegerAttr range = rangeBeside(kRangeAttrName);
    if (fn && !range)
      return where() << "needs 'zb.range' beside it";
    IntegerAttr from = rangeBeside(kRangeFromAttrName);
    int64_t low = from ? from.getInt() : 0;
    if (range && value.getInt() >= low && value.getInt() < range.getInt())
      return where() << "must lie outside the range [" << low << ", "
                     << range.getInt() << "), got " << value.getInt();
    if (element && !element.isInteger())
      return where() << "bounds integer data, but the argument is " << type;
    return success();
  }
  if (name == kRngAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return where() << "must be unit, got " << attr.getValue();
    auto tensor = dyn_cast_or_null<RankedTensorType>(type);
    if (tensor && (tensor.getShape() != ArrayRef<int64_t>{1} ||
                   !tensor.getElementType().isInteger(64)))
      return where() << "marks a random key, a tensor<1xi64>, got " << type;
    return success();
  }
  return where() << "is not an argument attribute of the zb dialect";
}
