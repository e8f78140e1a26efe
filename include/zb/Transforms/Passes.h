//===- Passes.h - ZeroBubble passes -----------------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_TRANSFORMS_PASSES_H
#define ZB_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

namespace zb {

#define GEN_PASS_DECL
#include "zb/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zb/Transforms/Passes.h.inc"

} // namespace zb

#endif // ZB_TRANSFORMS_PASSES_H
