//===- PipeDialect.h - The pipe dialect -------------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_PIPE_PIPEDIALECT_H
#define ZB_DIALECT_PIPE_PIPEDIALECT_H

#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/IR/Dialect.h"

#include "zb/Dialect/Pipe/PipeOpsDialect.h.inc"

#endif // ZB_DIALECT_PIPE_PIPEDIALECT_H
