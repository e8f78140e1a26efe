//===- SchedDialect.h - The sched dialect -----------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_SCHED_SCHEDDIALECT_H
#define ZB_DIALECT_SCHED_SCHEDDIALECT_H

#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/IR/Dialect.h"

#include "zb/Dialect/Sched/SchedOpsDialect.h.inc"

#endif // ZB_DIALECT_SCHED_SCHEDDIALECT_H
