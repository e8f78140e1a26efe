//===- Passes.h - Passes that build sched programs --------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_SCHED_TRANSFORMS_PASSES_H
#define ZB_DIALECT_SCHED_TRANSFORMS_PASSES_H

#include "zb/Dialect/Sched/SchedDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace zb::sched {

#define GEN_PASS_DECL
#include "zb/Dialect/Sched/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zb/Dialect/Sched/Transforms/Passes.h.inc"

} // namespace zb::sched

#endif // ZB_DIALECT_SCHED_TRANSFORMS_PASSES_H
