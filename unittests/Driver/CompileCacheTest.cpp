//===- CompileCacheTest.cpp - The compile cache's integrity checks --------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/CompileCache.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <gtest/gtest.h>
#include <sys/stat.h>

using namespace zb;

namespace {

class CompileCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> path;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("zb-cache-test", path));
    root = std::string(path);
    dir = root + "/cache";
  }
  void TearDown() override { llvm::sys::fs::remove_directories(root); }

  /// A builder writing `content` and counting its calls.
  CompileCache::Builder writer(const std::string &content) {
    return [this, content](llvm::StringRef path) -> llvm::Error {
      ++builds;
      std::error_code ec;
      llvm::raw_fd_ostream os(path, ec);
      if (ec)
        return llvm::errorCodeToError(ec);
      os << content;
      return llvm::Error::success();
    };
  }

  static std::string readFile(const std::string &path) {
    auto buffer = llvm::MemoryBuffer::getFile(path);
    return buffer ? (*buffer)->getBuffer().str() : "";
  }
  static void writeFile(const std::string &path, const std::string &bytes) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << bytes;
  }
  std::string entryPath(llvm::StringRef key) const {
    return dir + "/" + CompileCache::entryName(key);
  }
  /// The entry for `key` via getOrBuild, with its warnings.
  std::string get(CompileCache &cache, llvm::StringRef key,
                  const std::string &content, std::string &warnings) {
    auto entry =
        cache.getOrBuild(key, writer(content), [&](const llvm::Twine &message) {
          warnings += message.str() + "\n";
        });
    if (!entry) {
      ADD_FAILURE() << llvm::toString(entry.takeError());
      return "";
    }
    return readFile((*entry)->loadPath());
  }

  std::string root, dir;
  int builds = 0;
};

TEST_F(CompileCacheTest, BuildsOnceAndVerifiesTheEntry) {
  auto cache = CompileCache::open(dir);
  ASSERT_TRUE(bool(cache)) << llvm::toString(cache.takeError());
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << "the directory is created private";

  std::string warnings;
  std::string first = get(*cache, "k", "object bytes", warnings);
  std::string second = get(*cache, "k", "other bytes", warnings);
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first.rfind("object bytes", 0), 0u) << "the object comes first";
  EXPECT_TRUE(warnings.empty()) << warnings;
  ASSERT_EQ(::stat(entryPath("k").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u);
  // Nothing but the entry is left in the directory.
  std::error_code ec;
  int files = 0;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(CompileCacheTest, TamperedBytesAreDiscardedAndRebuilt) {
  auto cache = CompileCache::open(dir);
  ASSERT_TRUE(bool(cache));
  std::string warnings;
  get(*cache, "k", "good code", warnings);
  std::string bytes = readFile(entryPath("k"));
  bytes[2] = '\xcc';
  writeFile(entryPath("k"), bytes);
  auto lookup = cache->lookup("k");
  ASSERT_FALSE(bool(lookup));
  EXPECT_NE(llvm::toString(lookup.takeError()).find("integrity check"),
            std::string::npos);
  std::string again = get(*cache, "k", "good code", warnings);
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(again.rfind("good code", 0), 0u);
  EXPECT_NE(warnings.find(entryPath("k")), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("fails its integrity check"), std::string::npos);
}

TEST_F(CompileCacheTest, TruncatedEntryIsNamed) {
  auto cache = CompileCache::open(dir);
  ASSERT_TRUE(bool(cache));
  std::string warnings;
  get(*cache, "k", "some object", warnings);
  std::string bytes = readFile(entryPath("k"));
  writeFile(entryPath("k"), bytes.substr(0, bytes.size() / 2));
  get(*cache, "k", "some object", warnings);
  EXPECT_EQ(builds, 2);
  EXPECT_NE(warnings.find("truncated"), std::string::npos) << warnings;
  // Bytes cut from the middle, the trailer kept.
  bytes = readFile(entryPath("k"));
  writeFile(entryPath("k"), bytes.substr(0, 3) + bytes.substr(6));
  warnings.clear();
  get(*cache, "k", "some object", warnings);
  EXPECT_EQ(builds, 3);
  EXPECT_NE(warnings.find("is truncated (its trailer records 11 object "
                          "bytes, it has 8)"),
            std::string::npos)
      << warnings;
  // An object without any trailer (a plain file planted there) too.
  writeFile(entryPath("k"), "plain object");
  warnings.clear();
  get(*cache, "k", "some object", warnings);
  EXPECT_EQ(builds, 4);
  EXPECT_NE(warnings.find("no integrity trailer"), std::string::npos)
      << warnings;
}

TEST_F(CompileCacheTest, SwappedEntriesFailTheirChecks) {
  auto cache = CompileCache::open(dir);
  ASSERT_TRUE(bool(cache));
  std::string warnings;
  get(*cache, "a", "object a", warnings);
  get(*cache, "b", "object b", warnings);
  std::string a = readFile(entryPath("a")), b = readFile(entryPath("b"));
  writeFile(entryPath("a"), b);
  writeFile(entryPath("b"), a);
  EXPECT_EQ(get(*cache, "a", "object a", warnings).rfind("object a", 0), 0u);
  EXPECT_EQ(get(*cache, "b", "object b", warnings).rfind("object b", 0), 0u);
  EXPECT_EQ(builds, 4);
  EXPECT_NE(warnings.find("written for another key"), std::string::npos);
}

TEST_F(CompileCacheTest, EntryWritableByOthersIsRefused) {
  auto cache = CompileCache::open(dir);
  ASSERT_TRUE(bool(cache));
  std::string warnings;
  get(*cache, "k", "object", warnings);
  ASSERT_EQ(::chmod(entryPath("k").c_str(), 0666), 0);
  get(*cache, "k", "object", warnings);
  EXPECT_EQ(builds, 2);
  EXPECT_NE(warnings.find("writable by group or others (mode 0666)"),
            std::string::npos)
      << warnings;
}

TEST_F(CompileCacheTest, SharedDirectoryIsRefused) {
  ASSERT_FALSE(llvm::sys::fs::create_directories(dir));
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto cache = CompileCache::open(dir);
  ASSERT_FALSE(bool(cache));
  std::string message = llvm::toString(cache.takeError());
  EXPECT_NE(message.find("'" + dir + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("mode 0777"), std::string::npos) << message;
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  EXPECT_TRUE(bool(CompileCache::open(dir)));
}

TEST_F(CompileCacheTest, FailedBuildLeavesNothing) {
  auto cache = CompileCache::open(dir);
  ASSERT_TRUE(bool(cache));
  auto entry = cache->getOrBuild(
      "k",
      [](llvm::StringRef) {
        return llvm::createStringError(llvm::inconvertibleErrorCode(), "boom");
      },
      [](const llvm::Twine &) { ADD_FAILURE() << "nothing to discard"; });
  ASSERT_FALSE(bool(entry));
  EXPECT_EQ(llvm::toString(entry.takeError()), "boom");
  std::error_code ec;
  EXPECT_EQ(llvm::sys::fs::directory_iterator(dir, ec),
            llvm::sys::fs::directory_iterator());
}

} // namespace

namespace {

/// ZB_CACHE_DIR names the folder; set but empty, it is unset (as
/// --cache-dir= is).
TEST(CompileCacheDirectory, AnEmptyVariableIsUnset) {
  const char *saved = std::getenv("ZB_CACHE_DIR");
  std::string before = saved ? saved : "";
  ::setenv("ZB_CACHE_DIR", "/some/cache", 1);
  EXPECT_EQ(zb::CompileCache::defaultDirectory(), "/some/cache");
  ::setenv("ZB_CACHE_DIR", "", 1);
  std::string fallback = zb::CompileCache::defaultDirectory();
  EXPECT_FALSE(fallback.empty());
  EXPECT_NE(fallback, "/some/cache");
  if (saved)
    ::setenv("ZB_CACHE_DIR", before.c_str(), 1);
  else
    ::unsetenv("ZB_CACHE_DIR");
}

} // namespace
