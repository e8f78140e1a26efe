//===- Compile.h - Compiling rank programs through the cache ----*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_COMPILE_H
#define ZB_DRIVER_COMPILE_H

#include "zb/Driver/CompileCache.h"
#include "zb/Target/CPUCompiler.h"

#include "mlir/IR/BuiltinOps.h"

namespace zb {

/// A digest of the executable containing `anchor` (`argv0` helps find it):
/// part of every cache key, so a rebuilt compiler never reuses objects an
/// older one cached.
std::string executableIdentity(const char *argv0, void *anchor);

/// The verified object for `module` (already transformed) under `key`,
/// compiled with `options` into `cache` unless a valid entry is there. The
/// key is extended with the compiler's fingerprint and `identity`; a
/// discarded entry is reported through `warn`.
llvm::Expected<std::unique_ptr<CacheEntry>>
compileCached(mlir::ModuleOp module, llvm::StringRef key,
              const CPUCompileOptions &options, CompileCache &cache,
              llvm::StringRef identity, CompileCache::Warn warn);

} // namespace zb

#endif // ZB_DRIVER_COMPILE_H
