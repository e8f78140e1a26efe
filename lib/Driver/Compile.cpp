//===- Compile.cpp - Compiling rank programs through the cache ------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/Compile.h"

#include "zb/Dialect/ZB/ZBDialect.h"
#include "zb/Model/Model.h"
#include "zb/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SHA256.h"

#include <limits>
#include <unistd.h>

using namespace mlir;
using namespace zb;

std::string zb::executableIdentity(const char *argv0, void *anchor) {
  std::string self = llvm::sys::fs::getMainExecutable(argv0, anchor);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> binary =
      llvm::MemoryBuffer::getFile(self);
  if (!binary)
    return "unknown";
  return llvm::toHex(
      llvm::SHA256::hash(llvm::arrayRefFromStringRef((*binary)->getBuffer())));
}

std::string zb::moduleDigest(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  // Every flag that could leave something out set here, whatever a tool's
  // command line (--mlir-elide-elementsattrs-if-larger, ...) says.
  constexpr int64_t kAll = std::numeric_limits<int64_t>::max();
  OpPrintingFlags flags;
  flags.enableDebugInfo(false)
      .elideLargeElementsAttrs(kAll)
      .elideLargeResourceString(kAll)
      .skipRegions(false)
      .printGenericOpForm(false);
  module->print(os, flags);
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(text)));
}

llvm::Expected<CompileCache> zb::openCache(const CompileSettings &settings) {
  return CompileCache::open(settings.cacheDir.empty()
                                ? CompileCache::defaultDirectory()
                                : settings.cacheDir);
}

llvm::Expected<std::unique_ptr<CacheEntry>>
zb::compileCached(ModuleOp module, StringRef key,
                  const CompileSettings &settings, CompileCache &cache,
                  CompileCache::Warn warn) {
  std::string full = (key + "\n" + getCPUCompilerFingerprint(settings.target) +
                      ";" + settings.identity)
                         .str();
  auto build = [&](StringRef path) -> llvm::Error {
    if (succeeded(compileToSharedObject(module, path, settings.target)))
      return llvm::Error::success();
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "compilation failed");
  };
  return cache.getOrBuild(full, build, warn);
}

llvm::Expected<std::unique_ptr<CacheEntry>>
zb::compileModel(ModuleOp model, StringRef modelText, ModelEntries entries,
                 const CompileSettings &settings, CompileCache &cache,
                 CompileCache::Warn warn) {
  OwningOpRef<ModuleOp> clone = model.clone();
  FailureOr<ModelSignature> signature = analyzeModel(*clone);
  if (failed(signature))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the model does not follow the convention");
  std::string name = signature->func.getSymName().str();
  bool withGradients = entries != ModelEntries::Forward;
  PassManager pm(model.getContext());
  if (withGradients) {
    ZBAutodiffOptions autodiff;
    autodiff.accumulate = true;
    pm.addPass(createZBAutodiff(autodiff));
  }
  // The same products skip the same terms as in a pipeline's stages.
  pm.addPass(createZBMarkTriangularProducts());
  if (failed(pm.run(*clone)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   withGradients
                                       ? "differentiating the model failed"
                                       : "preparing the model failed");
  // The gradient entry point holds its own copy of the forward: the model
  // function itself, unless asked for, would only be compiled a second time
  // (the gradient's zb.gradient_of, which names it, goes with it).
  auto forward = clone->lookupSymbol<func::FuncOp>(name);
  if (entries == ModelEntries::Gradients && forward) {
    for (auto fn : clone->getOps<func::FuncOp>())
      if (auto of = fn->getAttrOfType<FlatSymbolRefAttr>(
              ZBDialect::kGradientOfAttrName);
          of && of.getValue() == name)
        fn->removeAttr(ZBDialect::kGradientOfAttrName);
    if (SymbolTable::symbolKnownUseEmpty(forward, *clone))
      forward.erase();
  }
  StringRef suffix = entries == ModelEntries::Forward     ? ";eval"
                     : entries == ModelEntries::Gradients ? ";grads"
                                                          : ";grads;forward";
  return compileCached(*clone, (modelText + suffix).str(), settings, cache,
                       warn);
}

/// A loaded object and the descriptor it was loaded through, open while it
/// is loaded: the dynamic loader takes an object whose path names one
/// already loaded for that one, so no two loaded programs may share
/// /proc/self/fd/N.
struct LoadedProgram::Object {
  std::unique_ptr<zbrt::SharedObject> code;
  int fd = -1;
  ~Object() {
    code.reset();
    if (fd >= 0)
      ::close(fd);
  }
};

llvm::Expected<LoadedProgram> LoadedProgram::load(const CacheEntry &entry) {
  auto object = std::make_shared<Object>();
  object->fd = entry.duplicateDescriptor();
  std::string path = object->fd >= 0
                         ? "/proc/self/fd/" + std::to_string(object->fd)
                         : entry.getPath();
  if (!llvm::sys::fs::exists(path))
    path = entry.getPath();
  std::string error;
  object->code = zbrt::SharedObject::open(path, error);
  if (!object->code)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), error);
  LoadedProgram program;
  program.object = std::move(object);
  return program;
}

llvm::Expected<zbrt::EntryFn>
LoadedProgram::entryPoint(StringRef function) const {
  std::string error;
  zbrt::EntryFn fn =
      object->code->lookup((kEntryPrefix + function).str(), error);
  if (!fn)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), error);
  return fn;
}
