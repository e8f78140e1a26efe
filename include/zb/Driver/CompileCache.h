//===- CompileCache.h - A cache of compiled objects that verifies them ----===//
//
// Part of ZeroBubble MLIR.
//
// Compiled rank programs are shared objects that every rank loads and runs,
// so the cache directory is a trust boundary. The cache:
//  - lives in a directory private to the user (created 0700; an existing one
//    not owned by the user or writable by group or others is refused);
//  - writes each entry atomically (a unique temporary file in the same
//    directory, renamed into place) with a trailer holding a SHA-256 digest
//    of the entry's key and its object bytes;
//  - before handing out an entry, checks its owner and mode (not writable by
//    group or others) and its digest, reading the bytes through the same
//    open file that is then loaded (no window between check and load). An
//    entry that fails a check is discarded, reported once, and rebuilt.
// The trailer follows the ELF object: loaders and tools ignore bytes past
// the object's end.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_COMPILECACHE_H
#define ZB_DRIVER_COMPILECACHE_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace zb {

/// A verified cache entry, held open: load it through a duplicate of its
/// descriptor (LoadedProgram::load, by /proc/self/fd/N, so it is the bytes
/// that were checked), held open while the object is loaded, since the
/// dynamic loader takes a path naming an object already loaded for that
/// object; keep the entry alive until the object is loaded.
class CacheEntry {
public:
  CacheEntry(std::string path, int fd) : path(std::move(path)), fd(fd) {}
  CacheEntry(const CacheEntry &) = delete;
  CacheEntry &operator=(const CacheEntry &) = delete;
  ~CacheEntry();

  /// The entry's file in the cache directory.
  const std::string &getPath() const { return path; }
  /// A path that opens the verified file itself (/proc/self/fd/N), for
  /// reading it; loading goes through duplicateDescriptor().
  std::string loadPath() const;
  /// A new descriptor of the verified file (the caller closes it), or -1.
  int duplicateDescriptor() const;

private:
  std::string path;
  int fd;
};

class CompileCache {
public:
  /// Opens the cache at `dir`, creating it (and its parents) private to the
  /// user. Fails, naming the directory and the reason, if it cannot be
  /// created or is not owned by the user or writable by group or others.
  static llvm::Expected<CompileCache> open(llvm::StringRef dir);

  /// The default directory: $ZB_CACHE_DIR, else $XDG_CACHE_HOME/zerobubble,
  /// else ~/.cache/zerobubble.
  static std::string defaultDirectory();

  /// The file name of the entry for `key` (a digest of the key).
  static std::string entryName(llvm::StringRef key);

  /// Builds an entry: writes the object to the given path.
  using Builder = llvm::function_ref<llvm::Error(llvm::StringRef path)>;

  /// Reports a discarded entry.
  using Warn = llvm::function_ref<void(const llvm::Twine &message)>;

  /// The verified entry for `key`, built with `build` if there is none or
  /// the one there fails its checks (reported once through `warn`, naming
  /// the entry and what was wrong).
  llvm::Expected<std::unique_ptr<CacheEntry>>
  getOrBuild(llvm::StringRef key, Builder build, Warn warn);

  /// Verifies the entry for `key` without building: nullptr if there is
  /// none; an error naming the entry and what is wrong if it fails a check.
  llvm::Expected<std::unique_ptr<CacheEntry>> lookup(llvm::StringRef key);

  const std::string &getDirectory() const { return dir; }

private:
  explicit CompileCache(std::string dir) : dir(std::move(dir)) {}
  llvm::Error store(llvm::StringRef key, Builder build);

  std::string dir;
};

} // namespace zb

#endif // ZB_DRIVER_COMPILECACHE_H
