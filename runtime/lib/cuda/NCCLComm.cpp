//===- NCCLComm.cpp - The NCCL communication backend ----------------------===//
//
// Part of ZeroBubble MLIR.
//
// Point-to-point transfers of device buffers over NCCL, overlapping the
// compute stream; everything on host memory through the wrapped host
// communicator (MPI). See zbrt/CUDA.h for the contract.
//
// Ordering: a send copies its buffer on the compute stream into a staging
// buffer (so that the caller may overwrite its buffer at once, as Comm
// promises), and the link's stream waits for that copy before ncclSend. A
// recv makes the link's stream wait for the compute stream (the buffer is
// free), receives, and makes the compute stream wait for the arrival. The
// host only waits in waitSends() (every step's end), which polls NCCL for
// errors and gives up after the timeout, aborting the communicators.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include "zbrt/CUDA.h"

#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace zbrt;
using namespace zbrt::cuda;

namespace {

/// One direction to one peer: a two-rank NCCL communicator (the sender is
/// its rank 0) and the stream its transfers run on.
struct Link {
  ncclComm_t comm = nullptr;
  CUstream stream = nullptr;
  /// Recorded on the compute stream before a transfer, and on the link's
  /// stream after a recv.
  CUevent ready = nullptr;
  CUevent done = nullptr;
};

class NCCLComm final : public Comm {
public:
  explicit NCCLComm(std::unique_ptr<Comm> host) : host(std::move(host)) {
    setTimeoutSeconds(this->host->timeoutSeconds());
  }
  ~NCCLComm() override;

  /// Creates the communicators and streams (collective over all ranks).
  bool initialize(std::string &error);
  /// Aborts the communicators created so far (after a failed initialize).
  void abandon();

  int rank() const override { return host->rank(); }
  int size() const override { return host->size(); }

  void send(const void *data, size_t bytes, int peer, int tag) override;
  void sendBuffer(std::vector<char> buffer, int peer, int tag) override {
    send(buffer.data(), buffer.size(), peer, tag);
  }
  void recv(void *data, size_t bytes, int peer, int tag) override;
  void waitSends() override;

  void barrier() override { host->barrier(); }
  void allreduceSum(double *values, size_t n) override {
    if (!allreduceOnDevice(values, n, ncclDouble, ncclSum))
      host->allreduceSum(values, n);
  }
  void allreduceSum(float *values, size_t n) override {
    if (!allreduceOnDevice(values, n, ncclFloat, ncclSum))
      host->allreduceSum(values, n);
  }
  void allreduceMax(double *values, size_t n) override {
    if (!allreduceOnDevice(values, n, ncclDouble, ncclMax))
      host->allreduceMax(values, n);
  }
  /// Group sums run on the host communicator; device buffers go through
  /// host copies.
  void startGroupSum(void *values, size_t n, SumElement element,
                     const std::vector<int> &group) override;
  void waitGroupSums() override;
  /// Host values: the host communicator's.
  void startAllgather(const double *mine, size_t n, double *all) override {
    host->startAllgather(mine, n, all);
  }
  void waitAllgather() override { host->waitAllgather(); }
  void broadcast(void *data, size_t bytes, int root) override;
  void gather(const std::string &mine, std::vector<std::string> &all,
              int root) override {
    host->gather(mine, all, root);
  }
  [[noreturn]] void abort(const std::string &message) override;

private:
  /// Ends the job unless `result` is ncclSuccess.
  void checkNCCL(ncclResult_t result, const char *what, ncclComm_t comm);
  void checkCUDA(CUresult result, const char *what) {
    if (result != CUDA_SUCCESS)
      abort(std::string(what) + " failed: " + describe(result));
  }
  /// The link for `peer`, after checking it is another rank.
  Link &link(std::vector<Link> &links, const char *what, int peer, int tag);
  /// Runs an all-reduce on the compute stream when `values` is device
  /// memory; returns false (doing nothing) for host memory.
  bool allreduceOnDevice(void *values, size_t n, ncclDataType_t type,
                         ncclRedOp_t op);
  /// Polls until `idle()` holds, checking NCCL's asynchronous errors and
  /// the timeout; `what` names the wait in the timeout message.
  template <typename Idle> void pollUntil(Idle idle, const char *what);
  /// Every communicator this rank holds.
  std::vector<ncclComm_t> communicators() const;

  /// A group sum of device memory: the host copy the host communicator
  /// sums, and where it goes back.
  struct StagedSum {
    void *device;
    std::vector<char> host;
  };

  std::unique_ptr<Comm> host;
  std::deque<StagedSum> stagedSums;
  ncclComm_t world = nullptr;
  std::vector<Link> sends, recvs; // indexed by peer
  bool aborting = false;
};

} // namespace

bool NCCLComm::initialize(std::string &error) {
  int n = size(), me = rank();
  if (n == 1)
    return true;
  // Rank 0 makes every unique id and broadcasts them (and whether it could)
  // over the host communicator: [0] the world, [1 + s*n + d] the link s->d.
  std::vector<ncclUniqueId> ids(1 + static_cast<size_t>(n) * n);
  int ok = 1;
  std::string rootError;
  if (me == 0) {
    for (ncclUniqueId &id : ids) {
      if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
        ok = 0;
        rootError =
            std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r);
        break;
      }
    }
  }
  host->broadcast(&ok, sizeof(ok), 0);
  if (!ok) {
    error = me == 0 ? rootError : "rank 0 could not create the NCCL unique ids";
    return false;
  }
  host->broadcast(ids.data(), ids.size() * sizeof(ncclUniqueId), 0);

  auto fail = [&](const char *what, ncclResult_t r) {
    error = std::string(what) + " failed: " + ncclGetErrorString(r);
    const char *last = ncclGetLastError(nullptr);
    if (last && *last)
      error += std::string(": ") + last;
    return false;
  };
  if (ncclResult_t r = ncclCommInitRank(&world, n, ids[0], me);
      r != ncclSuccess)
    return fail("ncclCommInitRank (all ranks)", r);
  // Every rank creates its links in one global order, so that the blocking
  // initialisations cannot wait on each other in a cycle.
  sends.resize(n);
  recvs.resize(n);
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d || (me != s && me != d))
        continue;
      Link &l = me == s ? sends[d] : recvs[s];
      const ncclUniqueId &id = ids[1 + static_cast<size_t>(s) * n + d];
      if (ncclResult_t r = ncclCommInitRank(&l.comm, 2, id, me == s ? 0 : 1);
          r != ncclSuccess)
        return fail("ncclCommInitRank (a link)", r);
      CUresult c = cuStreamCreate(&l.stream, CU_STREAM_NON_BLOCKING);
      if (c == CUDA_SUCCESS)
        c = cuEventCreate(&l.ready, CU_EVENT_DISABLE_TIMING);
      if (c == CUDA_SUCCESS)
        c = cuEventCreate(&l.done, CU_EVENT_DISABLE_TIMING);
      if (c != CUDA_SUCCESS) {
        error = "creating a communication stream failed: " + describe(c);
        return false;
      }
    }
  }
  return true;
}

void NCCLComm::abandon() {
  aborting = true;
  for (ncclComm_t comm : communicators())
    ncclCommAbort(comm);
}

NCCLComm::~NCCLComm() {
  if (aborting)
    return;
  for (std::vector<Link> *links : {&sends, &recvs}) {
    for (Link &l : *links) {
      if (l.stream)
        cuStreamSynchronize(l.stream);
      if (l.comm)
        ncclCommDestroy(l.comm);
      if (l.ready)
        cuEventDestroy(l.ready);
      if (l.done)
        cuEventDestroy(l.done);
      if (l.stream)
        cuStreamDestroy(l.stream);
    }
  }
  if (world)
    ncclCommDestroy(world);
}

std::vector<ncclComm_t> NCCLComm::communicators() const {
  std::vector<ncclComm_t> all;
  if (world)
    all.push_back(world);
  for (const std::vector<Link> *links : {&sends, &recvs})
    for (const Link &l : *links)
      if (l.comm)
        all.push_back(l.comm);
  return all;
}

void NCCLComm::abort(const std::string &message) {
  // Abort the communicators first: a kernel waiting for a peer that is gone
  // would otherwise keep the process from exiting.
  if (!aborting) {
    aborting = true;
    for (ncclComm_t comm : communicators())
      ncclCommAbort(comm);
  }
  host->abort(message);
  // Not reached: a virtual call hides abort()'s [[noreturn]] from GCC.
  std::_Exit(1);
}

void NCCLComm::checkNCCL(ncclResult_t result, const char *what,
                         ncclComm_t comm) {
  if (result == ncclSuccess || result == ncclInProgress)
    return;
  std::string message =
      std::string(what) + " failed: " + ncclGetErrorString(result);
  const char *last = ncclGetLastError(comm);
  if (last && *last)
    message += std::string(": ") + last;
  abort(message);
}

void NCCLComm::startGroupSum(void *values, size_t n, SumElement element,
                             const std::vector<int> &group) {
  if (!isDevicePointer(values)) {
    host->startGroupSum(values, n, element, group);
    return;
  }
  CUstream compute = requireDevice().compute;
  StagedSum &staged = stagedSums.emplace_back();
  staged.device = values;
  staged.host.resize(n * sumElementBytes(element));
  checkCUDA(cuMemcpyDtoHAsync(staged.host.data(),
                              reinterpret_cast<CUdeviceptr>(values),
                              staged.host.size(), compute),
            "cuMemcpyDtoHAsync");
  pollUntil([&] { return cuStreamQuery(compute) != CUDA_ERROR_NOT_READY; },
            "a device-to-host copy");
  host->startGroupSum(staged.host.data(), n, element, group);
}

void NCCLComm::waitGroupSums() {
  host->waitGroupSums();
  if (stagedSums.empty())
    return;
  CUstream compute = requireDevice().compute;
  for (StagedSum &staged : stagedSums)
    checkCUDA(cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(staged.device),
                                staged.host.data(), staged.host.size(),
                                compute),
              "cuMemcpyHtoDAsync");
  pollUntil([&] { return cuStreamQuery(compute) != CUDA_ERROR_NOT_READY; },
            "a host-to-device copy");
  stagedSums.clear();
}

Link &NCCLComm::link(std::vector<Link> &links, const char *what, int peer,
                     int tag) {
  checkPeerAndTag(what, peer, tag);
  if (peer == rank())
    abort(std::string(what) + " to itself (tag " + std::to_string(tag) + ")" +
          (size() == 1 ? ": a single-process run has no peer" : ""));
  return links[peer];
}

void NCCLComm::send(const void *data, size_t bytes, int peer, int tag) {
  Link &l = link(sends, "send", peer, tag);
  if (bytes == 0)
    return;
  CUstream compute = requireDevice().compute;
  CUdeviceptr staging = 0;
  checkCUDA(cuMemAllocAsync(&staging, bytes, compute), "cuMemAllocAsync");
  if (isDevicePointer(data)) {
    checkCUDA(cuMemcpyDtoDAsync(staging, reinterpret_cast<CUdeviceptr>(data),
                                bytes, compute),
              "cuMemcpyDtoDAsync");
  } else {
    // The caller may reuse a host buffer as soon as send returns.
    checkCUDA(cuMemcpyHtoDAsync(staging, data, bytes, compute),
              "cuMemcpyHtoDAsync");
    pollUntil([&] { return cuStreamQuery(compute) != CUDA_ERROR_NOT_READY; },
              "a host-to-device copy");
  }
  checkCUDA(cuEventRecord(l.ready, compute), "cuEventRecord");
  checkCUDA(cuStreamWaitEvent(l.stream, l.ready, 0), "cuStreamWaitEvent");
  checkNCCL(ncclSend(reinterpret_cast<void *>(staging), bytes, ncclUint8,
                     /*peer=*/1, l.comm, l.stream),
            "ncclSend", l.comm);
  checkCUDA(cuMemFreeAsync(staging, l.stream), "cuMemFreeAsync");
}

void NCCLComm::recv(void *data, size_t bytes, int peer, int tag) {
  Link &l = link(recvs, "recv", peer, tag);
  if (bytes == 0)
    return;
  CUstream compute = requireDevice().compute;
  bool onDevice = isDevicePointer(data);
  CUdeviceptr target = reinterpret_cast<CUdeviceptr>(data);
  if (!onDevice)
    checkCUDA(cuMemAllocAsync(&target, bytes, compute), "cuMemAllocAsync");
  // The buffer is free once the compute stream has reached this point.
  checkCUDA(cuEventRecord(l.ready, compute), "cuEventRecord");
  checkCUDA(cuStreamWaitEvent(l.stream, l.ready, 0), "cuStreamWaitEvent");
  checkNCCL(ncclRecv(reinterpret_cast<void *>(target), bytes, ncclUint8,
                     /*peer=*/0, l.comm, l.stream),
            "ncclRecv", l.comm);
  checkCUDA(cuEventRecord(l.done, l.stream), "cuEventRecord");
  checkCUDA(cuStreamWaitEvent(compute, l.done, 0), "cuStreamWaitEvent");
  if (onDevice)
    return;
  checkCUDA(cuMemcpyDtoHAsync(data, target, bytes, compute),
            "cuMemcpyDtoHAsync");
  checkCUDA(cuMemFreeAsync(target, compute), "cuMemFreeAsync");
  pollUntil([&] { return cuStreamQuery(compute) != CUDA_ERROR_NOT_READY; },
            ("a recv from rank " + std::to_string(peer)).c_str());
}

template <typename Idle> void NCCLComm::pollUntil(Idle idle, const char *what) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point start = Clock::now();
  std::string label = what;
  for (unsigned spins = 0;; ++spins) {
    if (idle())
      return;
    for (ncclComm_t comm : communicators()) {
      ncclResult_t state = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(comm, &state);
      checkNCCL(r, "ncclCommGetAsyncError", comm);
      checkNCCL(state, "an NCCL transfer", comm);
    }
    double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (timeoutSeconds() > 0 && waited > timeoutSeconds())
      abort("timed out after " + std::to_string(timeoutSeconds()) +
            " s waiting for " + label +
            " (a peer did not post the matching transfer; ZB_TIMEOUT_S "
            "sets the limit)");
    if (spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NCCLComm::waitSends() {
  if (size() == 1)
    return;
  CUstream compute = requireDevice().compute;
  // The compute stream too: it waits for the recvs, so a missing send shows
  // up here as a timeout rather than as a hang in a later copy.
  pollUntil(
      [&] {
        for (const Link &l : sends) {
          if (!l.stream)
            continue;
          CUresult r = cuStreamQuery(l.stream);
          if (r == CUDA_ERROR_NOT_READY)
            return false;
          checkCUDA(r, "a send");
        }
        CUresult r = cuStreamQuery(compute);
        if (r == CUDA_ERROR_NOT_READY)
          return false;
        checkCUDA(r, "the compute stream");
        return true;
      },
      "the transfers of this step");
}

bool NCCLComm::allreduceOnDevice(void *values, size_t n, ncclDataType_t type,
                                 ncclRedOp_t op) {
  if (!isDevicePointer(values))
    return false;
  if (size() == 1 || n == 0)
    return true;
  checkNCCL(ncclAllReduce(values, values, n, type, op, world,
                          requireDevice().compute),
            "ncclAllReduce", world);
  return true;
}

void NCCLComm::broadcast(void *data, size_t bytes, int root) {
  if (!isDevicePointer(data))
    return host->broadcast(data, bytes, root);
  if (root < 0 || root >= size())
    abort("broadcast from rank " + std::to_string(root) +
          ", which is not in "
          "[0, " +
          std::to_string(size()) + ")");
  if (size() == 1 || bytes == 0)
    return;
  checkNCCL(ncclBroadcast(data, data, bytes, ncclUint8, root, world,
                          requireDevice().compute),
            "ncclBroadcast", world);
}

namespace zbrt::cuda {
std::unique_ptr<Comm> createNCCLComm(std::unique_ptr<Comm> host,
                                     std::string &error) {
  if (!host) {
    error = "createNCCLComm: no host communicator";
    return nullptr;
  }
  if (!device().initialized) {
    error = "the NCCL backend needs an initialised GPU (call init first)";
    return nullptr;
  }
  auto comm = std::make_unique<NCCLComm>(std::move(host));
  if (!comm->initialize(error)) {
    comm->abandon();
    return nullptr;
  }
  return comm;
}
} // namespace zbrt::cuda
