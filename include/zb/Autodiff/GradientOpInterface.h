//===- GradientOpInterface.h - Reverse-mode rules ---------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_AUTODIFF_GRADIENTOPINTERFACE_H
#define ZB_AUTODIFF_GRADIENTOPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include "zb/Autodiff/GradientOpInterface.h.inc"

namespace zb::autodiff {

/// Attaches the gradient rules to the upstream ops (linalg, tensor, arith)
/// and to pipe.cut.
void registerGradientExternalModels(mlir::DialectRegistry &registry);

} // namespace zb::autodiff

#endif // ZB_AUTODIFF_GRADIENTOPINTERFACE_H
