//===- CompiledOptimizer.h - Inputs of a compiled update --------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// What a caller of `@zb_rank<r>_update` (--zb-emit-optimizer) passes for a
// runtime optimizer configuration: which kind of update to compile, and
// each step's hyper-parameter vector (layout in
// zb/Conversion/CompiledOptimizer.h), computed as zbrt::Optimizer computes
// the same values, so that the compiled update takes the same step.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_COMPILEDOPTIMIZER_H
#define ZB_DRIVER_COMPILEDOPTIMIZER_H

#include "zb/Conversion/CompiledOptimizer.h"
#include "zb/Target/CPUCompiler.h"

#include "zbrt/Optimizer.h"

#include <array>

namespace zb {

/// The compiled update that implements `config`: adamw, sgd-momentum
/// (momentum != 0) or sgd.
optimizer::Kind compiledOptimizerKind(const zbrt::OptimizerConfig &config);

/// The hyper-parameters of step `step` (from 1) with gradients scaled by
/// `clipScale` (1: not clipped).
std::array<double, optimizer::kNumHyper>
compiledOptimizerHyper(const zbrt::OptimizerConfig &config, int64_t step,
                       double clipScale);

/// Compiles the optimizer updates (--zb-emit-optimizer of `kind`) of the
/// step functions in `moduleText` for `options.target` (cpu or gpu) into a
/// shared object at `path`, exporting `zb_entry_zb_rank<r>_update`. On
/// failure returns false with `error` set.
bool compileOptimizerUpdates(llvm::StringRef moduleText, optimizer::Kind kind,
                             const CPUCompileOptions &options,
                             llvm::StringRef path, std::string &error);

} // namespace zb

#endif // ZB_DRIVER_COMPILEDOPTIMIZER_H
