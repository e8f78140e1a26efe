//===- Comm.h - Communication between ranks ---------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// One interface for talking to the other ranks of a pipeline-parallel run,
// with an MPI backend (one process per rank, launched by mpirun) and a
// single-process backend (rank 0 of 1, the reference run).
//
// Failure behaviour: no operation hangs silently. Every MPI error, and every
// wait that outlasts the timeout (env ZB_TIMEOUT_S, default 300 s), ends the
// whole job through abort(), which prints
//   zb-run: error: rank R: <message>
// on stderr and calls MPI_Abort (or exits with status 1 without MPI).
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_COMM_H
#define ZBRT_COMM_H

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace zbrt {

/// The default for timeoutSeconds() when ZB_TIMEOUT_S is not set.
constexpr double kDefaultTimeoutSeconds = 300.0;

/// Reads ZB_TIMEOUT_S: unset gives kDefaultTimeoutSeconds; 0, "inf" and
/// times past the clock's range disable the timeout. On a value that is not a
/// non-negative number returns false and sets `error`.
bool readTimeoutFromEnv(double &seconds, std::string &error);

/// The element types group sums add: the gradients of f32 and of f64
/// parameters.
enum class SumElement { F32, F64 };

/// The bytes one element of `element` takes.
inline size_t sumElementBytes(SumElement element) {
  return element == SumElement::F64 ? sizeof(double) : sizeof(float);
}

/// A communicator over `size()` ranks. Not thread-safe: call it from one
/// thread per process.
class Comm {
public:
  virtual ~Comm();

  /// This process's rank in [0, size()).
  virtual int rank() const = 0;
  /// The number of ranks.
  virtual int size() const = 0;

  /// Sends `bytes` bytes at `data` to `peer` with `tag`, without blocking:
  /// the data is copied, so the caller may reuse its buffer at once.
  /// Completion is awaited by waitSends(). Messages from one rank to another
  /// with the same tag arrive in the order they were sent. The default
  /// copies into a host buffer for sendBuffer(); a backend that takes device
  /// memory overrides it.
  virtual void send(const void *data, size_t bytes, int peer, int tag);
  /// Like send(), taking ownership of `buffer` instead of copying it.
  virtual void sendBuffer(std::vector<char> buffer, int peer, int tag) = 0;
  /// Receives exactly `bytes` bytes from `peer` with `tag` into `data`,
  /// blocking until they arrive. A message of another size, or no message
  /// within the timeout, aborts.
  virtual void recv(void *data, size_t bytes, int peer, int tag) = 0;
  /// Waits until every send posted so far has completed.
  virtual void waitSends() = 0;

  /// Waits until every rank has reached the barrier.
  virtual void barrier() = 0;
  /// Replaces `values[0, n)` on every rank by their sum over all ranks.
  virtual void allreduceSum(double *values, size_t n) = 0;
  virtual void allreduceSum(float *values, size_t n) = 0;
  /// Replaces `values[0, n)` on every rank by their maximum over all ranks.
  virtual void allreduceMax(double *values, size_t n) = 0;
  /// Starts replacing `values[0, n)` on every rank of `group` (distinct
  /// ranks in increasing order, this rank among them) by their sum over the
  /// group, without blocking; the buffer must stay untouched until
  /// waitGroupSums(). Every rank of the group starts the same sums in the
  /// same order. The result is bitwise the same on every rank of the group.
  /// Group sums are what keep the copies of a shared parameter equal.
  /// `values` holds `n` elements of `element`.
  virtual void startGroupSum(void *values, size_t n, SumElement element,
                             const std::vector<int> &group);
  /// Completes every group sum started so far.
  virtual void waitGroupSums() {}

  /// Starts gathering `n` values from every rank, without blocking: after
  /// waitAllgather(), `all[r * n + i]` is rank r's `mine[i]` on every rank
  /// (`all` holds size() * n values; neither buffer may be touched before).
  /// A sum each rank then forms in rank order is bitwise the same
  /// everywhere, which an allreduce does not promise. The default completes
  /// at once through gather() and broadcast().
  virtual void startAllgather(const double *mine, size_t n, double *all);
  /// Completes the gather startAllgather() started.
  virtual void waitAllgather() {}

  /// Splits this communicator (collective over every rank): the ranks that
  /// pass the same `color` form one new communicator, numbered by `key`
  /// (ties by rank here). On failure returns null and sets `error`. The
  /// default supports only the trivial split of a one-rank communicator.
  virtual std::unique_ptr<Comm> split(int color, int key, std::string &error);

  /// Copies `bytes` bytes at `data` from rank `root` to every rank.
  virtual void broadcast(void *data, size_t bytes, int root) = 0;
  /// Collects one byte string per rank on `root`: there `all[r]` is rank r's
  /// `mine`; on other ranks `all` is cleared. Strings may differ in length.
  virtual void gather(const std::string &mine, std::vector<std::string> &all,
                      int root) = 0;

  /// Prints "zb-run: error: rank R: <message>" on stderr and ends the whole
  /// job (every rank) with a non-zero exit status.
  [[noreturn]] virtual void abort(const std::string &message) = 0;
  /// Ends the job for an error every rank meets alike (a bad flag, a model
  /// the pipeline rejects): rank 0 reports it through abort(); the others
  /// stay silent and wait for that abort, so the message is printed once.
  /// A rank still alive after the timeout (at most 30 s; rank 0 did not
  /// fail) aborts with the message itself.
  [[noreturn]] void abortAll(const std::string &message);

  /// Seconds a blocking operation may wait before it aborts; 0: forever.
  double timeoutSeconds() const { return timeout; }
  void setTimeoutSeconds(double seconds) { timeout = seconds; }

protected:
  Comm();
  /// Aborts unless `peer` is a rank and `tag` is non-negative; `what` names
  /// the operation ("send", "recv").
  void checkPeerAndTag(const char *what, int peer, int tag);
  /// Aborts unless `group` lists distinct ranks in increasing order, this
  /// rank among them.
  void checkGroup(const std::vector<int> &group);

private:
  double timeout = kDefaultTimeoutSeconds;
};

/// The single-process communicator: rank 0 of 1. Collectives are the
/// identity; a send or recv (there is no peer) aborts.
std::unique_ptr<Comm> createLocalComm();

/// Initialises MPI (MPI_Init_thread, funneled). Call once, early in main,
/// before createMPIComm(); does nothing when MPI is already initialised.
void initComm(int *argc, char ***argv);
/// Finalises MPI if initComm() initialised it. Destroy every MPI
/// communicator first.
void finalizeComm();
/// A communicator over all processes of the MPI job (a duplicate of
/// MPI_COMM_WORLD with MPI_ERRORS_RETURN, so that errors reach abort()).
/// The timeout comes from ZB_TIMEOUT_S. On failure returns null and sets
/// `error`.
std::unique_ptr<Comm> createMPIComm(std::string &error);

} // namespace zbrt

/// Sets the communicator the C ABI (zbrt_send_f32, ..., zbrt_step_end) uses;
/// null unsets it. The caller keeps ownership.
void zbrt_set_comm(zbrt::Comm *comm);
/// The communicator set by zbrt_set_comm(), or null.
zbrt::Comm *zbrt_get_comm();
/// Data parallelism for the C ABI: `world` runs `replicas` copies of the
/// pipeline whose communicator zbrt_set_comm() set, rank p of replica r
/// being rank r * P + p of `world` (P the pipeline's size); the replica
/// means of compiled code (zbrt_replica_mean_f32, _f64) reduce over it. Null
/// (or one replica): a replica mean is the pipeline's group sum. The caller
/// keeps ownership.
void zbrt_set_replicas(zbrt::Comm *world, int replicas);

#endif // ZBRT_COMM_H
