//===- zb-opt.cpp - The ZeroBubble optimizer driver -----------------------===//
//
// Part of ZeroBubble MLIR.
//
// An mlir-opt with the upstream dialects and passes the pipeline uses, plus
// the pipe and sched dialects and every zb- pass.
//
//===----------------------------------------------------------------------===//

#include "zb/Autodiff/GradientOpInterface.h"
#include "zb/Conversion/GPUPasses.h"
#include "zb/Conversion/Passes.h"
#include "zb/Dialect/Pipe/PipeDialect.h"
#include "zb/Dialect/Sched/SchedDialect.h"
#include "zb/Dialect/Sched/Transforms/Passes.h"
#include "zb/Dialect/ZB/ZBDialect.h"
#include "zb/Pipelines/Pipelines.h"
#include "zb/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  zb::registerZBPasses();
  zb::registerZBConversionPasses();
  zb::registerZBGPUPasses();
  zb::registerZBPipelines();
  zb::sched::registerSchedPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // --gpu-module-to-binary (in --zb-lower-to-gpu) translates kernels.
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  registry
      .insert<zb::ZBDialect, zb::pipe::PipeDialect, zb::sched::SchedDialect>();
  zb::autodiff::registerGradientExternalModels(registry);

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "ZeroBubble MLIR optimizer driver\n", registry));
}
