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
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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

/// Options of the end-to-end pipeline.
struct ZBPipelineOptions : mlir::PassPipelineOptions<ZBPipelineOptions> {
  Option<int64_t> stages{*this, "stages",
                         llvm::cl::desc("Pipeline ranks P"), llvm::cl::init(1)};
  Option<int64_t> microbatches{*this, "microbatches",
                               llvm::cl::desc("Microbatches M per step"),
                               llvm::cl::init(1)};
  Option<std::string> schedule{*this, "schedule",
                               llvm::cl::desc("Schedule (see zb-sched --help)"),
                               llvm::cl::init("zb-h1")};
  Option<int64_t> chunks{
      *this, "chunks",
      llvm::cl::desc("Stages per rank V (default: the schedule's)"),
      llvm::cl::init(0)};
  Option<double> memLimit{
      *this, "mem-limit",
      llvm::cl::desc("Peak activation bytes per rank for memory-aware "
                     "schedules (0: the schedule's default)"),
      llvm::cl::init(0.0)};
  Option<bool> lowerToCPU{
      *this, "lower-to-cpu",
      llvm::cl::desc("Finish with --zb-lower-to-cpu (default true)"),
      llvm::cl::init(true)};
};

/// Builds `--zb-pipeline`: partition into stages (placement and chunks from
/// the schedule), autodiff, cleanup, B/W split, schedule, send/recv,
/// lowering of stages and rank programs, then the CPU lowering. Returns
/// failure (with a message in `error`) for an unknown schedule or layout.
mlir::LogicalResult buildZBPipeline(mlir::OpPassManager &pm,
                                    const ZBPipelineOptions &options,
                                    std::string &error);

/// Registers the ZeroBubble pass pipelines (`--zb-lower-to-cpu`,
/// `--zb-pipeline`).
void registerZBPipelines();

} // namespace zb

#endif // ZB_CONVERSION_PASSES_H
