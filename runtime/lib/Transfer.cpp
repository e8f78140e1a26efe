//===- Transfer.cpp - Point-to-point transfers of the C ABI ---------------===//
//
// Part of ZeroBubble MLIR.
//
// The send/recv entry points compiled rank programs call with memref
// descriptors. A contiguous descriptor goes straight to the communicator; a
// strided one is packed into (or unpacked from) a row-major buffer.
//
//===----------------------------------------------------------------------===//

#include "MemRefView.h"

#include "zbrt/Comm.h"
#include "zbrt/Trace.h"
#include "zbrt/zbrt.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

using namespace zbrt;

[[noreturn]] static void fail(const char *function, const std::string &what) {
  std::fflush(stdout);
  std::fprintf(stderr, "zb-run: error: %s: %s\n", function, what.c_str());
  std::fflush(stderr);
  std::exit(1);
}

static Comm &requireComm(const char *function) {
  Comm *comm = zbrt_get_comm();
  if (!comm)
    fail(function, "called before a communicator was set (zbrt_set_comm)");
  return *comm;
}

static View readView(const char *function, Comm &comm,
                     const zbrt_unranked_memref *memref, size_t elementSize) {
  if (!memref || !memref->descriptor)
    comm.abort(std::string(function) + ": null memref descriptor");
  if (memref->rank < 0 || memref->rank > 64)
    comm.abort(std::string(function) + ": memref rank " +
               std::to_string(memref->rank) + " is not valid");
  View view = viewOf(memref, elementSize);
  for (int64_t size : view.sizes)
    if (size < 0)
      comm.abort(std::string(function) + ": memref has a negative size");
  return view;
}

/// memref.copy: both views in row-major order, through a dense buffer only
/// when neither is contiguous.
extern "C" void memrefCopy(int64_t elemSize, zbrt_unranked_memref *src,
                           zbrt_unranked_memref *dst) {
  size_t size = static_cast<size_t>(elemSize);
  View from = viewOf(src, size), to = viewOf(dst, size);
  if (to.isContiguous()) {
    from.packInto(to.data);
    return;
  }
  if (from.isContiguous()) {
    to.unpackFrom(from.data);
    return;
  }
  std::vector<char> packed(from.numElements() * size);
  from.packInto(packed.data());
  to.unpackFrom(packed.data());
}

static void checkPeerAndChannel(const char *function, Comm &comm, int64_t peer,
                                int64_t channel) {
  if (peer < 0 || peer >= comm.size())
    comm.abort(std::string(function) + ": peer rank " + std::to_string(peer) +
               " is not in [0, " + std::to_string(comm.size()) + ")");
  if (channel < 0 || channel > INT_MAX)
    comm.abort(std::string(function) + ": channel " + std::to_string(channel) +
               " is not a valid tag");
}

static void sendMemRef(const char *function, zbrt_unranked_memref *memref,
                       size_t elementSize, int64_t peer, int64_t channel) {
  Comm &comm = requireComm(function);
  checkPeerAndChannel(function, comm, peer, channel);
  View view = readView(function, comm, memref, elementSize);
  size_t bytes = static_cast<size_t>(view.numElements()) * elementSize;
  if (view.isContiguous()) {
    comm.send(view.data, bytes, static_cast<int>(peer),
              static_cast<int>(channel));
    return;
  }
  std::vector<char> buffer(bytes);
  view.packInto(buffer.data());
  comm.sendBuffer(std::move(buffer), static_cast<int>(peer),
                  static_cast<int>(channel));
}

static void recvMemRef(const char *function, zbrt_unranked_memref *memref,
                       size_t elementSize, int64_t peer, int64_t channel) {
  Comm &comm = requireComm(function);
  checkPeerAndChannel(function, comm, peer, channel);
  View view = readView(function, comm, memref, elementSize);
  size_t bytes = static_cast<size_t>(view.numElements()) * elementSize;
  if (view.isContiguous()) {
    comm.recv(view.data, bytes, static_cast<int>(peer),
              static_cast<int>(channel));
    return;
  }
  std::vector<char> buffer(bytes);
  comm.recv(buffer.data(), bytes, static_cast<int>(peer),
            static_cast<int>(channel));
  view.unpackFrom(buffer.data());
}

#define ZBRT_DEFINE_TRANSFER(SUFFIX, TYPE)                                     \
  void _mlir_ciface_zbrt_send_##SUFFIX(zbrt_unranked_memref *buf,              \
                                       int64_t peer, int64_t channel) {        \
    sendMemRef("zbrt_send_" #SUFFIX, buf, sizeof(TYPE), peer, channel);        \
  }                                                                            \
  void _mlir_ciface_zbrt_recv_##SUFFIX(zbrt_unranked_memref *buf,              \
                                       int64_t peer, int64_t channel) {        \
    recvMemRef("zbrt_recv_" #SUFFIX, buf, sizeof(TYPE), peer, channel);        \
  }

ZBRT_DEFINE_TRANSFER(f32, float)
ZBRT_DEFINE_TRANSFER(f64, double)
ZBRT_DEFINE_TRANSFER(i32, int32_t)
// Booleans: memrefs of i1 hold one byte per element.
ZBRT_DEFINE_TRANSFER(i1, uint8_t)
ZBRT_DEFINE_TRANSFER(i64, int64_t)

#undef ZBRT_DEFINE_TRANSFER

/// The contiguous buffer of `element`s and the group of ranks of a group
/// sum.
static std::pair<View, std::vector<int>>
readGroupSum(const char *function, Comm &comm, zbrt_unranked_memref *buf,
             SumElement element, zbrt_unranked_memref *group) {
  View view = readView(function, comm, buf, sumElementBytes(element));
  View members = readView(function, comm, group, sizeof(int64_t));
  if (!view.isContiguous() || !members.isContiguous() ||
      members.sizes.size() != 1)
    comm.abort(std::string(function) +
               ": expected a contiguous buffer and a 1-d group of ranks");
  std::vector<int> ranks;
  const int64_t *first = reinterpret_cast<const int64_t *>(members.data);
  for (int64_t i = 0; i < members.sizes[0]; ++i) {
    if (first[i] < 0 || first[i] > INT_MAX)
      comm.abort(std::string(function) + ": rank " + std::to_string(first[i]) +
                 " is not valid");
    ranks.push_back(static_cast<int>(first[i]));
  }
  return {view, ranks};
}

static void groupSum(const char *function, zbrt_unranked_memref *buf,
                     SumElement element, zbrt_unranked_memref *group) {
  Comm &comm = requireComm(function);
  auto [view, ranks] = readGroupSum(function, comm, buf, element, group);
  comm.startGroupSum(view.data, static_cast<size_t>(view.numElements()),
                     element, ranks);
}

/// A replica mean started this step: divided by the number of replicas once
/// its sum completes.
struct PendingMean {
  void *values;
  size_t count;
  SumElement element;
};

/// The replicas of zbrt_set_replicas(), and the replica means started this
/// step.
static Comm *replicaWorld = nullptr;
static int numReplicas = 1;
static std::vector<PendingMean> pendingMeans;

void zbrt_set_replicas(Comm *world, int replicas) {
  replicaWorld = replicas > 1 ? world : nullptr;
  numReplicas = replicaWorld ? replicas : 1;
  pendingMeans.clear();
}

static void replicaMean(const char *function, zbrt_unranked_memref *buf,
                        SumElement element, zbrt_unranked_memref *group) {
  Comm &comm = requireComm(function);
  auto [view, ranks] = readGroupSum(function, comm, buf, element, group);
  auto count = static_cast<size_t>(view.numElements());
  if (!replicaWorld) {
    comm.startGroupSum(view.data, count, element, ranks);
    return;
  }
  int pipeline = comm.size();
  if (replicaWorld->size() != numReplicas * pipeline ||
      replicaWorld->rank() % pipeline != comm.rank())
    comm.abort(std::string(function) + ": world rank " +
               std::to_string(replicaWorld->rank()) + " of " +
               std::to_string(replicaWorld->size()) + " is not rank " +
               std::to_string(comm.rank()) + " of one of " +
               std::to_string(numReplicas) + " replicas of " +
               std::to_string(pipeline) + " ranks");
  std::vector<int> world;
  for (int r = 0; r < numReplicas; ++r)
    for (int member : ranks) {
      if (member < 0 || member >= pipeline)
        comm.abort(std::string(function) + ": rank " + std::to_string(member) +
                   " is not in [0, " + std::to_string(pipeline) + ")");
      world.push_back(r * pipeline + member);
    }
  replicaWorld->startGroupSum(view.data, count, element, world);
  pendingMeans.push_back({view.data, count, element});
}

#define ZBRT_DEFINE_GROUP_SUM(SUFFIX, ELEMENT)                                 \
  void _mlir_ciface_zbrt_group_sum_##SUFFIX(zbrt_unranked_memref *buf,         \
                                            zbrt_unranked_memref *group) {     \
    groupSum("zbrt_group_sum_" #SUFFIX, buf, ELEMENT, group);                  \
  }                                                                            \
  void _mlir_ciface_zbrt_replica_mean_##SUFFIX(zbrt_unranked_memref *buf,      \
                                               zbrt_unranked_memref *group) {  \
    replicaMean("zbrt_replica_mean_" #SUFFIX, buf, ELEMENT, group);            \
  }

ZBRT_DEFINE_GROUP_SUM(f32, SumElement::F32)
ZBRT_DEFINE_GROUP_SUM(f64, SumElement::F64)

#undef ZBRT_DEFINE_GROUP_SUM

/// Divides `n` values at `values` by `divisor`.
template <typename T> static void divide(void *values, size_t n, T divisor) {
  T *first = static_cast<T *>(values);
  for (size_t i = 0; i < n; ++i)
    first[i] /= divisor;
}

void zbrt_wait_group_sums(void) {
  double start = traceClock();
  if (Comm *comm = zbrt_get_comm())
    comm->waitGroupSums();
  if (replicaWorld) {
    replicaWorld->waitGroupSums();
    for (const PendingMean &mean : pendingMeans) {
      if (mean.element == SumElement::F64)
        divide(mean.values, mean.count, static_cast<double>(numReplicas));
      else
        divide(mean.values, mean.count, static_cast<float>(numReplicas));
    }
    pendingMeans.clear();
  }
  addReductionWaitSeconds(traceClock() - start);
}

void zbrt_step_end(void) {
  if (Comm *comm = zbrt_get_comm())
    comm->waitSends();
}
