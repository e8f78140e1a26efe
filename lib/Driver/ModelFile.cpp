//===- ModelFile.cpp - A model read from a file ---------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/ModelFile.h"

#include "zb/Autodiff/GradientOpInterface.h"
#include "zb/Target/CPUCompiler.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"

using namespace mlir;
using namespace zb;

void ModelFile::registerDialects(DialectRegistry &registry) {
  registerCPUCompilerDependencies(registry);
  autodiff::registerGradientExternalModels(registry);
}

std::unique_ptr<ModelFile> ModelFile::open(StringRef path, MLIRContext &context,
                                           std::string &error) {
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(path, &error);
  if (!file)
    return nullptr;
  std::unique_ptr<ModelFile> result(new ModelFile());
  result->contents = file->getBuffer().str();
  result->sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  result->handler =
      std::make_unique<SourceMgrDiagnosticHandler>(result->sourceMgr, &context);
  result->parsed = parseSourceFile<ModuleOp>(result->sourceMgr, &context);
  if (!result->parsed) {
    error = ("cannot parse '" + path + "'").str();
    return nullptr;
  }
  FailureOr<ModelSignature> signature = analyzeModel(*result->parsed);
  // Its diagnostic says what is wrong.
  if (failed(signature))
    return nullptr;
  result->model = std::move(*signature);
  return result;
}

int64_t ModelFile::samplesPerMicrobatch() const {
  // The first data argument's leading dimension (a random key is no
  // samples).
  for (const ModelArg &arg : model.args)
    if (!arg.isParam() && !arg.rng && arg.type.getRank() > 0)
      return arg.type.getDimSize(0);
  return 1;
}
