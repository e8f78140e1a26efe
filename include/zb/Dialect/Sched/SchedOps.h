//===- SchedOps.h - The sched dialect operations ----------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_SCHED_SCHEDOPS_H
#define ZB_DIALECT_SCHED_SCHEDOPS_H

#include "zb/Dialect/Sched/SchedDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"

#include "zb/Dialect/Sched/SchedEnums.h.inc"

#define GET_OP_CLASSES
#include "zb/Dialect/Sched/SchedOps.h.inc"

#endif // ZB_DIALECT_SCHED_SCHEDOPS_H
