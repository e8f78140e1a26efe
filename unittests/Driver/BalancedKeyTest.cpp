//===- BalancedKeyTest.cpp - Cache keys of programs cut at measured times -===//
//
// Part of ZeroBubble MLIR.
//
// zb-run --balance cuts the stages at times measured in that run, which
// differ from run to run. Its rank programs are keyed by moduleDigest of
// what the pipeline made of them: times that give the same cut (and
// schedule) must give the same digest, so a rerun that cuts alike finds its
// programs in the cache, and a different cut a different one.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/Compile.h"
#include "zb/Driver/ModelFile.h"
#include "zb/Driver/Pipeline.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace zb;

namespace {

/// A profile of examples/gpt.mlir's four marker stages: `ms[s]` each for
/// the F, B and W of stage s.
std::string profileFile(const std::vector<double> &ms) {
  llvm::SmallString<128> path;
  int fd = -1;
  EXPECT_FALSE(
      llvm::sys::fs::createTemporaryFile("zb-profile", "json", fd, path));
  llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
  out << "{\"unit\": \"ms\", \"stages\": [";
  for (size_t s = 0; s < ms.size(); ++s)
    out << (s ? ", " : "") << "{\"stage\": " << s << ", \"f\": " << ms[s]
        << ", \"b\": " << ms[s] << ", \"w\": " << ms[s] << "}";
  out << "]}";
  return path.str().str();
}

/// moduleDigest of each of the two ranks' programs, the stages cut at `ms`.
std::vector<std::string> rankDigests(const std::vector<double> &ms) {
  mlir::DialectRegistry registry;
  ModelFile::registerDialects(registry);
  mlir::MLIRContext context(registry);
  std::string error;
  std::unique_ptr<ModelFile> model =
      ModelFile::open(ZB_EXAMPLES_DIR "/gpt.mlir", context, error);
  EXPECT_TRUE(model) << error;
  if (!model)
    return {};
  std::string profile = profileFile(ms);
  ZBPipelineOptions options;
  options.stages = 2;
  options.microbatches = 4;
  options.schedule = "zb-h1";
  options.lowerToCPU = false;
  options.partitionProfile = profile;
  std::unique_ptr<LoweredPipeline> lowered =
      LoweredPipeline::lower(model->module(), options, error);
  llvm::sys::fs::remove(profile);
  EXPECT_TRUE(lowered) << error;
  std::vector<std::string> digests;
  for (int rank = 0; lowered && rank < 2; ++rank) {
    mlir::OwningOpRef<mlir::ModuleOp> program = lowered->keepRank(rank, error);
    EXPECT_TRUE(program) << error;
    if (program)
      digests.push_back(moduleDigest(*program));
  }
  return digests;
}

TEST(BalancedKey, SameCutSameDigestOtherCutOtherDigest) {
  std::vector<std::string> even = rankDigests({1.0, 1.0, 1.0, 1.0});
  ASSERT_EQ(even.size(), 2u);
  EXPECT_NE(even[0], even[1]);
  // A host 5% slower throughout, or times a little off, cut alike. (The
  // cut falls between ops by their share of a stage's time: a few percent
  // of noise between stages can move it by an op, a program of its own.)
  EXPECT_EQ(rankDigests({1.05, 1.05, 1.05, 1.05}), even);
  EXPECT_EQ(rankDigests({1.0, 1.0005, 1.0, 0.9995}), even);
  // A first stage three times the others' moves the cut after it.
  std::vector<std::string> heavy = rankDigests({3.0, 1.0, 1.0, 1.0});
  ASSERT_EQ(heavy.size(), 2u);
  EXPECT_NE(heavy[0], even[0]);
  EXPECT_NE(heavy[1], even[1]);
}

} // namespace
