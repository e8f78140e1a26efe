//===- GPUPipeline.cpp - The GPU lowering pipeline ------------------------===//
//
// Part of ZeroBubble MLIR.
//
// --zb-lower-to-gpu: a bufferized model to host LLVM code that launches
// embedded NVVM kernels and calls cuBLAS through the runtime.
//
//===----------------------------------------------------------------------===//

#include "zb/Pipelines/Pipelines.h"

#include "zb/Conversion/GPUPasses.h"
#include "zb/Conversion/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/BufferizationToMemRef/BufferizationToMemRef.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/GPUCommon/GPUCommonPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/SCFToGPU/SCFToGPUPass.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/TargetParser/Triple.h"

#include <cstdlib>

using namespace mlir;

/// The CUDA toolkit whose ptxas and libdevice compile the kernels: the
/// `toolkit` option, else $CUDA_ROOT, $CUDA_HOME or $CUDA_PATH, else
/// /usr/local/cuda when it exists. Without libdevice, kernels calling math
/// functions (expf, logf, erff, ...) do not link.
static std::string findToolkit(StringRef option) {
  if (!option.empty())
    return option.str();
  for (const char *name : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (const char *path = std::getenv(name); path && *path)
      return path;
  if (llvm::sys::fs::is_directory("/usr/local/cuda"))
    return "/usr/local/cuda";
  return "";
}

// The NVPTX target's registration (libLLVM's C entry points).
extern "C" void LLVMInitializeNVPTXTargetInfo();
extern "C" void LLVMInitializeNVPTXTargetMC();

std::string zb::lowerToGPUProblem(const LowerToGPUOptions &options) {
  if (options.format != "bin" && options.format != "fatbin" &&
      options.format != "isa")
    return "unknown format '" + options.format.getValue() +
           "'; known: bin, fatbin, isa";
  // A chip NVPTX does not know would fail deep in instruction selection.
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTargetMC();
  llvm::Triple triple("nvptx64-nvidia-cuda");
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      target ? target->createMCSubtargetInfo(triple, "", "") : nullptr);
  if (!info || !info->isCPUStringValid(options.chip))
    return "unknown GPU architecture '" + options.chip.getValue() +
           "' (NVPTX's names: sm_80, sm_90, ...)";
  return "";
}

void zb::buildLowerToGPUPipeline(OpPassManager &pm,
                                 const LowerToGPUOptions &options) {
  // Refuses running statistics (the CPU lowering's runtime call reads host
  // memory) before the shared bufferization would lower them.
  ZBLowerRunningStatsOptions stats;
  stats.target = "gpu";
  pm.addPass(createZBLowerRunningStats(stats));
  buildBufferizeModelPipeline(pm);
  pm.addPass(createConvertBufferizationToMemRefPass());

  // Matmuls to cuBLAS; everything else to mapped parallel loops on device
  // buffers, then to kernels.
  ZBLowerGemmToCUBLASOptions gemm;
  gemm.dtype = options.dtype;
  pm.addPass(createZBLowerGemmToCUBLAS(gemm));
  // The canonicalizer drops the buffers bufferized scf.for loops carry
  // unchanged, so that zb-map-to-gpu can run such a loop in a kernel.
  pm.addPass(createCanonicalizerPass());
  ZBMapToGPUOptions map;
  map.blockSize = options.blockSize;
  pm.addPass(createZBMapToGPU(map));
  pm.addNestedPass<func::FuncOp>(createConvertParallelLoopToGpuPass());
  if (options.emulate) {
    // The same kernels run on the host, for testing without a GPU.
    pm.addPass(createZBEmulateGPU());
    pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
    buildLoopsToLLVMPipeline(pm);
    return;
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  // Block trees (a block per row) become shuffles in the kernels.
  pm.addNestedPass<gpu::GPUModuleOp>(createZBLowerAllReduce());
  // Launches, allocations and copies become asynchronous on the function's
  // stream (the runtime's compute stream), with one wait at its end.
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());

  // Kernels: NVVM, then PTX and a binary for the chip.
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  pm.addPass(createGpuNVVMAttachTarget(target));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  math::MathExpandOpsPassOptions expand;
  expand.opMnemonics = {"rsqrt"};
  pm.addPass(math::createMathExpandOpsPass(expand));
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
  pm.addNestedPass<gpu::GPUModuleOp>(createCanonicalizerPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createCSEPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createReconcileUnrealizedCastsPass());

  // Host: launches to the mgpu* ABI, kernels embedded as binaries.
  pm.addPass(createGpuToLLVMConversionPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  binary.toolkitPath = findToolkit(options.toolkit);
  pm.addPass(createGpuModuleToBinaryPass(binary));
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void zb::registerZBGPUPipeline() {
  // Registered by hand, as --zb-pipeline is: a bad option is a diagnostic.
  registerPassPipeline(
      "zb-lower-to-gpu",
      "Lower a model on tensors (linalg, tensor, arith, math) for NVIDIA "
      "GPUs: fusion, bufferization, cuBLAS gemm, kernels compiled to PTX and "
      "a cubin, host code calling the runtime's CUDA wrappers",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        LowerToGPUOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        if (std::string problem = lowerToGPUProblem(options); !problem.empty())
          return errorHandler("zb-lower-to-gpu: " + problem);
        buildLowerToGPUPipeline(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> handler) {
        handler(LowerToGPUOptions());
      });
}
