//===- GradientOpInterface.td - Reverse-mode rules ---------*- tablegen -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_AUTODIFF_GRADIENTOPINTERFACE_TD
#define ZB_AUTODIFF_GRADIENTOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def ZB_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let description = [{
    The reverse-mode (vector-Jacobian product) rule of an op. Upstream ops
    get it as external models (see registerGradientExternalModels); the
    autodiff engine calls it for every op on the path from the
    differentiated inputs to the seeded outputs, last op first.
  }];
  let cppNamespace = "::zb::autodiff";
  let methods = [
    InterfaceMethod<[{
        Builds, with `builder`, the adjoints of the op's active inputs given
        `resultAdjoints` (one per result; null where a result has none).
        `isActive(v)` says whether the gradient of value `v` is wanted;
        `addAdjoint(v, adjoint)` accumulates an adjoint for `v`, which may be
        an operand or a value the op's regions use from above (an embedding
        table read inside a linalg.generic body). Emits a diagnostic and
        fails for a case the rule does not cover.
      }],
      "::llvm::LogicalResult", "buildAdjoints",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultAdjoints,
           "::llvm::function_ref<bool(::mlir::Value)>":$isActive,
           "::llvm::function_ref<void(::mlir::Value, ::mlir::Value)>":$addAdjoint)
    >
  ];
}

#endif // ZB_AUTODIFF_GRADIENTOPINTERFACE_TD
