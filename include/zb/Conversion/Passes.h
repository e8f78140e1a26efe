//===- Passes.h - ZeroBubble conversion passes ------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_CONVERSION_PASSES_H
#define ZB_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace zb {

#define GEN_PASS_DECL
#include "zb/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zb/Conversion/Passes.h.inc"

} // namespace zb

#endif // ZB_CONVERSION_PASSES_H
