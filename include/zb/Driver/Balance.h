//===- Balance.h - Stages balanced on measured times ------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// zb-run --balance: before training, the pipeline's ranks run a few steps
// of the model cut as finely as the cost model can (up to 4 stages per
// pipeline stage), without updates, and measure each fine stage's F, B and
// W. Every process then lowers the pipeline with that profile
// (--zb-pipeline partition-profile=): the partition cuts at the measured
// times instead of the FLOPs, and the schedule plans with them.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_BALANCE_H
#define ZB_DRIVER_BALANCE_H

#include "zb/Driver/Compile.h"
#include "zb/Driver/RunOptions.h"

#include "zbrt/Comm.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace zb {

/// Steps the fine partition runs; the first warms up.
inline constexpr int64_t kBalanceSteps = 3;

/// The profile (zb-run --profile's JSON) of `model` (the text of which is
/// `modelText`) cut into up to 4·P·V stages (as many as the cost model can
/// cut, a multiple of the ranks that run them), with `options`'
/// microbatches and data (replica 0's), given to every process of `world`.
/// The ranks of replica 0's `pipeline` run the fine stages round the
/// pipeline (interleaved 1F1B), like the real run sharing the machine; when
/// M is not a multiple of P, world rank 0 runs all of them alone. The fine
/// programs compile through `cache`, which reports bad entries to `warn`.
/// Returns false with `error` set (alike on every process) on failure.
bool measureFineProfile(mlir::ModuleOp model, llvm::StringRef modelText,
                        const RunOptions &options,
                        const CompileSettings &settings, CompileCache &cache,
                        CompileCache::Warn warn, zbrt::Comm &pipeline,
                        zbrt::Comm &world, int64_t replica,
                        std::string &profile, std::string &error);

} // namespace zb

#endif // ZB_DRIVER_BALANCE_H
