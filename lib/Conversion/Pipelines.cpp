//===- Pipelines.cpp - The ZeroBubble pass pipelines ----------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"

#include "zb/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void zb::buildLowerToCPUPipeline(OpPassManager &pm,
                                 const LowerToCPUOptions &options) {
  // A single-process model: stage markers are identities.
  pm.addPass(zb::createZBStripCuts());
  pm.addPass(zb::createZBDecomposeAggregates());
  pm.addPass(zb::createZBFuseElementwise());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(zb::createZBPrepareEntryPoints());

  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm, dealloc);

  if (options.useRuntimeGemm)
    pm.addPass(zb::createZBLowerGemmToRuntime());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());

  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertBufferizationToMemRefPass());
  math::MathExpandOpsPassOptions expand;
  expand.opMnemonics = {"rsqrt"};
  pm.addPass(math::createMathExpandOpsPass(expand));
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void zb::registerZBPipelines() {
  PassPipelineRegistration<LowerToCPUOptions>(
      "zb-lower-to-cpu",
      "Lower a model on tensors (linalg, tensor, arith, math) to the LLVM "
      "dialect for the CPU: fusion, bufferization, runtime gemm, loops",
      buildLowerToCPUPipeline);
}
