//===- PipeOps.h - The pipe dialect operations ------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_PIPE_PIPEOPS_H
#define ZB_DIALECT_PIPE_PIPEOPS_H

#include "zb/Dialect/Pipe/PipeDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace zb::pipe {
class YieldOp;
} // namespace zb::pipe

#define GET_OP_CLASSES
#include "zb/Dialect/Pipe/PipeOps.h.inc"

#endif // ZB_DIALECT_PIPE_PIPEOPS_H
