//===- StageTable.cpp - What the runtime knows of the stages --------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Dialect/ZB/StageTable.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace zb;

void zb::writeStageTable(ModuleOp module, const StageTable &table) {
  Builder b(module.getContext());
  auto ints = [&](ArrayRef<int> values) {
    SmallVector<int64_t> wide(values.begin(), values.end());
    return b.getDenseI64ArrayAttr(wide);
  };
  auto bytes = [&](ArrayRef<double> values) {
    SmallVector<int64_t> wide;
    for (double v : values)
      wide.push_back(static_cast<int64_t>(v));
    return b.getDenseI64ArrayAttr(wide);
  };
  module->setAttr(
      ZBDialect::kStagesAttrName,
      b.getDictionaryAttr(
          {b.getNamedAttr("rank", ints(table.ranks)),
           b.getNamedAttr("cost_f", b.getDenseF64ArrayAttr(table.costF)),
           b.getNamedAttr("cost_b", b.getDenseF64ArrayAttr(table.costB)),
           b.getNamedAttr("cost_w", b.getDenseF64ArrayAttr(table.costW)),
           b.getNamedAttr("mem_b", bytes(table.memB)),
           b.getNamedAttr("mem_w", bytes(table.memW)),
           b.getNamedAttr("param_bytes", bytes(table.paramBytes))}));
}

bool zb::readStageTable(ModuleOp module, StageTable &table,
                        std::string &error) {
  auto dict = module->getAttrOfType<DictionaryAttr>(ZBDialect::kStagesAttrName);
  if (!dict) {
    error = "the compiled program has no '" + ZBDialect::kStagesAttrName.str() +
            "' attribute";
    return false;
  }
  auto ints = [&](StringRef key, auto &out) {
    auto array = dict.getAs<DenseI64ArrayAttr>(key);
    if (!array)
      return false;
    out.assign(array.asArrayRef().begin(), array.asArrayRef().end());
    return true;
  };
  auto floats = [&](StringRef key, std::vector<double> &out) {
    auto array = dict.getAs<DenseF64ArrayAttr>(key);
    if (!array)
      return false;
    out.assign(array.asArrayRef().begin(), array.asArrayRef().end());
    return true;
  };
  if (!ints("rank", table.ranks) || !floats("cost_f", table.costF) ||
      !floats("cost_b", table.costB) || !floats("cost_w", table.costW) ||
      !ints("mem_b", table.memB) || !ints("mem_w", table.memW) ||
      !ints("param_bytes", table.paramBytes)) {
    error = "the compiled program's '" + ZBDialect::kStagesAttrName.str() +
            "' attribute is malformed";
    return false;
  }
  size_t n = table.ranks.size();
  for (size_t size :
       {table.costF.size(), table.costB.size(), table.costW.size(),
        table.memB.size(), table.memW.size(), table.paramBytes.size()})
    if (size != n) {
      error = "the compiled program's '" + ZBDialect::kStagesAttrName.str() +
              "' attribute has lists of different lengths";
      return false;
    }
  return true;
}
