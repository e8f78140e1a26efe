//===- Partition.h - What the stage partition can do ------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// Queries of --zb-partition-stages's rules for tools that plan a partition
// (zb-run --balance profiles the model as finely as the cost model can cut
// it).
//
//===----------------------------------------------------------------------===//

#ifndef ZB_TRANSFORMS_PARTITION_H
#define ZB_TRANSFORMS_PARTITION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>

namespace zb {

/// The most stages the cost model can cut the model function `fn` into:
/// its valid cut points plus one (pipe.cut markers aside).
int64_t maxCostModelStages(mlir::func::FuncOp fn);

} // namespace zb

#endif // ZB_TRANSFORMS_PARTITION_H
