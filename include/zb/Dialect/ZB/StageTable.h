//===- StageTable.h - What the runtime knows of the stages ------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// --zb-lower-to-runtime records, as the module attribute `zb.stages`, each
// stage's rank, costs and stash sizes, for the tools that run the lowered
// program (zb-run's measurements). This header is the one writer and the
// one reader of that attribute; the zb dialect verifies it with the reader.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_ZB_STAGETABLE_H
#define ZB_DIALECT_ZB_STAGETABLE_H

#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace zb {

/// Per stage, in stage order: its rank, its cost_f/b/w and mem_b/w (0 where
/// the stage had none), and the bytes of its parameters (param_bytes: what
/// its gradient bucket holds under data parallelism).
struct StageTable {
  std::vector<int> ranks;
  std::vector<double> costF, costB, costW;
  std::vector<double> memB, memW;
  std::vector<double> paramBytes;
};

/// Sets `zb.stages` on `module`.
void writeStageTable(mlir::ModuleOp module, const StageTable &table);

/// Reads `zb.stages`; on failure returns false and sets `error`.
bool readStageTable(mlir::ModuleOp module, StageTable &table,
                    std::string &error);

} // namespace zb

#endif // ZB_DIALECT_ZB_STAGETABLE_H
