//===- CompileCache.cpp - A cache of compiled objects that verifies them --===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/CompileCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace zb;
using llvm::StringRef;

namespace {
/// The trailer after the object: digest, object length (little endian),
/// magic.
constexpr StringRef kMagic = "ZBCACHE1";
constexpr size_t kDigestBytes = 32;
constexpr size_t kTrailerBytes = kDigestBytes + 8 + 8;
} // namespace

static llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

static std::string modeString(mode_t mode) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%04o", static_cast<unsigned>(mode & 07777));
  return s;
}

/// Why a file or directory with status `st` cannot be trusted, or "".
static std::string untrusted(const struct stat &st) {
  if (st.st_uid != geteuid())
    return "is owned by uid " + std::to_string(st.st_uid) + ", not by you";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return "is writable by group or others (mode " + modeString(st.st_mode) +
           ")";
  return "";
}

/// The digest that binds an object's bytes to the entry's name.
static std::array<uint8_t, kDigestBytes> digestOf(StringRef name,
                                                  StringRef object) {
  llvm::SHA256 hash;
  hash.update("zb-cache-1");
  hash.update(llvm::ArrayRef<uint8_t>{0});
  hash.update(name);
  hash.update(llvm::ArrayRef<uint8_t>{0});
  hash.update(object);
  return hash.final();
}

static std::string trailerFor(StringRef name, StringRef object) {
  std::array<uint8_t, kDigestBytes> digest = digestOf(name, object);
  std::string trailer(reinterpret_cast<const char *>(digest.data()),
                      digest.size());
  uint64_t size = object.size();
  for (int i = 0; i < 8; ++i)
    trailer.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
  trailer += kMagic;
  return trailer;
}

CacheEntry::~CacheEntry() {
  if (fd >= 0)
    ::close(fd);
}

std::string CacheEntry::loadPath() const {
  std::string self = "/proc/self/fd/" + std::to_string(fd);
  return llvm::sys::fs::exists(self) ? self : path;
}

int CacheEntry::duplicateDescriptor() const {
  return fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
}

std::string CompileCache::defaultDirectory() {
  // Set but empty is unset, as --cache-dir= is (and as XDG says of its
  // variables).
  if (std::optional<std::string> dir =
          llvm::sys::Process::GetEnv("ZB_CACHE_DIR");
      dir && !dir->empty())
    return *dir;
  if (std::optional<std::string> xdg =
          llvm::sys::Process::GetEnv("XDG_CACHE_HOME");
      xdg && !xdg->empty())
    return *xdg + "/zerobubble";
  llvm::SmallString<128> home;
  if (llvm::sys::path::home_directory(home))
    return (home + "/.cache/zerobubble").str();
  return "/tmp/zerobubble-cache-" + std::to_string(geteuid());
}

std::string CompileCache::entryName(StringRef key) {
  std::string hash =
      llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(key)));
  return hash.substr(0, 32) + ".so";
}

llvm::Expected<CompileCache> CompileCache::open(StringRef dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(
          dir, /*IgnoreExisting=*/true, llvm::sys::fs::owner_all))
    return error("cannot create cache directory '" + dir +
                 "': " + ec.message());
  struct stat st;
  std::string path = dir.str();
  if (::stat(path.c_str(), &st) != 0)
    return error("cannot read cache directory '" + dir +
                 "': " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return error("cache directory '" + dir + "' is not a directory");
  std::string why = untrusted(st);
  if (!why.empty())
    return error("cache directory '" + dir + "' " + why +
                 ": compiled code is not loaded from it (make it private "
                 "with chmod 700, or use another directory)");
  return CompileCache(path);
}

/// Reads all of `fd` from offset 0.
static bool readAll(int fd, std::string &bytes, off_t size) {
  bytes.resize(size);
  off_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, bytes.data() + done, size - done, done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += n;
  }
  return true;
}

llvm::Expected<std::unique_ptr<CacheEntry>>
CompileCache::lookup(StringRef key) {
  std::string name = entryName(key);
  std::string path = dir + "/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT)
      return nullptr;
    return error("cache entry '" + path +
                 "' cannot be opened: " + std::strerror(errno));
  }
  // From here on the entry owns `fd`.
  auto entry = std::make_unique<CacheEntry>(path, fd);
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return error("cache entry '" + path +
                 "' cannot be read: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return error("cache entry '" + path + "' is not a regular file");
  std::string why = untrusted(st);
  if (!why.empty())
    return error("cache entry '" + path + "' " + why);
  std::string bytes;
  if (!readAll(fd, bytes, st.st_size))
    return error("cache entry '" + path + "' cannot be read");
  StringRef all(bytes);
  if (all.size() < kTrailerBytes || !all.ends_with(kMagic))
    return error("cache entry '" + path +
                 "' is truncated or has no integrity trailer");
  StringRef trailer = all.take_back(kTrailerBytes);
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i)
    size |=
        static_cast<uint64_t>(static_cast<uint8_t>(trailer[kDigestBytes + i]))
        << (8 * i);
  if (size != all.size() - kTrailerBytes)
    return error("cache entry '" + path +
                 "' is truncated (its trailer "
                 "records " +
                 llvm::Twine(size) + " object bytes, it has " +
                 llvm::Twine(all.size() - kTrailerBytes) + ")");
  std::array<uint8_t, kDigestBytes> digest =
      digestOf(name, all.drop_back(kTrailerBytes));
  if (trailer.take_front(kDigestBytes) !=
      StringRef(reinterpret_cast<const char *>(digest.data()), kDigestBytes))
    return error("cache entry '" + path +
                 "' fails its integrity check (its bytes do not match their "
                 "digest: damaged, or written for another key)");
  return entry;
}

llvm::Error CompileCache::store(StringRef key, Builder build) {
  std::string name = entryName(key);
  std::string path = dir + "/" + name;
  int tmpFd;
  llvm::SmallString<256> tmp;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          dir + "/" + name + ".%%%%%%.tmp", tmpFd, tmp, llvm::sys::fs::OF_None,
          llvm::sys::fs::owner_read | llvm::sys::fs::owner_write))
    return error("cannot create a file in cache directory '" + dir +
                 "': " + ec.message());
  ::close(tmpFd);
  auto discard = [&](llvm::Error err) {
    llvm::sys::fs::remove(tmp);
    return err;
  };
  if (llvm::Error err = build(tmp))
    return discard(std::move(err));
  // The builder may have replaced the file: write the trailer to what is
  // there now, then make it private before it gets its name.
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> object =
      llvm::MemoryBuffer::getFile(tmp, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!object)
    return discard(error("cannot read the compiled object '" + tmp +
                         "': " + object.getError().message()));
  std::string trailer = trailerFor(name, (*object)->getBuffer());
  object->reset();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec, llvm::sys::fs::OF_Append);
    if (!ec) {
      os << trailer;
      os.close();
      ec = os.error();
    }
    if (ec)
      return discard(
          error("cannot write cache entry '" + tmp + "': " + ec.message()));
  }
  if (std::error_code ec =
          llvm::sys::fs::setPermissions(tmp, llvm::sys::fs::owner_all))
    return discard(
        error("cannot set the mode of '" + tmp + "': " + ec.message()));
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path))
    return discard(
        error("cannot install cache entry '" + path + "': " + ec.message()));
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<CacheEntry>>
CompileCache::getOrBuild(StringRef key, Builder build, Warn warn) {
  llvm::Expected<std::unique_ptr<CacheEntry>> found = lookup(key);
  if (found && *found)
    return found;
  if (!found) {
    warn(llvm::toString(found.takeError()) +
         "; discarding it and compiling again");
    std::string path = dir + "/" + entryName(key);
    if (std::error_code ec = llvm::sys::fs::remove(path))
      return error("cannot remove cache entry '" + path + "': " + ec.message());
  }
  if (llvm::Error err = store(key, build))
    return std::move(err);
  llvm::Expected<std::unique_ptr<CacheEntry>> built = lookup(key);
  if (built && !*built)
    return error("cache entry '" + dir + "/" + entryName(key) +
                 "' vanished after it was written");
  return built;
}
