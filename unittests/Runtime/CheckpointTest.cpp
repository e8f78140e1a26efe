//===- CheckpointTest.cpp - Training state on disk, and damaged states ----===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Checkpoint.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

using namespace zbrt;
namespace fs = std::filesystem;

namespace {

class CheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = ::testing::TempDir() + "checkpoint_test_" + std::to_string(getpid()) +
          "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  /// Writes a state of step 3 whose config holds bytes that need escapes.
  void writeSample() {
    Checkpoint state;
    state.step = 3;
    state.config = config;
    NpyArray w;
    w.dtype = DType::F32;
    w.shape = {2};
    w.data.assign(8, '\1');
    state.params["w"] = w;
    std::string error;
    ASSERT_TRUE(writeCheckpoint(dir, state, error)) << error;
  }

  fs::path stateJson() {
    std::ifstream latest(fs::path(dir) / "latest");
    std::string name;
    latest >> name;
    return fs::path(dir) / name / "state.json";
  }

  std::string dir;
  const std::string config = "model-sha256=AB;quote=\";tab=\t;é";
};

TEST_F(CheckpointTest, AStateReadsBackAsWritten) {
  writeSample();
  Checkpoint back;
  std::string error;
  ASSERT_TRUE(readCheckpoint(dir, back, error)) << error;
  EXPECT_EQ(back.step, 3);
  EXPECT_EQ(back.config, config);
  ASSERT_EQ(back.params.count("w"), 1u);
  EXPECT_EQ(back.params["w"].data, std::vector<char>(8, '\1'));
}

/// One run at a time holds a folder: a second is refused, naming the
/// process that holds it, until the first lets go. (flock locks belong to
/// an open file, so two opens in one process conflict as two processes'
/// do.) The folder is made when missing, and its states read as before.
TEST_F(CheckpointTest, OneRunHoldsAFolder) {
  std::string error;
  std::unique_ptr<CheckpointLock> first = CheckpointLock::acquire(dir, error);
  ASSERT_TRUE(first) << error;
  EXPECT_TRUE(fs::is_directory(dir));
  std::unique_ptr<CheckpointLock> second = CheckpointLock::acquire(dir, error);
  EXPECT_FALSE(second);
  EXPECT_NE(error.find("is in use by another run (process " +
                       std::to_string(getpid()) + ")"),
            std::string::npos)
      << error;
  writeSample();
  Checkpoint back;
  ASSERT_TRUE(readCheckpoint(dir, back, error)) << error;
  EXPECT_EQ(back.step, 3);
  first.reset();
  error.clear();
  second = CheckpointLock::acquire(dir, error);
  EXPECT_TRUE(second) << error;
  // A folder that cannot be made is an error, not a lock.
  std::ofstream(dir + "/file") << "x";
  EXPECT_FALSE(CheckpointLock::acquire(dir + "/file/sub", error));
  EXPECT_NE(error.find("cannot create checkpoint directory"), std::string::npos)
      << error;
}

/// A new state drops the older states the writer made, and nothing else in
/// the folder: folders whose names only start like a state's, a state
/// without its state.json (another process may be writing it), a link.
TEST_F(CheckpointTest, ANewStateDropsOnlyOlderStates) {
  writeSample();
  std::ifstream latest(fs::path(dir) / "latest");
  std::string older;
  latest >> older;
  ASSERT_TRUE(fs::is_directory(fs::path(dir) / older));
  const std::vector<std::string> kept = {"state-important", "state-1-2",
                                         "state-1-2-3x", "state-4-5-6"};
  for (const std::string &name : kept) {
    fs::create_directories(fs::path(dir) / name);
    std::ofstream(fs::path(dir) / name / "data.txt") << "keep";
  }
  fs::create_directories(fs::path(dir) / "user");
  std::ofstream(fs::path(dir) / "user" / "state.json") << "{}";
  fs::create_directory_symlink("user", fs::path(dir) / "state-7-8-9");
  writeSample();
  EXPECT_FALSE(fs::exists(fs::path(dir) / older));
  for (const std::string &name : kept)
    EXPECT_TRUE(fs::is_regular_file(fs::path(dir) / name / "data.txt")) << name;
  EXPECT_TRUE(fs::is_regular_file(fs::path(dir) / "user" / "state.json"));
  EXPECT_TRUE(fs::is_symlink(fs::path(dir) / "state-7-8-9"));
}

/// What any JSON writer may do differently (spacing, key order, escapes) is
/// read; each damage is an error saying what is wrong.
TEST_F(CheckpointTest, AStateFileIsReadStrictly) {
  struct Case {
    std::string json, problem; // problem "" = read
  } cases[] = {
      {"\n{ \"config\" : \"a\\u00e9\\/\\n\" ,\n\t\"step\":7 }\n\n", ""},
      {"{\"step\": 7, \"config\": \"a\"}{\"step\": 1}",
       "text after the object"},
      {"{\"step\": 7, \"step\": 1, \"config\": \"a\"}",
       "\"step\" appears twice"},
      {"{\"step\": 7.0, \"config\": \"a\"}",
       "\"step\" is not a non-negative integer"},
      {"{\"step\": -1, \"config\": \"a\"}",
       "\"step\" is not a non-negative integer"},
      {"{\"step\": 99999999999999999999, \"config\": \"a\"}",
       "\"step\" is not a non-negative integer"},
      {"{\"step\": 7}", "no \"config\""},
      {"{\"config\": \"a\"}", "no \"step\""},
      {"{}", "no \"step\""},
      {"{\"step\": 7, \"config\": \"a\", \"x\\u0001\": 1}",
       "unknown key 'x\\x01'"},
      {"{\"step\": 7, \"config\": \"\\uZZZZ\"}",
       "a string escape that is not \\\", \\\\, \\/, \\b, \\f, \\n, \\r, \\t "
       "or \\u and four hex digits"},
      {"{\"step\": 7, \"config\": \"\\ud800\"}",
       "a \\u escape of a UTF-16 surrogate"},
      {"{\"step\": 7, \"config\": \"a\nb\"}", "a control byte in a string"},
      {"{\"step\": 7, \"config\": \"a", "a string that does not end"},
      {"{\"step\": 7 \"config\": \"a\"}", "expected '}' at byte 11"},
      {"", "expected '{' at byte 0"},
  };
  writeSample();
  for (const Case &c : cases) {
    SCOPED_TRACE(c.json);
    std::ofstream(stateJson(), std::ios::trunc) << c.json;
    Checkpoint back;
    std::string error;
    bool read = readCheckpoint(dir, back, error);
    if (c.problem.empty()) {
      ASSERT_TRUE(read) << error;
      EXPECT_EQ(back.step, 7);
      EXPECT_EQ(back.config, "a\u00e9/\n");
      continue;
    }
    EXPECT_FALSE(read);
    EXPECT_EQ(error, "checkpoint '" + dir + "': '" + stateJson().string() +
                         "' has no valid \"step\" and \"config\" (" +
                         c.problem + ")");
  }
}

TEST_F(CheckpointTest, ALatestOfAnyBytesIsNamedPrintably) {
  writeSample();
  std::ofstream(fs::path(dir) / "latest", std::ios::trunc)
      << std::string("state\0\xff", 7);
  Checkpoint back;
  std::string error;
  EXPECT_FALSE(readCheckpoint(dir, back, error));
  EXPECT_EQ(error, "checkpoint '" + dir +
                       "': 'latest' names 'state\\x00\\xff', not a state "
                       "directory");
}

} // namespace
