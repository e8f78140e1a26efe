//===- Lending.h - A waiting rank's core lent to its peers ------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//
//
// Ranks of one node that share its cores: while a rank waits for a message
// (a pipeline bubble, a slower stage), its core would idle. It offers the
// core instead (IdleWait), and a peer with a large product in hand borrows
// it: the product's row blocks or batch items are shared between the
// borrower's thread and one helper thread, which the idle core then runs
// while the lender sleeps between its tests (shareWork). Each block is
// computed whole by one thread, and a row of C sums its terms alike in any
// block of rows, so no bit changes. A rank computes on two threads only
// while a peer waits (and, once the peer takes its core back, until the
// helper ends its block).
//
// The state is one 32-bit word per node-local rank in memory the node's
// ranks share (MPIComm sets it up: MPI_Win_allocate_shared): 0 busy, 1 idle
// and offered, 2 + r lent to local rank r. A single process, or a run with
// ZB_LEND_CORES=0, never lends.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_LENDING_H
#define ZBRT_LENDING_H

#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

namespace zbrt {

/// Installs the node's words (`localSize` of them, this rank's at
/// `localRank`); null stops lending. Words start at 0.
void setLendingWords(std::atomic<int32_t> *words, int localRank, int localSize);

/// An empty string when ZB_LEND_CORES (unset, 0 or 1) and
/// ZB_LEND_MIN_MACS (unset or a non-negative integer: the smallest product,
/// in multiply-adds, that borrows a core; 2^23 when unset) are valid, else
/// what is wrong with them.
std::string lendingProblem();

/// Whether this rank may offer and borrow cores: words installed, more
/// than one rank on the node, ZB_LEND_CORES not 0.
bool lendingEnabled();

/// What this process's shareWork calls did with borrowed cores.
struct LendingCounts {
  /// Calls that borrowed a core, their items, and the items the helper
  /// thread (the borrowed core) ran.
  int64_t shared = 0, items = 0, helperItems = 0;
};

/// The counts since the previous call (or the process's start), which then
/// start again from zero.
LendingCounts takeLendingCounts();

/// A wait's offer of this rank's core: offer() makes it lendable (again, if
/// it was withdrawn), the destructor withdraws it. While lent() the waiting
/// thread should sleep rather than spin or yield.
class IdleWait {
public:
  IdleWait() = default;
  IdleWait(const IdleWait &) = delete;
  IdleWait &operator=(const IdleWait &) = delete;
  ~IdleWait();
  void offer();
  bool lent() const;

private:
  /// This rank's word once offered.
  std::atomic<int32_t> *word = nullptr;
};

/// When the work is of `macs` multiply-adds or more (ZB_LEND_MIN_MACS) and
/// a node-local rank offers its core, borrows it and runs work(i) for every
/// i in [0, count) on this thread and a helper thread that takes items in
/// turn until the lender withdraws, and returns true; else runs nothing and
/// returns false (the caller computes the whole in one call, as without
/// lending). work must be safe to run on two threads for different items.
/// Inside work, with count < 2, or while another thread of the process has
/// the helper thread, nothing is borrowed.
bool shareWork(int64_t count, int64_t macs, void (*work)(void *, int64_t),
               void *context);

template <typename Fn> bool shareWork(int64_t count, int64_t macs, Fn &&work) {
  using Callable = std::remove_reference_t<Fn>;
  return shareWork(
      count, macs,
      [](void *context, int64_t i) { (*static_cast<Callable *>(context))(i); },
      const_cast<void *>(static_cast<const void *>(&work)));
}

} // namespace zbrt

#endif // ZBRT_LENDING_H
