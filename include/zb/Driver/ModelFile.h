//===- ModelFile.h - A model read from a file -------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// What every run starts from: the model's text (part of every cache key),
// the parsed module, and its signature (zb/Model/Model.h), checked. While a
// ModelFile lives, diagnostics on its ops name their place in the file.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_MODELFILE_H
#define ZB_DRIVER_MODELFILE_H

#include "zb/Model/Model.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

#include <memory>
#include <string>

namespace zb {

class ModelFile {
public:
  /// Registers what parsing, differentiating and compiling a model needs.
  static void registerDialects(mlir::DialectRegistry &registry);

  /// Reads `path`, parses it in `context` and checks the model. Returns
  /// null on failure: with `error` set for a file that cannot be read or
  /// parsed, empty for a model that breaks the convention (reported
  /// through the context's diagnostics).
  static std::unique_ptr<ModelFile>
  open(llvm::StringRef path, mlir::MLIRContext &context, std::string &error);

  llvm::StringRef text() const { return contents; }
  mlir::ModuleOp module() const { return parsed.get(); }
  const ModelSignature &signature() const { return model; }
  /// Samples in one microbatch: dim 0 of the first data argument with a
  /// shape (1 without one).
  int64_t samplesPerMicrobatch() const;

private:
  ModelFile() = default;

  std::string contents;
  llvm::SourceMgr sourceMgr;
  std::unique_ptr<mlir::SourceMgrDiagnosticHandler> handler;
  mlir::OwningOpRef<mlir::ModuleOp> parsed;
  ModelSignature model;
};

} // namespace zb

#endif // ZB_DRIVER_MODELFILE_H
