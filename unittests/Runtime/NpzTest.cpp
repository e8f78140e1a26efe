//===- NpzTest.cpp - Reading .npz archives whole and by their headers -----===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Npz.h"

#include "gtest/gtest.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace zbrt;

namespace {

NpyArray makeArray(DType dtype, std::vector<int64_t> shape) {
  NpyArray array;
  array.dtype = dtype;
  array.shape = std::move(shape);
  array.data.resize(array.numElements() * dtypeSize(dtype));
  for (size_t i = 0; i < array.data.size(); ++i)
    array.data[i] = static_cast<char>(i * 7 + 1);
  return array;
}

/// A temporary file, removed at the end of the test.
class NpzTest : public ::testing::Test {
protected:
  void SetUp() override {
    path = ::testing::TempDir() + "npz_test_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() +
           ".npz";
  }
  void TearDown() override { std::remove(path.c_str()); }

  NpzArchive sample() {
    NpzArchive archive;
    archive["weights"] = makeArray(DType::F32, {2, 3});
    archive["ids"] = makeArray(DType::I64, {4});
    archive["scale"] = makeArray(DType::F64, {});
    archive["none"] = makeArray(DType::I32, {0, 5});
    return archive;
  }

  void write(const NpzArchive &archive) {
    std::string error;
    ASSERT_TRUE(writeNpz(path, archive, error)) << error;
  }

  std::string bytes() {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)),
                       std::istreambuf_iterator<char>());
  }

  void setBytes(const std::string &contents) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << contents;
  }

  /// Replaces the first `from` in the file by `to`, in as many bytes: a
  /// shorter `to` padded with spaces, a longer one taking the spaces after
  /// `from` (the .npy header's padding).
  void patch(const std::string &from, std::string to) {
    std::string contents = bytes();
    size_t at = contents.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    size_t span = from.size();
    while (span < to.size() && contents[at + span] == ' ')
      ++span;
    ASSERT_LE(to.size(), span) << "no room for " << to;
    to.append(span - to.size(), ' ');
    contents.replace(at, span, to);
    setBytes(contents);
  }

  std::string path;
};

TEST_F(NpzTest, HeadersMatchTheWholeRead) {
  write(sample());
  NpzArchive whole, headers;
  std::string error;
  ASSERT_TRUE(readNpz(path, whole, error)) << error;
  ASSERT_TRUE(readNpzHeaders(path, headers, error)) << error;
  NpzArchive want = sample();
  ASSERT_EQ(whole.size(), want.size());
  ASSERT_EQ(headers.size(), want.size());
  for (const auto &[name, array] : want) {
    SCOPED_TRACE(name);
    EXPECT_EQ(whole.at(name).dtype, array.dtype);
    EXPECT_EQ(whole.at(name).shape, array.shape);
    EXPECT_EQ(whole.at(name).data, array.data);
    EXPECT_EQ(headers.at(name).dtype, array.dtype);
    EXPECT_EQ(headers.at(name).shape, array.shape);
    EXPECT_TRUE(headers.at(name).data.empty());
  }
}

TEST_F(NpzTest, OnlyTheWholeReadChecksTheData) {
  NpzArchive one;
  one["w"] = makeArray(DType::F32, {64});
  write(one);
  std::string contents = bytes();
  // The last byte of the array's data (the central directory follows it).
  size_t at = contents.find("PK\x01\x02") - 1;
  contents[at] = static_cast<char>(contents[at] ^ 0x5A);
  setBytes(contents);
  NpzArchive archive;
  std::string error;
  EXPECT_FALSE(readNpz(path, archive, error));
  EXPECT_NE(error.find("CRC mismatch for 'w.npy'"), std::string::npos) << error;
  EXPECT_TRUE(readNpzHeaders(path, archive, error)) << error;
  EXPECT_EQ(archive.at("w").shape, std::vector<int64_t>{64});
}

TEST_F(NpzTest, ATruncatedFileIsNamed) {
  write(sample());
  std::string contents = bytes();
  setBytes(contents.substr(0, contents.size() / 2));
  NpzArchive archive;
  std::string error;
  EXPECT_FALSE(readNpz(path, archive, error));
  EXPECT_NE(error.find("is not a valid .npz archive"), std::string::npos)
      << error;
  std::string headerError;
  EXPECT_FALSE(readNpzHeaders(path, archive, headerError));
  EXPECT_EQ(headerError, error);
  EXPECT_FALSE(readNpzHeaders(path + ".absent", archive, error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
}

TEST_F(NpzTest, ADirectoryIsNamed) {
  std::string dir = ::testing::TempDir();
  NpzArchive archive;
  std::string error;
  EXPECT_FALSE(readNpz(dir, archive, error));
  EXPECT_EQ(error, "'" + dir + "' is not a regular file");
  EXPECT_FALSE(readNpzHeaders(dir, archive, error));
  EXPECT_EQ(error, "'" + dir + "' is not a regular file");
}

/// Each malformed header is an error naming the array and what is wrong,
/// never an exception or a crash.
TEST_F(NpzTest, MalformedHeadersAreNamed) {
  struct Case {
    std::string from, to, message;
  } cases[] = {
      {"'fortran_order': False", "'fortran_xxxxx': False",
       "malformed .npy header (no fortran_order)"},
      {"'shape': (2, 3), }", "'shape': (2, x), }",
       "malformed .npy header (shape (2, x))"},
      {"'shape': (2, 3), }", "'shape': (-2, 3), }",
       "malformed .npy header (shape (-2, 3))"},
      {"'shape': (2, 3), }", "'shape': (100000000000000000, 1000), }",
       "holds 24 bytes of data, but shape [100000000000000000, 1000] needs "
       "more than that"},
      {"'shape': (2, 3), }", "'shape': (2, 4), }",
       "holds 24 bytes of data, but shape [2, 4] needs 32"},
      {"'shape': (2, 3), }", "'shape': 2, }",
       "malformed .npy header (no shape)"},
      {"'descr': '<f4'", "'descr': '>f4'",
       "unsupported dtype '>f4' (supported: float32, float64, int32, int64, "
       "little-endian)"},
      {"'descr': '<f4'", "'descx': '<f4'", "malformed .npy header (no descr)"},
      // Bytes of a damaged file are named, not echoed.
      {"'shape': (2, 3), }", "'shape': (\xd9, 3), }",
       "malformed .npy header (shape (\\xd9, 3))"},
      {"'descr': '<f4'", "'descr': '\x01\\4'",
       "unsupported dtype '\\x01\\x5c4' (supported: float32, float64, "
       "int32, int64, little-endian)"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.to);
    NpzArchive one;
    one["w"] = makeArray(DType::F32, {2, 3});
    write(one);
    patch(c.from, c.to);
    NpzArchive archive;
    std::string error;
    EXPECT_FALSE(readNpzHeaders(path, archive, error));
    EXPECT_EQ(error, "array 'w' in '" + path + "': " + c.message);
  }
}

/// Two entries of one name (a zip may hold them) are an error, in either
/// read: which one is meant cannot be known.
TEST_F(NpzTest, ANameTwiceIsAnError) {
  NpzArchive two;
  two["a"] = makeArray(DType::F32, {2});
  two["b"] = makeArray(DType::F32, {2});
  write(two);
  std::string contents = bytes();
  // Both names are one byte: rename every "b.npy" (local header and
  // central directory) to "a.npy".
  for (size_t at = 0; (at = contents.find("b.npy", at)) != std::string::npos;)
    contents[at] = 'a';
  setBytes(contents);
  for (bool headersOnly : {false, true}) {
    NpzArchive archive;
    std::string error;
    EXPECT_FALSE(headersOnly ? readNpzHeaders(path, archive, error)
                             : readNpz(path, archive, error));
    EXPECT_EQ(error, "array 'a' in '" + path + "' appears twice");
  }
}

/// An array's name from a damaged file is named by its bytes too.
TEST_F(NpzTest, ANameOfAnyBytesIsPrintable) {
  NpzArchive one;
  one["w\xff\n"] = makeArray(DType::F32, {2, 3});
  write(one);
  patch("'shape': (2, 3), }", "'shape': 2, }");
  NpzArchive archive;
  std::string error;
  EXPECT_FALSE(readNpzHeaders(path, archive, error));
  EXPECT_EQ(error, "array 'w\\xff\\x0a' in '" + path +
                       "': malformed .npy header (no shape)");
}

} // namespace

namespace {

/// A link is written through (the file it names replaced, the link kept),
/// a device in place (it stays a device), a directory refused.
TEST_F(NpzTest, WritesGoThroughLinksAndIntoDevices) {
  std::string target = path + ".target", link = path + ".link";
  std::remove(link.c_str());
  ASSERT_EQ(symlink(target.substr(target.rfind('/') + 1).c_str(), link.c_str()),
            0);
  std::string error;
  ASSERT_TRUE(writeFileAtomically(link, "first", error)) << error;
  ASSERT_TRUE(writeFileAtomically(link, "second", error)) << error;
  char buffer[64];
  ssize_t n = readlink(link.c_str(), buffer, sizeof(buffer));
  EXPECT_GT(n, 0) << "the link was replaced";
  std::ifstream in(target);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "second");
  std::remove(link.c_str());
  std::remove(target.c_str());

  ASSERT_TRUE(writeFileAtomically("/dev/null", "x", error)) << error;
  struct stat info;
  ASSERT_EQ(stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));

  EXPECT_FALSE(writeFileAtomically(::testing::TempDir(), "x", error));
  EXPECT_NE(error.find("it is a directory"), std::string::npos) << error;
}

} // namespace
