//===- Compile.cpp - Compiling rank programs through the cache ------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/Compile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SHA256.h"

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

llvm::Expected<std::unique_ptr<CacheEntry>>
zb::compileCached(ModuleOp module, StringRef key,
                  const CPUCompileOptions &options, CompileCache &cache,
                  StringRef identity, CompileCache::Warn warn) {
  std::string full =
      (key + "\n" + getCPUCompilerFingerprint(options) + ";" + identity).str();
  auto build = [&](StringRef path) -> llvm::Error {
    if (succeeded(compileToSharedObject(module, path, options)))
      return llvm::Error::success();
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "compilation failed");
  };
  return cache.getOrBuild(full, build, warn);
}
