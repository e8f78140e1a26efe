//===- Balance.cpp - Stages balanced on measured times --------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/Balance.h"

#include "zb/Driver/Measure.h"
#include "zb/Driver/ModelFile.h"
#include "zb/Driver/Pipeline.h"
#include "zb/Driver/Programs.h"
#include "zb/Driver/Training.h"
#include "zb/Transforms/Partition.h"

#include "mlir/IR/Diagnostics.h"

using namespace zb;

/// The profile of the fine partition run on the ranks of `comm` (this
/// process's pipeline, or this process alone), on its rank 0; false with
/// `error` set on failure.
static bool measureHere(mlir::ModuleOp model, llvm::StringRef modelText,
                        const RunOptions &options,
                        const CompileSettings &settings, CompileCache &cache,
                        CompileCache::Warn warn, zbrt::Comm &comm,
                        std::string &profile, std::string &error) {
  int ranks = comm.size(), rank = comm.rank();
  // The finer partition's remarks and warnings (markers it does not use)
  // are not the run's.
  mlir::ScopedDiagnosticHandler quiet(
      model.getContext(), [](mlir::Diagnostic &diag) {
        return mlir::success(diag.getSeverity() !=
                             mlir::DiagnosticSeverity::Error);
      });
  mlir::FailureOr<ModelSignature> signature = analyzeModel(model);
  if (mlir::failed(signature)) {
    error = "the model does not follow the convention";
    return false;
  }
  int64_t coarse = int64_t(options.ranks) * options.chunksForSchedule();
  // A whole number of fine stages per rank.
  int64_t fine =
      std::min<int64_t>(4 * coarse, maxCostModelStages(signature->func)) /
      ranks * ranks;
  if (fine < coarse) {
    error = "--balance: the cost model can cut the model into " +
            std::to_string(fine) + " stages at most, fewer than the " +
            std::to_string(coarse) + " of the pipeline";
    return false;
  }
  // The fine stages round the ranks (loop placement), in the order of the
  // chain.
  ZBPipelineOptions pipeline;
  pipeline.stages = ranks;
  pipeline.chunks = fine / ranks;
  pipeline.schedule = pipeline.chunks >= 2 ? "interleaved-1f1b" : "1f1b";
  pipeline.microbatches = options.microbatches;
  // Measured as they will run: bf16 stashes convert on the way.
  pipeline.dtype = options.dtype;
  pipeline.lowerToCPU = false;
  std::unique_ptr<LoweredPipeline> lowered =
      LoweredPipeline::lower(model, pipeline, error);
  if (!lowered) {
    error = "--balance: lowering the model in " + std::to_string(fine) +
            " stages failed" + (error.empty() ? "" : ": " + error);
    return false;
  }
  RankProgramInfo info;
  if (!lowered->rankProgram(rank, info, error))
    return false;
  mlir::OwningOpRef<mlir::ModuleOp> rankModule = lowered->keepRank(rank, error);
  if (!rankModule)
    return false;
  std::string key =
      (modelText + ";balance;stages=" + llvm::Twine(fine) +
       ";np=" + llvm::Twine(ranks) + ";m=" + llvm::Twine(options.microbatches) +
       ";dtype=" + options.dtype + ";rank=" + llvm::Twine(rank))
          .str();
  llvm::Expected<std::unique_ptr<CacheEntry>> entry =
      compileCached(*rankModule, key, settings, cache, warn);
  if (!entry) {
    error = "--balance: " + llvm::toString(entry.takeError());
    return false;
  }
  llvm::Expected<LoadedProgram> object = LoadedProgram::load(**entry);
  if (!object) {
    error = llvm::toString(object.takeError());
    return false;
  }
  llvm::Expected<zbrt::EntryFn> step = object->entryPoint(info.stepFunction);
  if (!step) {
    error = llvm::toString(step.takeError());
    return false;
  }

  ModelData data(*signature, options.data(0));
  error = data.prepare();
  if (!error.empty())
    return false;
  std::vector<const ModelArg *> params = info.paramArgs(*signature);
  PipelineRankProgram program(data, params, *step, comm);
  zbrt::Optimizer optimizer = options.makeOptimizer();
  llvm::SmallVector<bool> counted(params.size(), true);
  TrainingContext context{comm, comm, 1, 0, data, params, counted, optimizer};
  TrainingOptions steps;
  steps.steps = kBalanceSteps;
  steps.update = false;
  TrainingResult result;
  if (!train(program, context, steps, result, error))
    return false;

  if (rank != 0)
    return true;
  schedule::Problem layout;
  layout.numRanks = ranks;
  layout.numChunks = static_cast<int>(fine / ranks);
  layout.numMicrobatches = static_cast<int>(options.microbatches);
  run::RunMeasurement measured =
      run::measure(program.measuredSteps(), lowered->stageTable(), layout,
                   pipeline.schedule);
  profile = run::profileJson(measured);
  return true;
}

bool zb::measureFineProfile(mlir::ModuleOp model, llvm::StringRef modelText,
                            const RunOptions &options,
                            const CompileSettings &settings,
                            CompileCache &cache, CompileCache::Warn warn,
                            zbrt::Comm &pipeline, zbrt::Comm &world,
                            int64_t replica, std::string &profile,
                            std::string &error) {
  // Replica 0's ranks run the fine stages round the pipeline, as the real
  // run shares the machine, when the schedule can (M a multiple of P); else
  // world rank 0 runs them alone. The others wait for the profile.
  bool allRanks = options.microbatches % options.ranks == 0;
  std::string text;
  bool ok = true;
  if (allRanks && replica == 0) {
    ok = measureHere(model, modelText, options, settings, cache, warn, pipeline,
                     text, error);
    // A rank that failed leaves the others waiting in the fine program.
    if (!ok)
      pipeline.abort(error);
  } else if (!allRanks && world.rank() == 0) {
    std::unique_ptr<zbrt::Comm> local = zbrt::createLocalComm();
    ok = measureHere(model, modelText, options, settings, cache, warn, *local,
                     text, error);
  }
  // [0]: whether world rank 0 succeeded, [1]: the length of its profile or
  // error. The others wait here while the fine program compiles and runs,
  // which may take longer than a transfer's timeout.
  int64_t header[2] = {0, 0};
  double timeout = world.timeoutSeconds();
  world.setTimeoutSeconds(0);
  if (world.rank() == 0) {
    if (!ok)
      text = error;
    header[0] = ok;
    header[1] = static_cast<int64_t>(text.size());
  }
  world.broadcast(header, sizeof(header), 0);
  world.setTimeoutSeconds(timeout);
  text.resize(header[1]);
  world.broadcast(text.data(), text.size(), 0);
  if (!header[0]) {
    error = text;
    return false;
  }
  profile = std::move(text);
  return true;
}
