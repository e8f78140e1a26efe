//===- Compile.h - Compiling rank programs through the cache ----*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_COMPILE_H
#define ZB_DRIVER_COMPILE_H

#include "zb/Driver/CompileCache.h"
#include "zb/Target/CPUCompiler.h"

#include "zbrt/Executable.h"

#include "mlir/IR/BuiltinOps.h"

namespace zb {

/// A digest of the executable containing `anchor` (`argv0` helps find it):
/// part of every cache key, so a rebuilt compiler never reuses objects an
/// older one cached.
std::string executableIdentity(const char *argv0, void *anchor);

/// A digest (SHA-256, hex) of `module`'s printed form, everything printed
/// (no large constant elided, every region, whatever a tool's printing
/// options): equal for two modules exactly when they print alike, whatever
/// produced them; a cache key for a program whose inputs vary where the
/// program does not (--balance's measured times, which move from run to run
/// while the cut they give stays).
std::string moduleDigest(mlir::ModuleOp module);

/// How programs are compiled and where they are cached.
struct CompileSettings {
  /// The cache directory; empty: CompileCache::defaultDirectory().
  std::string cacheDir;
  CPUCompileOptions target;
  /// The running compiler's executableIdentity().
  std::string identity;
};

/// Opens the cache of `settings` (CompileCache::open).
llvm::Expected<CompileCache> openCache(const CompileSettings &settings);

/// The verified object for `module` (already transformed) under `key`,
/// compiled with `settings` into `cache` (opened from them) unless a valid
/// entry is there. The key is extended with the compiler's fingerprint and
/// identity; a discarded entry is reported through `warn`.
llvm::Expected<std::unique_ptr<CacheEntry>>
compileCached(mlir::ModuleOp module, llvm::StringRef key,
              const CompileSettings &settings, CompileCache &cache,
              CompileCache::Warn warn);

/// The entry points compileModel makes for the model function `<name>`.
enum class ModelEntries {
  /// `<name>`, the forward alone (--eval).
  Forward,
  /// `<name>_grad_acc` alone (training, --grads): the forward is compiled
  /// once, inside it.
  Gradients,
  /// Both (a gradient check also runs the forward).
  ForwardAndGradients,
};

/// The whole model for one process: a clone of `model` (the text of which
/// is `modelText`) with the entry points `entries` asks for (the gradient
/// one by --zb-autodiff=accumulate=true), through `cache`.
llvm::Expected<std::unique_ptr<CacheEntry>>
compileModel(mlir::ModuleOp model, llvm::StringRef modelText,
             ModelEntries entries, const CompileSettings &settings,
             CompileCache &cache, CompileCache::Warn warn);

/// A compiled program loaded into this process.
class LoadedProgram {
public:
  /// Loads the verified `entry`.
  static llvm::Expected<LoadedProgram> load(const CacheEntry &entry);

  /// The entry point of function `function` (kEntryPrefix + function).
  llvm::Expected<zbrt::EntryFn> entryPoint(llvm::StringRef function) const;

private:
  struct Object;
  std::shared_ptr<Object> object;
};

} // namespace zb

#endif // ZB_DRIVER_COMPILE_H
