//===- SchedDialect.cpp - The sched dialect -------------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Dialect/Sched/SchedDialect.h"
#include "zb/Dialect/Sched/SchedOps.h"

using namespace mlir;
using namespace zb::sched;

#include "zb/Dialect/Sched/SchedOpsDialect.cpp.inc"

void SchedDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "zb/Dialect/Sched/SchedOps.cpp.inc"
      >();
}
