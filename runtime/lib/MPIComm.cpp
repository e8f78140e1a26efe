//===- MPIComm.cpp - The MPI communication backend ------------------------===//
//
// Part of ZeroBubble MLIR.
//
// Every operation is non-blocking underneath (MPI_Isend, MPI_Irecv,
// MPI_Ibarrier, MPI_Iallreduce, ...) and completed by a loop of MPI_Test
// calls (yielding the core, later sleeping, in between), so that every wait
// can time out, and so that a waiting rank does not hold a core an
// oversubscribed run needs. Errors
// return (MPI_ERRORS_RETURN) and end the job through abort(), naming the
// rank and the operation.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Comm.h"
#include "zbrt/Gemm.h"

#include "zbrt/Lending.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <thread>
#include <vector>

using namespace zbrt;

/// The largest message (in bytes) or collective (in elements) one MPI call
/// moves; larger ones are split, which MPI's int counts require.
static constexpr size_t kChunk = size_t(1) << 30;

/// Whether initComm() initialised MPI (and so finalizeComm() finalises it).
static bool initialisedHere = false;

static std::string mpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, length);
}

static std::string formatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

static bool mpiFinalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized;
}

namespace {

class MPIComm final : public Comm {
public:
  MPIComm(MPI_Comm comm, int rank, int size, int tagUpperBound)
      : comm(comm), myRank(rank), mySize(size), tagUpperBound(tagUpperBound) {}
  ~MPIComm() override;

  int rank() const override { return myRank; }
  int size() const override { return mySize; }

  void sendBuffer(std::vector<char> buffer, int peer, int tag) override;
  void recv(void *data, size_t bytes, int peer, int tag) override;
  void waitSends() override;
  void barrier() override;
  void allreduceSum(double *values, size_t n) override {
    allreduce(values, n, MPI_DOUBLE, sizeof(double), MPI_SUM, "sum");
  }
  void allreduceSum(float *values, size_t n) override {
    allreduce(values, n, MPI_FLOAT, sizeof(float), MPI_SUM, "sum");
  }
  void allreduceMax(double *values, size_t n) override {
    allreduce(values, n, MPI_DOUBLE, sizeof(double), MPI_MAX, "max");
  }
  void startGroupSum(void *values, size_t n, SumElement element,
                     const std::vector<int> &group) override;
  void waitGroupSums() override;
  void startAllgather(const double *mine, size_t n, double *all) override;
  void waitAllgather() override;
  std::unique_ptr<Comm> split(int color, int key, std::string &error) override;
  void broadcast(void *data, size_t bytes, int root) override;
  void gather(const std::string &mine, std::vector<std::string> &all,
              int root) override;
  [[noreturn]] void abort(const std::string &message) override;

private:
  /// A posted send: its data stays alive until its requests complete.
  struct PendingSend {
    std::vector<char> buffer;
    std::vector<MPI_Request> requests;
    int peer;
    int tag;
  };

  /// Aborts with "<operation> failed: <MPI's message>" unless `code` is
  /// MPI_SUCCESS.
  void check(int code, const std::string &operation) {
    if (code != MPI_SUCCESS)
      abort(operation + " failed: " + mpiErrorString(code));
  }
  /// Checks the result of MPI_Test{,all}: on MPI_ERR_IN_STATUS the real
  /// error is in one of the statuses.
  void checkTest(int code, MPI_Status *statuses, int count,
                 const std::string &operation);
  /// Tests `requests` until all complete, aborting with `timeoutMessage()`
  /// once `deadline` has passed (a deadline of max() never passes).
  template <typename MessageFn>
  void waitAll(std::vector<MPI_Request> &requests,
               std::vector<MPI_Status> &statuses,
               std::chrono::steady_clock::time_point deadline,
               const std::string &operation, MessageFn timeoutMessage);
  std::chrono::steady_clock::time_point deadline() const;
  /// Completes one non-blocking collective request.
  void waitCollective(MPI_Request request, const std::string &operation);
  void allreduce(void *values, size_t n, MPI_Datatype type, size_t typeSize,
                 MPI_Op op, const char *opName);
  void checkRoot(const char *what, int root);
  /// Drops the sends that have completed.
  void reapSends();

  /// The allgather startAllgather() started, if any.
  MPI_Request allgatherRequest = MPI_REQUEST_NULL;
  size_t allgatherCount = 0;

  /// A group sum started or waiting for its group's communicator.
  struct GroupSum {
    void *values;
    int count;
    MPI_Datatype type;
    std::vector<int> group;
    MPI_Request request = MPI_REQUEST_NULL;
    bool started = false;
  };
  /// The communicator of `group`, or MPI_COMM_NULL before groupComm().
  MPI_Comm findGroupComm(const std::vector<int> &group) const;
  /// Creates the communicator of `group` (collective over the group).
  MPI_Comm groupComm(const std::vector<int> &group);
  /// Starts the first half of `sum`: a reduction to the group's first rank.
  void startReduce(GroupSum &sum, MPI_Comm groupComm);

  MPI_Comm comm;
  int myRank;
  int mySize;
  int tagUpperBound;
  std::vector<PendingSend> pending;
  std::map<std::vector<int>, MPI_Comm> groupComms;
  std::vector<GroupSum> groupSums;
};

} // namespace

MPIComm::~MPIComm() {
  if (mpiFinalized())
    return;
  waitSends();
  for (auto &entry : groupComms)
    MPI_Comm_free(&entry.second);
  MPI_Comm_free(&comm);
}

void MPIComm::abort(const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "zb-run: error: rank %d: %s\n", myRank, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

void MPIComm::checkTest(int code, MPI_Status *statuses, int count,
                        const std::string &operation) {
  if (code == MPI_ERR_IN_STATUS) {
    for (int i = 0; i < count; ++i) {
      int error = statuses[i].MPI_ERROR;
      if (error != MPI_SUCCESS && error != MPI_ERR_PENDING)
        check(error, operation);
    }
  }
  check(code, operation);
}

std::chrono::steady_clock::time_point MPIComm::deadline() const {
  using Clock = std::chrono::steady_clock;
  // No deadline without a timeout, nor past the clock's range (a timeout
  // of centuries, in the clock's nanoseconds, would overflow).
  double seconds = timeoutSeconds();
  std::chrono::duration<double> left = Clock::time_point::max() - Clock::now();
  if (seconds <= 0 || seconds >= left.count() / 2)
    return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

template <typename MessageFn>
void MPIComm::waitAll(std::vector<MPI_Request> &requests,
                      std::vector<MPI_Status> &statuses,
                      std::chrono::steady_clock::time_point deadline,
                      const std::string &operation, MessageFn timeoutMessage) {
  statuses.resize(requests.size());
  // For the first 100 ms, test and yield the core between tests: a message
  // is noticed within microseconds, and an oversubscribed run's computing
  // ranks still get the core (sched_yield). Longer waits (a slow or hung
  // peer) sleep between tests, backing off from 50 us to 1 ms.
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  auto spinUntil = start + std::chrono::milliseconds(100);
  std::chrono::microseconds pause(50);
  IdleWait idle;
  while (true) {
    int done = 0;
    int code = MPI_Testall(static_cast<int>(requests.size()), requests.data(),
                           &done, statuses.data());
    checkTest(code, statuses.data(), static_cast<int>(statuses.size()),
              operation);
    if (done)
      return;
    auto now = Clock::now();
    if (now > deadline)
      abort(timeoutMessage());
    if (now < spinUntil) {
      // The wait repacks the step's weights ahead of their use, one at a
      // time (a fraction of a millisecond each), or offers the core to the
      // node's other ranks (Lending.h) and yields it; a lent core sleeps
      // between tests.
      if (packWeightWhileIdle())
        continue;
      idle.offer();
      if (idle.lent())
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      else
        sched_yield();
      continue;
    }
    idle.offer();
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void MPIComm::waitCollective(MPI_Request request,
                             const std::string &operation) {
  std::vector<MPI_Request> requests{request};
  std::vector<MPI_Status> statuses;
  waitAll(requests, statuses, deadline(), operation, [&] {
    return "timed out after " + formatSeconds(timeoutSeconds()) +
           " s waiting for the other ranks in " + operation;
  });
}

void MPIComm::reapSends() {
  std::vector<MPI_Status> statuses;
  auto completed = [&](PendingSend &send) {
    statuses.resize(send.requests.size());
    int done = 0;
    int code = MPI_Testall(static_cast<int>(send.requests.size()),
                           send.requests.data(), &done, statuses.data());
    checkTest(code, statuses.data(), static_cast<int>(statuses.size()),
              "send to rank " + std::to_string(send.peer) + " (tag " +
                  std::to_string(send.tag) + ")");
    return done != 0;
  };
  pending.erase(std::remove_if(pending.begin(), pending.end(), completed),
                pending.end());
}

void MPIComm::sendBuffer(std::vector<char> buffer, int peer, int tag) {
  checkPeerAndTag("send", peer, tag);
  if (tag > tagUpperBound)
    abort("send with tag " + std::to_string(tag) + " above MPI_TAG_UB (" +
          std::to_string(tagUpperBound) + ")");
  // Keep the list of posted sends short between waitSends() calls.
  if (pending.size() >= 16)
    reapSends();
  pending.push_back({std::move(buffer), {}, peer, tag});
  PendingSend &send = pending.back();
  std::string operation = "MPI_Isend to rank " + std::to_string(peer) +
                          " (tag " + std::to_string(tag) + ", " +
                          std::to_string(send.buffer.size()) + " bytes)";
  size_t offset = 0;
  do {
    size_t count = std::min(kChunk, send.buffer.size() - offset);
    send.requests.emplace_back();
    check(MPI_Isend(send.buffer.data() + offset, static_cast<int>(count),
                    MPI_BYTE, peer, tag, comm, &send.requests.back()),
          operation);
    offset += count;
  } while (offset < send.buffer.size());
}

void MPIComm::recv(void *data, size_t bytes, int peer, int tag) {
  checkPeerAndTag("recv", peer, tag);
  if (tag > tagUpperBound)
    abort("recv with tag " + std::to_string(tag) + " above MPI_TAG_UB (" +
          std::to_string(tagUpperBound) + ")");
  std::string operation = "recv from rank " + std::to_string(peer) + " (tag " +
                          std::to_string(tag) + ", " + std::to_string(bytes) +
                          " bytes)";
  // One request per chunk, as the sender split it. A longer message fails
  // as truncated; a shorter one is caught by the count check below.
  std::vector<MPI_Request> requests;
  std::vector<size_t> expected;
  char *begin = static_cast<char *>(data);
  size_t offset = 0;
  do {
    size_t count = std::min(kChunk, bytes - offset);
    requests.emplace_back();
    expected.push_back(count);
    check(MPI_Irecv(begin + offset, static_cast<int>(count), MPI_BYTE, peer,
                    tag, comm, &requests.back()),
          "MPI_Irecv from rank " + std::to_string(peer) + " (tag " +
              std::to_string(tag) + ")");
    offset += count;
  } while (offset < bytes);

  std::vector<MPI_Status> statuses;
  waitAll(requests, statuses, deadline(), operation, [&] {
    return "timed out after " + formatSeconds(timeoutSeconds()) +
           " s waiting for a message from rank " + std::to_string(peer) +
           " (tag " + std::to_string(tag) + ")";
  });
  for (size_t i = 0; i < statuses.size(); ++i) {
    int count = 0;
    check(MPI_Get_count(&statuses[i], MPI_BYTE, &count), operation);
    if (static_cast<size_t>(count) != expected[i])
      abort("message from rank " + std::to_string(peer) + " (tag " +
            std::to_string(tag) + ") has " + std::to_string(count) +
            " bytes, expected " + std::to_string(bytes));
  }
}

void MPIComm::waitSends() {
  auto until = deadline();
  std::vector<MPI_Status> statuses;
  for (PendingSend &send : pending) {
    std::string operation = "send to rank " + std::to_string(send.peer) +
                            " (tag " + std::to_string(send.tag) + ")";
    waitAll(send.requests, statuses, until, operation, [&] {
      return "timed out after " + formatSeconds(timeoutSeconds()) +
             " s waiting for rank " + std::to_string(send.peer) +
             " to receive a message (tag " + std::to_string(send.tag) + ")";
    });
  }
  pending.clear();
}

void MPIComm::barrier() {
  MPI_Request request;
  check(MPI_Ibarrier(comm, &request), "MPI_Ibarrier");
  waitCollective(request, "a barrier");
}

void MPIComm::allreduce(void *values, size_t n, MPI_Datatype type,
                        size_t typeSize, MPI_Op op, const char *opName) {
  std::string operation = std::string("an allreduce (") + opName + " of " +
                          std::to_string(n) + " elements)";
  char *begin = static_cast<char *>(values);
  size_t offset = 0;
  do {
    size_t count = std::min(kChunk, n - offset);
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, begin + offset * typeSize,
                         static_cast<int>(count), type, op, comm, &request),
          "MPI_Iallreduce");
    waitCollective(request, operation);
    offset += count;
  } while (offset < n);
}

// A group sum is a reduction to the group's first rank and a broadcast
// back (rather than an MPI allreduce, whose algorithms may add in another
// order on each rank), so that every rank ends with the same bits. The
// reduction starts at once when the group's communicator exists; the first
// sum over a group waits for waitGroupSums(), where the communicator is
// created: MPI_Comm_create_group blocks until every member calls it, which
// in the middle of a step could wait on a rank that waits for this one.

MPI_Comm MPIComm::findGroupComm(const std::vector<int> &group) const {
  auto it = groupComms.find(group);
  return it == groupComms.end() ? MPI_COMM_NULL : it->second;
}

MPI_Comm MPIComm::groupComm(const std::vector<int> &group) {
  if (MPI_Comm existing = findGroupComm(group); existing != MPI_COMM_NULL)
    return existing;
  std::string members;
  for (int r : group)
    members += (members.empty() ? "" : ", ") + std::to_string(r);
  std::string operation =
      "creating the communicator of ranks [" + members + "]";
  MPI_Group world, subset;
  check(MPI_Comm_group(comm, &world), operation);
  check(MPI_Group_incl(world, static_cast<int>(group.size()), group.data(),
                       &subset),
        operation);
  MPI_Comm result = MPI_COMM_NULL;
  check(MPI_Comm_create_group(comm, subset, /*tag=*/0, &result), operation);
  MPI_Group_free(&subset);
  MPI_Group_free(&world);
  groupComms[group] = result;
  return result;
}

void MPIComm::startReduce(GroupSum &sum, MPI_Comm groupComm) {
  bool root = sum.group.front() == myRank;
  check(MPI_Ireduce(root ? MPI_IN_PLACE : sum.values,
                    root ? sum.values : nullptr, sum.count, sum.type, MPI_SUM,
                    /*root=*/0, groupComm, &sum.request),
        "MPI_Ireduce");
  sum.started = true;
}

void MPIComm::startGroupSum(void *values, size_t n, SumElement element,
                            const std::vector<int> &group) {
  checkGroup(group);
  if (group.size() == 1 || n == 0)
    return;
  if (n > static_cast<size_t>(INT_MAX))
    abort("group sum of " + std::to_string(n) +
          " elements: more than MPI's int counts allow");
  groupSums.push_back({values, static_cast<int>(n),
                       element == SumElement::F64 ? MPI_DOUBLE : MPI_FLOAT,
                       group});
  if (MPI_Comm existing = findGroupComm(group); existing != MPI_COMM_NULL)
    startReduce(groupSums.back(), existing);
}

void MPIComm::waitGroupSums() {
  if (groupSums.empty())
    return;
  std::vector<MPI_Request> requests;
  std::vector<MPI_Status> statuses;
  auto waitStarted = [&](const std::string &operation) {
    requests.clear();
    for (GroupSum &sum : groupSums)
      if (sum.request != MPI_REQUEST_NULL)
        requests.push_back(sum.request);
    if (!requests.empty())
      waitAll(requests, statuses, deadline(), operation, [&] {
        return "timed out after " + formatSeconds(timeoutSeconds()) +
               " s waiting for the other ranks of a group in " + operation;
      });
    for (GroupSum &sum : groupSums)
      sum.request = MPI_REQUEST_NULL;
  };
  // The deferred sums' communicators, in one order on every rank (sorted
  // groups): the smallest group still missing is then reached by all its
  // members, so creating them cannot deadlock.
  std::vector<std::vector<int>> missing;
  for (GroupSum &sum : groupSums)
    if (!sum.started)
      missing.push_back(sum.group);
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  for (const std::vector<int> &group : missing)
    groupComm(group);
  for (GroupSum &sum : groupSums)
    if (!sum.started)
      startReduce(sum, groupComm(sum.group));
  waitStarted("the reduction of shared gradients");
  for (GroupSum &sum : groupSums)
    check(MPI_Ibcast(sum.values, sum.count, sum.type, /*root=*/0,
                     groupComm(sum.group), &sum.request),
          "MPI_Ibcast");
  waitStarted("the broadcast of shared gradients");
  groupSums.clear();
}

std::unique_ptr<Comm> MPIComm::split(int color, int key, std::string &error) {
  if (color < 0) {
    error = "cannot split a communicator by the negative color " +
            std::to_string(color);
    return nullptr;
  }
  MPI_Comm part = MPI_COMM_NULL;
  int code = MPI_Comm_split(comm, color, key, &part);
  if (code == MPI_SUCCESS)
    code = MPI_Comm_set_errhandler(part, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  if (code == MPI_SUCCESS)
    code = MPI_Comm_rank(part, &rank);
  if (code == MPI_SUCCESS)
    code = MPI_Comm_size(part, &size);
  if (code != MPI_SUCCESS) {
    error = "cannot split the MPI communicator: " + mpiErrorString(code);
    if (part != MPI_COMM_NULL)
      MPI_Comm_free(&part);
    return nullptr;
  }
  auto result = std::make_unique<MPIComm>(part, rank, size, tagUpperBound);
  result->setTimeoutSeconds(timeoutSeconds());
  return result;
}

void MPIComm::checkRoot(const char *what, int root) {
  if (root < 0 || root >= mySize)
    abort(std::string(what) + " with root rank " + std::to_string(root) +
          ", which is not in [0, " + std::to_string(mySize) + ")");
}

void MPIComm::broadcast(void *data, size_t bytes, int root) {
  checkRoot("broadcast", root);
  std::string operation = "a broadcast from rank " + std::to_string(root) +
                          " (" + std::to_string(bytes) + " bytes)";
  char *begin = static_cast<char *>(data);
  size_t offset = 0;
  do {
    size_t count = std::min(kChunk, bytes - offset);
    MPI_Request request;
    check(MPI_Ibcast(begin + offset, static_cast<int>(count), MPI_BYTE, root,
                     comm, &request),
          "MPI_Ibcast");
    waitCollective(request, operation);
    offset += count;
  } while (offset < bytes);
}

void MPIComm::startAllgather(const double *mine, size_t n, double *all) {
  if (allgatherRequest != MPI_REQUEST_NULL)
    abort("an allgather started before the previous one completed");
  if (n > static_cast<size_t>(INT_MAX))
    abort("allgather of " + std::to_string(n) +
          " values: more than MPI's int counts allow");
  allgatherCount = n;
  check(MPI_Iallgather(mine, static_cast<int>(n), MPI_DOUBLE, all,
                       static_cast<int>(n), MPI_DOUBLE, comm,
                       &allgatherRequest),
        "MPI_Iallgather");
}

void MPIComm::waitAllgather() {
  if (allgatherRequest == MPI_REQUEST_NULL)
    return;
  MPI_Request request = allgatherRequest;
  allgatherRequest = MPI_REQUEST_NULL;
  waitCollective(request, "an allgather of " + std::to_string(allgatherCount) +
                              " values per rank");
}

void MPIComm::gather(const std::string &mine, std::vector<std::string> &all,
                     int root) {
  checkRoot("gather", root);
  if (mine.size() > static_cast<size_t>(INT_MAX))
    abort("gather of " + std::to_string(mine.size()) +
          " bytes: more than MPI's int counts allow");
  int mySizeBytes = static_cast<int>(mine.size());
  bool isRoot = myRank == root;
  std::vector<int> sizes(isRoot ? mySize : 0);
  MPI_Request request;
  check(MPI_Igather(&mySizeBytes, 1, MPI_INT, sizes.data(), 1, MPI_INT, root,
                    comm, &request),
        "MPI_Igather");
  waitCollective(request, "a gather to rank " + std::to_string(root));

  std::vector<int> displacements(sizes.size());
  long long total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    if (total > INT_MAX)
      break;
    displacements[r] = static_cast<int>(total);
    total += sizes[r];
  }
  if (total > INT_MAX)
    abort("gather of " + std::to_string(total) +
          " bytes in all: more than MPI's int counts allow");
  std::vector<char> buffer(isRoot ? static_cast<size_t>(total) : 0);
  check(MPI_Igatherv(mine.data(), mySizeBytes, MPI_BYTE, buffer.data(),
                     sizes.data(), displacements.data(), MPI_BYTE, root, comm,
                     &request),
        "MPI_Igatherv");
  waitCollective(request, "a gather to rank " + std::to_string(root));

  all.clear();
  for (size_t r = 0; r < sizes.size(); ++r)
    all.emplace_back(buffer.data() + displacements[r], sizes[r]);
}

//===----------------------------------------------------------------------===//
// Initialisation
//===----------------------------------------------------------------------===//

void zbrt::initComm(int *argc, char ***argv) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised)
    return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  initialisedHere = true;
}

/// The words of lendingWindow (Lending.h), shared by the node's ranks.
static MPI_Win lendingWindow = MPI_WIN_NULL;
static MPI_Comm nodeComm = MPI_COMM_NULL;

/// Sets up the node's lending words over `comm`'s ranks on this node
/// (collective over `comm`, as its duplication is); with one rank on the
/// node, or without shared memory on one of its ranks, none of them lends.
static void setUpLending(MPI_Comm comm, int rank) {
  static_assert(std::atomic<int32_t>::is_always_lock_free,
                "the node's ranks share the words' atomics");
  if (nodeComm != MPI_COMM_NULL)
    return;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                          &nodeComm) != MPI_SUCCESS) {
    nodeComm = MPI_COMM_NULL;
    return;
  }
  int localRank = 0, localSize = 0;
  MPI_Comm_rank(nodeComm, &localRank);
  MPI_Comm_size(nodeComm, &localSize);
  if (localSize < 2) {
    MPI_Comm_free(&nodeComm);
    return;
  }
  // Rank 0 of the node holds every rank's word.
  void *mine = nullptr;
  MPI_Aint bytes = localRank == 0 ? localSize * sizeof(int32_t) : 0;
  int allocated =
      MPI_Win_allocate_shared(bytes, sizeof(int32_t), MPI_INFO_NULL, nodeComm,
                              &mine, &lendingWindow) == MPI_SUCCESS;
  int everywhere = 0;
  if (MPI_Allreduce(&allocated, &everywhere, 1, MPI_INT, MPI_MIN, nodeComm) !=
          MPI_SUCCESS ||
      !everywhere) {
    // A window only some ranks have cannot be freed together: MPI_Finalize
    // takes it.
    lendingWindow = MPI_WIN_NULL;
    return;
  }
  MPI_Aint size = 0;
  int unit = 0;
  void *words = nullptr;
  int found = MPI_Win_shared_query(lendingWindow, 0, &size, &unit, &words) ==
                  MPI_SUCCESS &&
              words && size >= MPI_Aint(localSize * sizeof(int32_t));
  if (found && localRank == 0)
    for (int r = 0; r < localSize; ++r)
      new (&static_cast<std::atomic<int32_t> *>(words)[r])
          std::atomic<int32_t>(0); // Busy.
  // Also the barrier after rank 0 wrote the words.
  int foundEverywhere = 0;
  if (MPI_Allreduce(&found, &foundEverywhere, 1, MPI_INT, MPI_MIN, nodeComm) !=
          MPI_SUCCESS ||
      !foundEverywhere) {
    MPI_Win_free(&lendingWindow);
    return;
  }
  setLendingWords(static_cast<std::atomic<int32_t> *>(words), localRank,
                  localSize);
}

void zbrt::finalizeComm() {
  if (mpiFinalized())
    return;
  if (lendingWindow != MPI_WIN_NULL) {
    setLendingWords(nullptr, 0, 0);
    MPI_Win_free(&lendingWindow);
  }
  if (nodeComm != MPI_COMM_NULL)
    MPI_Comm_free(&nodeComm);
  if (!initialisedHere)
    return;
  MPI_Finalize();
  initialisedHere = false;
}

std::unique_ptr<Comm> zbrt::createMPIComm(std::string &error) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised || mpiFinalized()) {
    error = "MPI is not initialised (call zbrt::initComm first)";
    return nullptr;
  }
  double timeout;
  if (!readTimeoutFromEnv(timeout, error))
    return nullptr;

  // Errors on the world communicator (MPI_Abort's) and on the duplicate
  // (which inherits the handler) return, so that they reach abort().
  int code = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm comm = MPI_COMM_NULL;
  if (code == MPI_SUCCESS)
    code = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int rank = 0, size = 0;
  if (code == MPI_SUCCESS)
    code = MPI_Comm_rank(comm, &rank);
  if (code == MPI_SUCCESS)
    code = MPI_Comm_size(comm, &size);
  if (code != MPI_SUCCESS) {
    error = "cannot set up the MPI communicator: " + mpiErrorString(code);
    return nullptr;
  }
  int tagUpperBound = 32767; // The least MPI guarantees.
  void *attribute = nullptr;
  int found = 0;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attribute, &found) ==
          MPI_SUCCESS &&
      found)
    tagUpperBound = *static_cast<int *>(attribute);

  setUpLending(comm, rank);
  auto result = std::make_unique<MPIComm>(comm, rank, size, tagUpperBound);
  result->setTimeoutSeconds(timeout);
  return result;
}
