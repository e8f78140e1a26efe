//===- CompiledOptimizer.cpp - Inputs of a compiled update ----------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/CompiledOptimizer.h"

#include "zb/Conversion/Passes.h"
#include "zb/Driver/ModelFile.h"
#include "zb/Pipelines/Pipelines.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cmath>

using namespace zb;
using namespace zb::optimizer;

Kind zb::compiledOptimizerKind(const zbrt::OptimizerConfig &config) {
  if (config.kind == zbrt::OptimizerConfig::Kind::AdamW)
    return Kind::AdamW;
  return config.momentum != 0.0 ? Kind::SGDMomentum : Kind::SGD;
}

std::array<double, kNumHyper>
zb::compiledOptimizerHyper(const zbrt::OptimizerConfig &config, int64_t step,
                           double clipScale) {
  std::array<double, kNumHyper> h{};
  double lr = config.lr, wd = config.weightDecay;
  h[kLearningRate] = lr;
  h[kClipScale] = clipScale;
  h[kWeightDecay] = wd;
  h[kMomentum] = config.momentum;
  h[kFirstStep] = step == 1 ? 1.0 : 0.0;
  // As runtime/lib/Optimizer.cpp computes them.
  double t = static_cast<double>(step);
  h[kBeta1] = config.beta1;
  h[kOneMinusBeta1] = 1.0 - config.beta1;
  h[kBeta2] = config.beta2;
  h[kOneMinusBeta2] = 1.0 - config.beta2;
  h[kDecay] = 1.0 - lr * wd;
  h[kCorrection1] = 1.0 - std::pow(config.beta1, t);
  h[kCorrection2] = 1.0 - std::pow(config.beta2, t);
  h[kEpsilon] = config.eps;
  return h;
}

bool zb::compileOptimizerUpdates(llvm::StringRef moduleText, Kind kind,
                                 const CPUCompileOptions &options,
                                 llvm::StringRef path, std::string &error) {
  mlir::DialectRegistry registry;
  ModelFile::registerDialects(registry);
  registerCPUCompilerDependencies(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(moduleText, &context);
  if (!module) {
    error = "cannot parse the module";
    return false;
  }
  mlir::PassManager pm(&context);
  ZBEmitOptimizerOptions update;
  update.kind = kindName(kind).str();
  pm.addPass(createZBEmitOptimizer(update));
  if (options.target == "gpu")
    buildLowerToGPUPipeline(pm, LowerToGPUOptions());
  else
    buildLowerToCPUPipeline(pm, LowerToCPUOptions());
  if (mlir::failed(pm.run(*module))) {
    error = "lowering the optimizer updates failed";
    return false;
  }
  if (mlir::failed(compileToSharedObject(*module, path, options))) {
    error = "compiling the optimizer updates failed";
    return false;
  }
  return true;
}
