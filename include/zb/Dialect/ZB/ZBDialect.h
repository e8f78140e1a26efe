//===- ZBDialect.h - The zb attribute dialect -------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_ZB_ZBDIALECT_H
#define ZB_DIALECT_ZB_ZBDIALECT_H

#include "mlir/IR/Dialect.h"

#include "zb/Dialect/ZB/ZBDialect.h.inc"

#endif // ZB_DIALECT_ZB_ZBDIALECT_H
