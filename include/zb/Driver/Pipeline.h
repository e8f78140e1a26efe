//===- Pipeline.h - A model lowered for a pipeline --------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The model after the named pipeline (--zb-pipeline, stopped before CPU or
// GPU code): one step function per rank, each tagged with its rank and its
// parameters, and the stage table. Every rank of a run lowers the model
// alike and then compiles only its own part (--zb-keep-rank).
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_PIPELINE_H
#define ZB_DRIVER_PIPELINE_H

#include "zb/Dialect/ZB/StageTable.h"
#include "zb/Model/Model.h"
#include "zb/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>
#include <string>
#include <vector>

namespace zb {

/// What one rank of the pipeline runs.
struct RankProgramInfo {
  int rank = 0;
  /// The step function's symbol ("zb_rank<r>_step").
  std::string stepFunction;
  /// Its parameters, in the order of its arguments and gradient results.
  std::vector<std::string> params;
  /// Per parameter: whether it counts in the global gradient norm on this
  /// rank (a shared parameter counts on its first holder only, the lowest
  /// rank whose step function lists it).
  std::vector<bool> countsInNorm;

  /// The arguments of `signature` that are `params`, in that order.
  std::vector<const ModelArg *>
  paramArgs(const ModelSignature &signature) const;
};

class LoweredPipeline {
public:
  /// Lowers a clone of `model` through the named pipeline with `options`
  /// (lowerToCPU must be false). Returns null on failure: with `error` set
  /// for bad options, empty when a pass failed (its diagnostics went to the
  /// context's handlers).
  static std::unique_ptr<LoweredPipeline>
  lower(mlir::ModuleOp model, const ZBPipelineOptions &options,
        std::string &error);

  /// Rank `rank`'s step function and parameters; false with `error` set
  /// when the module has none for it.
  bool rankProgram(int rank, RankProgramInfo &info, std::string &error) const;

  /// A copy of the module with only rank `rank`'s functions, ready for the
  /// CPU or GPU compiler; null with `error` set on failure.
  mlir::OwningOpRef<mlir::ModuleOp> keepRank(int rank,
                                             std::string &error) const;

  const StageTable &stageTable() const { return table; }
  mlir::ModuleOp module() const { return lowered.get(); }

private:
  mlir::OwningOpRef<mlir::ModuleOp> lowered;
  StageTable table;
};

} // namespace zb

#endif // ZB_DRIVER_PIPELINE_H
