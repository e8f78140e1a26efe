//===- Comm.cpp - Communication between ranks -----------------------------===//
//
// Part of ZeroBubble MLIR.
//
// The parts of the interface shared by every backend, the single-process
// backend, and the process-global communicator of the C ABI.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Comm.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

using namespace zbrt;

bool zbrt::readTimeoutFromEnv(double &seconds, std::string &error) {
  seconds = kDefaultTimeoutSeconds;
  const char *text = std::getenv("ZB_TIMEOUT_S");
  if (!text || !*text)
    return true;
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(text, &end);
  // A time past double's range reads as infinity (no timeout, as "inf"),
  // one below it as 0 (likewise).
  bool outOfRange = errno == ERANGE;
  if ((errno && !outOfRange) || end == text || *end || std::isnan(value) ||
      value < 0) {
    error = "ZB_TIMEOUT_S must be a non-negative number of seconds (0 or "
            "inf: no timeout), got '" +
            std::string(text) + "'";
    return false;
  }
  seconds = value;
  return true;
}

Comm::Comm() = default;
Comm::~Comm() = default;

void Comm::send(const void *data, size_t bytes, int peer, int tag) {
  const char *begin = static_cast<const char *>(data);
  sendBuffer(std::vector<char>(begin, begin + bytes), peer, tag);
}

void Comm::checkPeerAndTag(const char *what, int peer, int tag) {
  if (peer < 0 || peer >= size())
    abort(std::string(what) + " with peer rank " + std::to_string(peer) +
          ", which is not in [0, " + std::to_string(size()) + ")");
  if (tag < 0)
    abort(std::string(what) + " with negative tag " + std::to_string(tag));
}

void Comm::checkGroup(const std::vector<int> &group) {
  bool sorted = !group.empty();
  bool mine = false;
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] < 0 || group[i] >= size() || (i && group[i] <= group[i - 1]))
      sorted = false;
    mine |= group[i] == rank();
  }
  if (!sorted || !mine) {
    std::string members;
    for (int r : group)
      members += (members.empty() ? "" : ", ") + std::to_string(r);
    abort("group sum over ranks [" + members + "]: a group lists distinct " +
          "ranks of [0, " + std::to_string(size()) +
          ") in increasing order, this rank among them");
  }
}

void Comm::startGroupSum(void *, size_t, SumElement,
                         const std::vector<int> &group) {
  checkGroup(group);
  if (group.size() > 1)
    abort("group sums over several ranks are not supported by this "
          "communicator");
}

void Comm::abortAll(const std::string &message) {
  if (rank() != 0) {
    // Rank 0 fails within moments; never wait longer than half a minute.
    double wait =
        timeoutSeconds() > 0 ? std::min(timeoutSeconds(), 30.0) : 30.0;
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
  abort(message);
  // Not reached: a virtual call hides abort()'s [[noreturn]] from GCC.
  std::_Exit(1);
}

std::unique_ptr<Comm> Comm::split(int, int, std::string &error) {
  error = "this communicator cannot be split";
  return nullptr;
}

void Comm::startAllgather(const double *mine, size_t n, double *all) {
  std::string bytes(reinterpret_cast<const char *>(mine), n * sizeof(double));
  std::vector<std::string> parts;
  gather(bytes, parts, 0);
  if (rank() == 0)
    for (int r = 0; r < size(); ++r) {
      if (parts[r].size() != bytes.size())
        abort("allgather: rank " + std::to_string(r) + " sent " +
              std::to_string(parts[r].size()) + " bytes, expected " +
              std::to_string(bytes.size()));
      std::memcpy(all + r * n, parts[r].data(), bytes.size());
    }
  broadcast(all, size() * n * sizeof(double), 0);
}

//===----------------------------------------------------------------------===//
// The single-process backend
//===----------------------------------------------------------------------===//

namespace {

class LocalComm final : public Comm {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }

  void sendBuffer(std::vector<char>, int peer, int tag) override {
    checkPeerAndTag("send", peer, tag);
    abort("send to itself (tag " + std::to_string(tag) +
          "): a single-process run has no peer");
  }
  void recv(void *, size_t, int peer, int tag) override {
    checkPeerAndTag("recv", peer, tag);
    abort("recv from itself (tag " + std::to_string(tag) +
          "): a single-process run has no peer");
  }
  void waitSends() override {}
  void barrier() override {}
  void allreduceSum(double *, size_t) override {}
  void allreduceSum(float *, size_t) override {}
  void allreduceMax(double *, size_t) override {}
  std::unique_ptr<Comm> split(int, int, std::string &) override {
    auto comm = std::make_unique<LocalComm>();
    comm->setTimeoutSeconds(timeoutSeconds());
    return comm;
  }
  void broadcast(void *, size_t, int root) override {
    if (root != 0)
      abort("broadcast from rank " + std::to_string(root) +
            ", which is not in [0, 1)");
  }
  void gather(const std::string &mine, std::vector<std::string> &all,
              int root) override {
    if (root != 0)
      abort("gather to rank " + std::to_string(root) +
            ", which is not in [0, 1)");
    all.assign(1, mine);
  }

  [[noreturn]] void abort(const std::string &message) override {
    std::fflush(stdout);
    std::fprintf(stderr, "zb-run: error: rank 0: %s\n", message.c_str());
    std::fflush(stderr);
    std::exit(1);
  }
};

} // namespace

std::unique_ptr<Comm> zbrt::createLocalComm() {
  auto comm = std::make_unique<LocalComm>();
  std::string error;
  double seconds;
  if (readTimeoutFromEnv(seconds, error))
    comm->setTimeoutSeconds(seconds);
  return comm;
}

//===----------------------------------------------------------------------===//
// The communicator of the C ABI
//===----------------------------------------------------------------------===//

static Comm *currentComm = nullptr;

void zbrt_set_comm(Comm *comm) { currentComm = comm; }

Comm *zbrt_get_comm() { return currentComm; }
