//===- Passes.h - ZeroBubble passes -----------------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_TRANSFORMS_PASSES_H
#define ZB_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"
#include "zb/Dialect/Pipe/PipeDialect.h"
#include "zb/Dialect/ZB/ZBDialect.h"

namespace zb {

#define GEN_PASS_DECL
#include "zb/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zb/Transforms/Passes.h.inc"

} // namespace zb

#endif // ZB_TRANSFORMS_PASSES_H
