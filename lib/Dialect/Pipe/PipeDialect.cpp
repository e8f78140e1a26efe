//===- PipeDialect.cpp - The pipe dialect ---------------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Dialect/Pipe/PipeDialect.h"
#include "zb/Dialect/Pipe/PipeOps.h"

using namespace mlir;
using namespace zb::pipe;

#include "zb/Dialect/Pipe/PipeOpsDialect.cpp.inc"

void PipeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "zb/Dialect/Pipe/PipeOps.cpp.inc"
      >();
}
