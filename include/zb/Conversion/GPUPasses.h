//===- GPUPasses.h - ZeroBubble GPU conversion passes -----------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_CONVERSION_GPUPASSES_H
#define ZB_CONVERSION_GPUPASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace zb {

#define GEN_PASS_DECL
#include "zb/Conversion/GPUPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "zb/Conversion/GPUPasses.h.inc"

} // namespace zb

#endif // ZB_CONVERSION_GPUPASSES_H
