//===- Passes.h - ZeroBubble conversion passes ------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_CONVERSION_PASSES_H
#define ZB_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace zb {

#define GEN_PASS_DECL
#include "zb/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zb/Conversion/Passes.h.inc"

/// Options of the CPU lowering pipeline.
struct LowerToCPUOptions : mlir::PassPipelineOptions<LowerToCPUOptions> {
  Option<bool> useRuntimeGemm{
      *this, "runtime-gemm",
      llvm::cl::desc("Lower matmul-family ops to the runtime's BLAS gemm "
                     "(otherwise to loops)"),
      llvm::cl::init(true)};
};

/// Builds `--zb-lower-to-cpu`: linalg on tensors to the LLVM dialect, with
/// elementwise fusion, one-shot bufferization with buffer deallocation,
/// results turned into out-parameters, matmul-family ops as runtime gemm
/// calls, the rest as loops, and a C entry point per public function.
void buildLowerToCPUPipeline(mlir::OpPassManager &pm,
                             const LowerToCPUOptions &options);

/// Registers the ZeroBubble pass pipelines (`--zb-lower-to-cpu`).
void registerZBPipelines();

} // namespace zb

#endif // ZB_CONVERSION_PASSES_H
