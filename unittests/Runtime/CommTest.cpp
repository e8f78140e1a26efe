//===- CommTest.cpp - Communication between ranks -------------------------===//
//
// Part of ZeroBubble MLIR.
//
// One executable, three roles:
//  - run directly (not under mpirun), it is the launcher: it runs the
//    single-process tests (LocalCommTest), then runs itself under mpirun on
//    two ranks (LaunchTest.RunsMPITestsOnTwoRanks) and in the failure
//    scenarios below, checking exit statuses and messages;
//  - under mpirun, it is a worker and runs the two-rank tests (MPICommTest);
//  - under mpirun with --zb-child=SCENARIO, it plays one failure scenario.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Comm.h"
#include "zbrt/Launch.h"
#include "zbrt/zbrt.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace zbrt;

namespace {

int gArgc = 0;
char **gArgv = nullptr;
/// The two-rank communicator in a worker; null in the launcher.
Comm *gComm = nullptr;

/// A ranked memref descriptor as MLIR lays it out.
template <typename T, int Rank> struct Descriptor {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];
};

template <typename T, int Rank>
Descriptor<T, Rank> makeDescriptor(T *data, int64_t offset,
                                   std::vector<int64_t> sizes,
                                   std::vector<int64_t> strides) {
  Descriptor<T, Rank> d;
  d.allocated = d.aligned = data;
  d.offset = offset;
  for (int i = 0; i < Rank; ++i) {
    d.sizes[i] = sizes[i];
    d.strides[i] = strides[i];
  }
  return d;
}

template <typename T, int Rank>
zbrt_unranked_memref unranked(Descriptor<T, Rank> &d) {
  return {Rank, &d};
}

//===----------------------------------------------------------------------===//
// Two ranks (under mpirun)
//===----------------------------------------------------------------------===//

class MPICommTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!gComm)
      GTEST_SKIP() << "runs under mpirun only";
    ASSERT_EQ(gComm->size(), 2);
  }
};

TEST_F(MPICommTest, StridedDescriptorsThroughTheCABI) {
  Comm &comm = *gComm;
  if (comm.rank() == 0) {
    // A 4x6 matrix; send the view [i, 1 + 2j] (4x3, strides 6 and 2), then
    // the same view from a contiguous copy, then a scalar f64.
    std::vector<float> matrix(24);
    for (int i = 0; i < 24; ++i)
      matrix[i] = static_cast<float>(i);
    auto strided = makeDescriptor<float, 2>(matrix.data(), 1, {4, 3}, {6, 2});
    auto memref = unranked(strided);
    _mlir_ciface_zbrt_send_f32(&memref, 1, 11);
    std::vector<float> dense(12);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j)
        dense[i * 3 + j] = matrix[1 + i * 6 + 2 * j];
    // The buffer may change at once: the send has copied it.
    auto contiguous = makeDescriptor<float, 2>(dense.data(), 0, {4, 3}, {3, 1});
    memref = unranked(contiguous);
    _mlir_ciface_zbrt_send_f32(&memref, 1, 11);
    std::fill(dense.begin(), dense.end(), -1.0f);
    double scalar = 2.5;
    Descriptor<double, 0> scalarDesc{&scalar, &scalar, 0, {}, {}};
    zbrt_unranked_memref scalarRef = {0, &scalarDesc};
    _mlir_ciface_zbrt_send_f64(&scalarRef, 1, 12);
  } else {
    // First into a contiguous 4x3 buffer.
    std::vector<float> dense(12, -1.0f);
    auto contiguous = makeDescriptor<float, 2>(dense.data(), 0, {4, 3}, {3, 1});
    auto memref = unranked(contiguous);
    _mlir_ciface_zbrt_recv_f32(&memref, 0, 11);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j)
        EXPECT_EQ(dense[i * 3 + j], static_cast<float>(1 + i * 6 + 2 * j))
            << i << ", " << j;
    // Then into a transposed view of a 3x4 buffer at offset 2.
    std::vector<float> transposed(14, -1.0f);
    auto strided =
        makeDescriptor<float, 2>(transposed.data(), 2, {4, 3}, {1, 4});
    memref = unranked(strided);
    _mlir_ciface_zbrt_recv_f32(&memref, 0, 11);
    EXPECT_EQ(transposed[0], -1.0f);
    EXPECT_EQ(transposed[1], -1.0f);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j)
        EXPECT_EQ(transposed[2 + j * 4 + i],
                  static_cast<float>(1 + i * 6 + 2 * j))
            << i << ", " << j;
    double scalar = 0;
    Descriptor<double, 0> scalarDesc{&scalar, &scalar, 0, {}, {}};
    zbrt_unranked_memref scalarRef = {0, &scalarDesc};
    _mlir_ciface_zbrt_recv_f64(&scalarRef, 0, 12);
    EXPECT_EQ(scalar, 2.5);
  }
  zbrt_step_end();
}

TEST_F(MPICommTest, OneTagIsFirstInFirstOut) {
  Comm &comm = *gComm;
  constexpr int kMessages = 40;
  if (comm.rank() == 0) {
    // Interleave two tags; message k has k + 1 ints, all equal to k.
    for (int k = 0; k < kMessages; ++k)
      for (int tag : {5, 6}) {
        std::vector<int> payload(k + 1, tag * 1000 + k);
        comm.send(payload.data(), payload.size() * sizeof(int), 1, tag);
      }
    comm.waitSends();
  } else {
    // Drain tag 6 before tag 5: tags are independent, order within one is
    // kept.
    for (int tag : {6, 5})
      for (int k = 0; k < kMessages; ++k) {
        std::vector<int> payload(k + 1, -1);
        comm.recv(payload.data(), payload.size() * sizeof(int), 0, tag);
        for (int value : payload)
          ASSERT_EQ(value, tag * 1000 + k)
              << "tag " << tag << ", message " << k;
      }
  }
  comm.barrier();
}

TEST_F(MPICommTest, LargeMessagesBothWays) {
  Comm &comm = *gComm;
  // Above every eager limit, so the rendezvous path runs; both ranks send
  // before they receive.
  constexpr size_t kFloats = size_t(4) << 20;
  std::vector<float> out(kFloats), in(kFloats, 0.0f);
  for (size_t i = 0; i < kFloats; ++i)
    out[i] = static_cast<float>(i % 1000) + comm.rank();
  int peer = 1 - comm.rank();
  comm.send(out.data(), kFloats * sizeof(float), peer, 21);
  comm.recv(in.data(), kFloats * sizeof(float), peer, 21);
  comm.waitSends();
  for (size_t i = 0; i < kFloats; i += 4099)
    ASSERT_EQ(in[i], static_cast<float>(i % 1000) + peer) << i;
}

TEST_F(MPICommTest, Collectives) {
  Comm &comm = *gComm;
  int rank = comm.rank();
  double sums[2] = {rank + 1.0, 10.0 * rank};
  comm.allreduceSum(sums, 2);
  EXPECT_EQ(sums[0], 3.0);
  EXPECT_EQ(sums[1], 10.0);

  std::vector<float> floats(1000);
  for (size_t i = 0; i < floats.size(); ++i)
    floats[i] = static_cast<float>(i) * (rank + 1);
  comm.allreduceSum(floats.data(), floats.size());
  for (size_t i = 0; i < floats.size(); ++i)
    ASSERT_EQ(floats[i], 3.0f * i) << i;

  double maxima[2] = {static_cast<double>(rank), -static_cast<double>(rank)};
  comm.allreduceMax(maxima, 2);
  EXPECT_EQ(maxima[0], 1.0);
  EXPECT_EQ(maxima[1], 0.0);

  int values[3] = {rank, rank, rank};
  comm.broadcast(values, sizeof(values), 1);
  EXPECT_EQ(values[0], 1);
  EXPECT_EQ(values[2], 1);

  std::vector<std::string> all;
  comm.gather(std::string(rank + 1, static_cast<char>('a' + rank)), all, 0);
  if (rank == 0)
    EXPECT_EQ(all, (std::vector<std::string>{"a", "bb"}));
  else
    EXPECT_TRUE(all.empty());
  comm.barrier();

  // Every rank gets every rank's values, while this rank works on.
  double mine[2] = {rank + 0.5, -1.0 * rank};
  double gathered[4] = {0, 0, 0, 0};
  comm.startAllgather(mine, 2, gathered);
  comm.waitAllgather();
  EXPECT_EQ(gathered[0], 0.5);
  EXPECT_EQ(gathered[1], 0.0);
  EXPECT_EQ(gathered[2], 1.5);
  EXPECT_EQ(gathered[3], -1.0);
  comm.barrier();
}

TEST_F(MPICommTest, ReplicaMeansThroughTheCABI) {
  // Two replicas of a one-rank pipeline: split by world rank, each rank is
  // rank 0 of its own pipeline, and a replica mean over group [0] averages
  // the two ranks' buffers.
  Comm &world = *gComm;
  int rank = world.rank();
  std::string error;
  std::unique_ptr<Comm> pipeline = world.split(rank, 0, error);
  ASSERT_TRUE(pipeline) << error;
  EXPECT_EQ(pipeline->size(), 1);
  EXPECT_EQ(pipeline->rank(), 0);
  Comm *previous = zbrt_get_comm();
  zbrt_set_comm(pipeline.get());
  zbrt_set_replicas(&world, 2);

  std::vector<float> grads = {1.0f + rank, 3.0f * rank, -2.0f};
  auto desc = makeDescriptor<float, 1>(grads.data(), 0, {3}, {1});
  auto memref = unranked(desc);
  int64_t members[1] = {0};
  auto groupDesc = makeDescriptor<int64_t, 1>(members, 0, {1}, {1});
  auto group = unranked(groupDesc);
  _mlir_ciface_zbrt_replica_mean_f32(&memref, &group);
  zbrt_wait_group_sums();
  EXPECT_EQ(grads, (std::vector<float>{1.5f, 1.5f, -2.0f}));

  // Without replicas a replica mean is the pipeline's group sum: here, of
  // one rank, the identity.
  zbrt_set_replicas(nullptr, 1);
  _mlir_ciface_zbrt_replica_mean_f32(&memref, &group);
  zbrt_wait_group_sums();
  EXPECT_EQ(grads, (std::vector<float>{1.5f, 1.5f, -2.0f}));

  // The f64 forms add in double precision: 2^-40 is below float's
  // resolution at 1, and survives the mean and the sum.
  double tiny = std::ldexp(1.0, -40);
  std::vector<double> wide = {1.0 + rank * tiny, -3.0 * rank};
  auto wideDesc = makeDescriptor<double, 1>(wide.data(), 0, {2}, {1});
  auto wideMemref = unranked(wideDesc);
  zbrt_set_replicas(&world, 2);
  _mlir_ciface_zbrt_replica_mean_f64(&wideMemref, &group);
  zbrt_wait_group_sums();
  EXPECT_EQ(wide, (std::vector<double>{1.0 + tiny / 2, -1.5}));
  // A group sum over both ranks of the world.
  zbrt_set_replicas(nullptr, 1);
  zbrt_set_comm(&world);
  int64_t bothRanks[2] = {0, 1};
  auto bothDesc = makeDescriptor<int64_t, 1>(bothRanks, 0, {2}, {1});
  auto worldGroup = unranked(bothDesc);
  _mlir_ciface_zbrt_group_sum_f64(&wideMemref, &worldGroup);
  zbrt_wait_group_sums();
  EXPECT_EQ(wide, (std::vector<double>{2.0 + tiny, -3.0}));
  zbrt_set_comm(previous);

  // One communicator per color, numbered by key.
  std::unique_ptr<Comm> both = world.split(0, -rank, error);
  ASSERT_TRUE(both) << error;
  EXPECT_EQ(both->size(), 2);
  EXPECT_EQ(both->rank(), 1 - rank);
  EXPECT_FALSE(world.split(-1, 0, error));
  EXPECT_NE(error.find("negative color"), std::string::npos) << error;
  world.barrier();
}

/// What a worker runs for --zb-child=SCENARIO; returns its exit status.
int runScenario(Comm &comm, const std::string &scenario) {
  float buffer[2] = {0, 0};
  if (scenario == "timeout") {
    // Rank 1 waits for a message rank 0 never sends.
    if (comm.rank() == 1)
      comm.recv(buffer, sizeof(buffer), 0, 7);
    else
      std::this_thread::sleep_for(std::chrono::seconds(30));
    return 0;
  }
  if (scenario == "kill") {
    // Rank 0 dies while rank 1 waits for it.
    comm.barrier();
    if (comm.rank() == 0)
      std::raise(SIGKILL);
    comm.recv(buffer, sizeof(buffer), 0, 7);
    return 0;
  }
  if (scenario == "short") {
    // Rank 1 expects 8 bytes, rank 0 sends 4.
    if (comm.rank() == 0) {
      comm.send(buffer, 4, 1, 3);
      comm.waitSends();
      std::this_thread::sleep_for(std::chrono::seconds(30));
    } else {
      comm.recv(buffer, 8, 0, 3);
    }
    return 0;
  }
  comm.abort("unknown scenario '" + scenario + "'");
  return 1;
}

//===----------------------------------------------------------------------===//
// The launcher (not under mpirun)
//===----------------------------------------------------------------------===//

class LaunchTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (isMPIWorker())
      GTEST_SKIP() << "runs outside mpirun only";
  }

  /// Runs this executable on two ranks playing `scenario` with ZB_TIMEOUT_S
  /// = `timeout`; returns mpirun's status, its stderr and the seconds taken.
  int runScenario(const std::string &scenario, const char *timeout,
                  std::string &errors, double &seconds) {
    char path[] = "/tmp/zbrt-comm-test-XXXXXX";
    int file = mkstemp(path);
    EXPECT_GE(file, 0);
    std::string flag = "--zb-child=" + scenario;
    char *argv[] = {gArgv[0], flag.data(), nullptr};

    const char *old = std::getenv("ZB_TIMEOUT_S");
    std::string saved = old ? old : "";
    setenv("ZB_TIMEOUT_S", timeout, 1);
    std::fflush(stderr);
    int savedErr = dup(STDERR_FILENO);
    dup2(file, STDERR_FILENO);
    auto start = std::chrono::steady_clock::now();
    std::string error;
    int status = relaunchUnderMPI(2, 2, argv, error);
    seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    std::fflush(stderr);
    dup2(savedErr, STDERR_FILENO);
    close(savedErr);
    close(file);
    if (old)
      setenv("ZB_TIMEOUT_S", saved.c_str(), 1);
    else
      unsetenv("ZB_TIMEOUT_S");
    EXPECT_EQ(error, "");

    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    errors = text.str();
    unlink(path);
    return status;
  }
};

TEST_F(LaunchTest, RunsMPITestsOnTwoRanks) {
  // A hung test fails within a minute instead of hanging ctest.
  setenv("ZB_TIMEOUT_S", "60", 0);
  std::string error;
  EXPECT_EQ(relaunchUnderMPI(2, gArgc, gArgv, error), 0) << error;
  EXPECT_EQ(error, "");
}

TEST_F(LaunchTest, RecvTimeoutAbortsTheJob) {
  std::string errors;
  double seconds = 0;
  int status = runScenario("timeout", "1", errors, seconds);
  EXPECT_NE(status, 0);
  EXPECT_NE(errors.find("zb-run: error: rank 1: timed out after 1 s waiting "
                        "for a message from rank 0 (tag 7)"),
            std::string::npos)
      << errors;
  EXPECT_LT(seconds, 25.0);
}

TEST_F(LaunchTest, DeadRankEndsTheJob) {
  std::string errors;
  double seconds = 0;
  int status = runScenario("kill", "100", errors, seconds);
  EXPECT_NE(status, 0);
  EXPECT_FALSE(errors.empty());
  EXPECT_LT(seconds, 60.0) << errors;
}

TEST_F(LaunchTest, WrongMessageSizeAbortsTheJob) {
  std::string errors;
  double seconds = 0;
  int status = runScenario("short", "20", errors, seconds);
  EXPECT_NE(status, 0);
  EXPECT_NE(errors.find("zb-run: error: rank 1: message from rank 0 (tag 3) "
                        "has 4 bytes, expected 8"),
            std::string::npos)
      << errors;
  EXPECT_LT(seconds, 25.0);
}

TEST_F(LaunchTest, LaunchedWorldSizeIsACountOrNothing) {
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  const std::pair<const char *, int> cases[] = {
      {"4", 4}, {"abc", 0}, {"4x", 0}, {"-2", 0}, {"0", 0}, {"99999999999", 0}};
  for (auto [text, want] : cases) {
    setenv("OMPI_COMM_WORLD_SIZE", text, 1);
    EXPECT_EQ(launchedWorldSize(), want) << text;
  }
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("OMPI_COMM_WORLD_RANK");
}

TEST_F(LaunchTest, MissingMPIRunIsAnError) {
  const char *old = std::getenv("PATH");
  std::string saved = old ? old : "";
  setenv("PATH", "/nonexistent", 1);
  std::string error;
  int status = relaunchUnderMPI(2, gArgc, gArgv, error);
  setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(status, -1);
  EXPECT_NE(error.find("cannot find 'mpirun' on PATH"), std::string::npos)
      << error;
}

//===----------------------------------------------------------------------===//
// One process
//===----------------------------------------------------------------------===//

class LocalCommTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (isMPIWorker())
      GTEST_SKIP() << "runs outside mpirun only";
  }
};

TEST_F(LocalCommTest, CollectivesAreTheIdentity) {
  auto comm = createLocalComm();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  double values[2] = {1.5, -2};
  comm->allreduceSum(values, 2);
  comm->allreduceMax(values, 2);
  EXPECT_EQ(values[0], 1.5);
  EXPECT_EQ(values[1], -2);
  std::vector<std::string> all;
  comm->gather("x", all, 0);
  EXPECT_EQ(all, std::vector<std::string>{"x"});
  double gathered[2] = {0, 0};
  comm->startAllgather(values, 2, gathered);
  comm->waitAllgather();
  EXPECT_EQ(gathered[0], 1.5);
  EXPECT_EQ(gathered[1], -2);
  comm->barrier();
  comm->waitSends();
}

TEST_F(LocalCommTest, TransfersAreErrors) {
  auto comm = createLocalComm();
  float value = 0;
  EXPECT_EXIT(comm->send(&value, sizeof(value), 0, 4),
              ::testing::ExitedWithCode(1),
              "zb-run: error: rank 0: send to itself \\(tag 4\\)");
  EXPECT_EXIT(comm->recv(&value, sizeof(value), 0, 4),
              ::testing::ExitedWithCode(1),
              "zb-run: error: rank 0: recv from itself \\(tag 4\\)");
  EXPECT_EXIT(comm->recv(&value, sizeof(value), 1, 4),
              ::testing::ExitedWithCode(1),
              "zb-run: error: rank 0: recv with peer rank 1, which is not in "
              "\\[0, 1\\)");
}

TEST_F(LocalCommTest, CABINeedsACommunicator) {
  float value = 0;
  Descriptor<float, 0> desc{&value, &value, 0, {}, {}};
  zbrt_unranked_memref memref = {0, &desc};
  zbrt_set_comm(nullptr);
  EXPECT_EXIT(_mlir_ciface_zbrt_send_f32(&memref, 0, 1),
              ::testing::ExitedWithCode(1),
              "zb-run: error: zbrt_send_f32: called before a communicator "
              "was set");
  auto comm = createLocalComm();
  zbrt_set_comm(comm.get());
  EXPECT_EXIT(_mlir_ciface_zbrt_recv_f32(&memref, 3, 1),
              ::testing::ExitedWithCode(1),
              "zb-run: error: rank 0: zbrt_recv_f32: peer rank 3 is not in "
              "\\[0, 1\\)");
  zbrt_step_end();
  zbrt_set_comm(nullptr);
}

TEST_F(LocalCommTest, TimeoutFromTheEnvironment) {
  const char *old = std::getenv("ZB_TIMEOUT_S");
  std::string saved = old ? old : "";
  double seconds = 0;
  std::string error;
  unsetenv("ZB_TIMEOUT_S");
  EXPECT_TRUE(readTimeoutFromEnv(seconds, error));
  EXPECT_EQ(seconds, kDefaultTimeoutSeconds);
  setenv("ZB_TIMEOUT_S", "2.5", 1);
  EXPECT_TRUE(readTimeoutFromEnv(seconds, error));
  EXPECT_EQ(seconds, 2.5);
  // Forever, as the docs say: infinity and times past double's range.
  setenv("ZB_TIMEOUT_S", "inf", 1);
  EXPECT_TRUE(readTimeoutFromEnv(seconds, error));
  EXPECT_TRUE(std::isinf(seconds));
  setenv("ZB_TIMEOUT_S", "1e400", 1);
  EXPECT_TRUE(readTimeoutFromEnv(seconds, error));
  EXPECT_TRUE(std::isinf(seconds));
  setenv("ZB_TIMEOUT_S", "1e-400", 1);
  EXPECT_TRUE(readTimeoutFromEnv(seconds, error));
  EXPECT_EQ(seconds, 0.0);
  for (const char *bad : {"soon", "nan", "-1", "-inf", "2s", ""}) {
    setenv("ZB_TIMEOUT_S", bad, 1);
    error.clear();
    bool ok = readTimeoutFromEnv(seconds, error);
    if (!*bad) {
      // Empty is unset.
      EXPECT_TRUE(ok);
      continue;
    }
    EXPECT_FALSE(ok) << bad;
    EXPECT_NE(error.find("ZB_TIMEOUT_S"), std::string::npos) << bad;
  }
  if (old)
    setenv("ZB_TIMEOUT_S", saved.c_str(), 1);
  else
    unsetenv("ZB_TIMEOUT_S");
}

} // namespace

int main(int argc, char **argv) {
  gArgc = argc;
  gArgv = argv;
  if (!isMPIWorker()) {
    ::testing::InitGoogleTest(&argc, argv);
    // What a relaunch passes on: the command line without the gtest flags
    // (a --gtest_filter for the launcher's tests would filter out the
    // workers'), whose removal leaves argv null-terminated at argc.
    gArgc = argc;
    return RUN_ALL_TESTS();
  }

  initComm(&argc, &argv);
  std::string error;
  std::unique_ptr<Comm> comm = createMPIComm(error);
  if (!comm) {
    std::fprintf(stderr, "CommTest: %s\n", error.c_str());
    return 1;
  }
  int status;
  const char *prefix = "--zb-child=";
  if (argc > 1 && std::strncmp(argv[1], prefix, std::strlen(prefix)) == 0) {
    status = runScenario(*comm, argv[1] + std::strlen(prefix));
  } else {
    ::testing::InitGoogleTest(&argc, argv);
    gComm = comm.get();
    zbrt_set_comm(gComm);
    status = RUN_ALL_TESTS();
    zbrt_set_comm(nullptr);
    gComm = nullptr;
  }
  comm.reset();
  finalizeComm();
  return status;
}
