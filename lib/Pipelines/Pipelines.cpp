//===- Pipelines.cpp - The ZeroBubble pass pipelines ----------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Pipelines/Pipelines.h"

#include "zb/Conversion/CompiledOptimizer.h"
#include "zb/Conversion/Passes.h"
#include "zb/Dialect/Sched/Transforms/Passes.h"
#include "zb/Schedule/Generators.h"
#include "zb/Schedule/Problem.h"
#include "zb/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/BufferizationToMemRef/BufferizationToMemRef.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <limits>
#include <tuple>
#include <utility>

using namespace mlir;

void zb::buildBufferizeModelPipeline(OpPassManager &pm) {
  // A single-process model: stage markers are identities.
  pm.addPass(zb::createZBStripCuts());
  pm.addPass(zb::createZBDecomposeAggregates());
  pm.addPass(zb::createZBFuseElementwise());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // After CSE, which merges them: a fill per writer, not a copy per writer.
  pm.addPass(zb::createZBUniqueFills());
  // The weight gradients a step adds to its sums, added by their gemms.
  pm.addNestedPass<func::FuncOp>(zb::createZBAccumulateInGemms());
  // Before bufferization: the record calls take tensors.
  pm.addPass(zb::createZBLowerRunningStats());
  pm.addPass(zb::createZBPrepareEntryPoints());

  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // A function that updates an argument in place (the gradient sums) stops
  // returning it.
  pm.addPass(bufferization::createDropEquivalentBufferResultsPass());
  pm.addPass(zb::createZBUniqueResults());
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(zb::createZBResultsToSlots());
  pm.addPass(zb::createZBDeallocateBuffers());
}

void zb::buildLowerToCPUPipeline(OpPassManager &pm,
                                 const LowerToCPUOptions &options) {
  buildBufferizeModelPipeline(pm);
  if (options.useRuntimeGemm) {
    pm.addPass(zb::createZBLowerGemmToRuntime());
    pm.addPass(zb::createZBLowerTransposesToRuntime());
  }
  // Row reductions as vector code in a fixed order; other long sums in
  // blocks; the rest as loops that LLVM vectorises where no order changes.
  pm.addPass(zb::createZBVectorizeRowReductions());
  pm.addPass(zb::createZBSplitLongSums());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // LLVM's loop passes take time growing with the square of a function's
  // loops: no function keeps more than a few hundred.
  pm.addPass(zb::createZBOutlineLoopNests());
  buildLoopsToLLVMPipeline(pm);
}

void zb::buildLoopsToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertBufferizationToMemRefPass());
  math::MathExpandOpsPassOptions expand;
  expand.opMnemonics = {"rsqrt"};
  pm.addPass(math::createMathExpandOpsPass(expand));
  pm.addPass(zb::createZBApproximateMath());
  pm.addPass(zb::createZBExpandBF16());
  // LLVM intrinsics first (the approximations' fma among them), libm calls
  // for what has none (f64 erf).
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  // Compiled code allocates through the runtime, which counts its memory.
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  memrefToLLVM.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

LogicalResult zb::buildZBPipeline(OpPassManager &pm,
                                  const ZBPipelineOptions &options,
                                  std::string &error) {
  if (options.target != "cpu" && options.target != "gpu") {
    error =
        "unknown target '" + options.target.getValue() + "'; known: cpu, gpu";
    return failure();
  }
  if (options.dtype != "f32" && options.dtype != "bf16") {
    error =
        "unknown dtype '" + options.dtype.getValue() + "'; known: f32, bf16";
    return failure();
  }
  if (!options.optimizer.empty() &&
      !optimizer::parseKind(options.optimizer.getValue())) {
    error = "unknown optimizer '" + options.optimizer.getValue() +
            "'; known: sgd, sgd-momentum, adamw";
    return failure();
  }
  // The schedule library's limit on microbatches (it sizes its tables by
  // them); the replicas only scale costs, taken as int by the passes.
  for (auto [name, value, limit] :
       {std::tuple<const char *, int64_t, int64_t>{
            "microbatches", options.microbatches, schedule::kMaxMicrobatches},
        {"replicas", options.replicas, std::numeric_limits<int32_t>::max()}})
    if (value > limit) {
      error = std::string("'") + name + "' of " + std::to_string(value) +
              " is past the limit of " + std::to_string(limit);
      return failure();
    }
  if (std::string problem = schedule::memLimitProblem(options.memLimit);
      !problem.empty()) {
    error = problem;
    return failure();
  }
  const schedule::ScheduleInfo *info =
      schedule::lookupSchedule(options.schedule);
  if (!info) {
    error = "unknown schedule '" + options.schedule.getValue() +
            "'; known: " + schedule::knownScheduleNames();
    return failure();
  }
  int64_t chunks = info->chunksFor(options.chunks);
  if (chunks < info->minChunks ||
      (info->fixedLayout && chunks != info->defaultChunks)) {
    error = "schedule '" + options.schedule.getValue() + "' needs " +
            std::to_string(info->fixedLayout ? info->defaultChunks
                                             : info->minChunks) +
            (info->fixedLayout ? "" : " or more") + " chunks per rank";
    return failure();
  }
  ZBPartitionStagesOptions partition;
  partition.numStages = options.stages;
  partition.numChunks = chunks;
  partition.placement = schedule::placementName(info->defaultPlacement);
  // The pipeline serves any P: markers written for another P give way to
  // the cost model (with a warning).
  partition.ignoreMismatchedCuts = true;
  partition.profile = options.partitionProfile;
  // Measured times: the cuts follow what the schedule makes of them (at
  // its default memory).
  if (!options.forwardOnly) {
    partition.scheduleName = options.schedule;
    partition.numMicrobatches = options.microbatches;
  }
  // cuBLAS has no grouped gemm: a mixture of experts' products run over
  // every expert, as batched gemms (before the partition and autodiff, so
  // that both see what runs).
  if (options.target == "gpu")
    pm.addPass(createZBExpandGroupedProducts());
  pm.addPass(createZBPartitionStages(partition));
  pm.addPass(createZBAutodiff());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createZBSplitBackward());
  // Causal attention's products: the terms a mask makes unneeded are marked
  // for the gemm calls to skip (while the stage's regions still show where
  // each stashed value comes from), and the stages' costs count the rest.
  // The CPU's gemm calls skip them; cuBLAS computes every term.
  if (options.target == "cpu")
    pm.addPass(createZBMarkTriangularProducts());
  // Mixed precision: bf16 stashes, before the schedule plans their bytes.
  if (options.dtype == "bf16") {
    ZBNarrowStashOptions narrow;
    narrow.dtype = "bf16";
    pm.addPass(createZBNarrowStash(narrow));
  }
  sched::ZBScheduleOptions scheduleOptions;
  scheduleOptions.scheduleName = options.schedule;
  scheduleOptions.numMicrobatches = options.microbatches;
  scheduleOptions.memLimit = options.memLimit;
  scheduleOptions.costsFile = options.costs;
  scheduleOptions.numReplicas = static_cast<int>(options.replicas);
  scheduleOptions.forwardOnly = options.forwardOnly;
  pm.addPass(sched::createZBSchedule(scheduleOptions));
  // NCCL transfers carry no tags: each link must receive in send order.
  sched::ZBInsertCommOptions comm;
  comm.inOrderLinks = options.target == "gpu";
  pm.addPass(sched::createZBInsertComm(comm));
  // Loop-form step functions for either target: on the GPU the action table
  // stays in host memory (zb-map-to-gpu), read by the host's loop.
  ZBLowerToRuntimeOptions runtime;
  runtime.unroll = options.unroll;
  pm.addPass(createZBLowerToRuntime(runtime));
  if (!options.optimizer.empty()) {
    ZBEmitOptimizerOptions update;
    update.kind = options.optimizer.getValue();
    pm.addPass(createZBEmitOptimizer(update));
  }
  if (!options.lowerToCPU)
    return success();
  if (options.target == "gpu") {
    LowerToGPUOptions gpu;
    gpu.dtype = options.dtype.getValue();
    buildLowerToGPUPipeline(pm, gpu);
  } else {
    buildLowerToCPUPipeline(pm, LowerToCPUOptions());
  }
  return success();
}

void zb::registerZBPipelines() {
  // Registered by hand rather than through PassPipelineRegistration, whose
  // builder cannot fail: a bad option value is a diagnostic through the
  // pipeline parser's error handler, not a crash.
  registerPassPipeline(
      "zb-pipeline",
      "From a model to per-rank step functions: partition, autodiff, B/W "
      "split, schedule, send/recv, lowering (options: stages, microbatches, "
      "schedule, chunks, mem-limit, costs, partition-profile, target, dtype, "
      "lower-to-cpu, unroll, optimizer)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        ZBPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        std::string error;
        if (failed(buildZBPipeline(pm, options, error)))
          return errorHandler("zb-pipeline: " + error);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> handler) {
        handler(ZBPipelineOptions());
      });
  PassPipelineRegistration<LowerToCPUOptions>(
      "zb-lower-to-cpu",
      "Lower a model on tensors (linalg, tensor, arith, math) to the LLVM "
      "dialect for the CPU: fusion, bufferization, runtime gemm, loops",
      buildLowerToCPUPipeline);
  registerZBGPUPipeline();
}
