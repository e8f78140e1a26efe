//===- Pipeline.cpp - A model lowered for a pipeline ----------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/Pipeline.h"

#include "zb/Conversion/Passes.h"
#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace zb;

std::unique_ptr<LoweredPipeline>
LoweredPipeline::lower(ModuleOp model, const ZBPipelineOptions &options,
                       std::string &error) {
  auto result = std::unique_ptr<LoweredPipeline>(new LoweredPipeline());
  result->lowered = model.clone();
  PassManager pm(model.getContext());
  if (failed(buildZBPipeline(pm, options, error)))
    return nullptr;
  // The passes report their errors as diagnostics.
  if (failed(pm.run(*result->lowered))) {
    error.clear();
    return nullptr;
  }
  if (!readStageTable(*result->lowered, result->table, error))
    return nullptr;
  return result;
}

std::vector<const ModelArg *>
RankProgramInfo::paramArgs(const ModelSignature &signature) const {
  std::vector<const ModelArg *> args;
  for (const std::string &name : params)
    for (const ModelArg &arg : signature.args)
      if (arg.isParam() && arg.name == name)
        args.push_back(&arg);
  return args;
}

bool LoweredPipeline::rankProgram(int rank, RankProgramInfo &info,
                                  std::string &error) const {
  info = RankProgramInfo();
  info.rank = rank;
  info.stepFunction = "zb_rank" + std::to_string(rank) + "_step";
  ModuleOp program = module();
  auto step = program.lookupSymbol<func::FuncOp>(info.stepFunction);
  auto names = step ? step->getAttrOfType<ArrayAttr>(ZBDialect::kParamsAttrName)
                    : ArrayAttr();
  if (!names) {
    error = "the compiled program has no step function for rank " +
            std::to_string(rank);
    return false;
  }
  llvm::StringMap<int64_t> firstHolder;
  for (auto fn : program.getOps<func::FuncOp>()) {
    auto holder = fn->getAttrOfType<IntegerAttr>(ZBDialect::kRankAttrName);
    auto held = fn->getAttrOfType<ArrayAttr>(ZBDialect::kParamsAttrName);
    if (!holder || !held)
      continue;
    for (StringAttr name : held.getAsRange<StringAttr>()) {
      auto [it, inserted] = firstHolder.try_emplace(name, holder.getInt());
      if (!inserted)
        it->second = std::min(it->second, holder.getInt());
    }
  }
  for (StringAttr name : names.getAsRange<StringAttr>()) {
    info.params.push_back(name.str());
    info.countsInNorm.push_back(firstHolder.lookup(name) == rank);
  }
  return true;
}

OwningOpRef<ModuleOp> LoweredPipeline::keepRank(int rank,
                                                std::string &error) const {
  OwningOpRef<ModuleOp> mine = module().clone();
  PassManager pm(module().getContext());
  ZBKeepRankOptions keep;
  keep.rank = rank;
  pm.addPass(createZBKeepRank(keep));
  if (failed(pm.run(*mine))) {
    error = "selecting rank " + std::to_string(rank) + "'s program failed";
    return nullptr;
  }
  return mine;
}
