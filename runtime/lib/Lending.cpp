//===- Lending.cpp - A waiting rank's core lent to its node's peers -------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Lending.h"

#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

using namespace zbrt;

namespace {

/// A word's states: its rank computes, waits offering its core, or has
/// lent it to node-local rank r (kLentTo + r).
constexpr int32_t kBusy = 0, kIdle = 1, kLentTo = 2;

struct Words {
  std::atomic<int32_t> *words = nullptr;
  int localRank = 0, localSize = 0;
};

Words &nodeWords() {
  static Words words;
  return words;
}

/// takeLendingCounts's counts.
std::atomic<int64_t> sharedCount{0}, itemCount{0}, helperItemCount{0};

/// Set on the helper thread, and on a thread inside shareWork.
thread_local bool insideShare = false;

/// Parses ZB_LEND_CORES and ZB_LEND_MIN_MACS; `problem` says what is wrong.
struct Settings {
  bool enabled = true;
  int64_t minMacs = int64_t(1) << 23;
  std::string problem;
};

const Settings &settings() {
  static const Settings parsed = [] {
    Settings s;
    if (const char *text = std::getenv("ZB_LEND_CORES"); text && *text) {
      std::string value = text;
      if (value == "0")
        s.enabled = false;
      else if (value != "1")
        s.problem = "ZB_LEND_CORES must be 0 or 1, got '" + value + "'";
    }
    if (const char *text = std::getenv("ZB_LEND_MIN_MACS"); text && *text) {
      char *end = nullptr;
      errno = 0;
      long long value = std::strtoll(text, &end, 10);
      if (*end != '\0' || errno == ERANGE || value < 0 ||
          !std::isdigit(static_cast<unsigned char>(text[0])))
        s.problem = "ZB_LEND_MIN_MACS must be a non-negative integer, got '" +
                    std::string(text) + "'";
      else
        s.minMacs = value;
    }
    return s;
  }();
  return parsed;
}

/// One helper thread per process, started on the first borrowed core. It
/// runs a shared task's items while its lender keeps the core lent.
class Helper {
public:
  static Helper &get() {
    // Never destroyed: the thread blocks between tasks until the process
    // ends.
    static Helper *helper = new Helper;
    return *helper;
  }

  /// Offers `work`'s items (taken through `next`, up to `count`) to the
  /// helper thread while `*word` says `lentTo`.
  void start(void (*work)(void *, int64_t), void *context,
             std::atomic<int64_t> &next, int64_t count,
             std::atomic<int32_t> *word, int32_t lentTo) {
    std::lock_guard<std::mutex> lock(mutex);
    task = {work, context, &next, count, word, lentTo};
    ++generation;
    phase.store(state(generation, kPending), std::memory_order_release);
    wake.notify_one();
  }

  /// Returns once the helper thread has left the task: at once when it has
  /// not begun it, which it then never does.
  void finish() {
    uint64_t expected = state(generation, kPending);
    uint64_t finished = state(generation, kFinished);
    if (phase.compare_exchange_strong(expected, finished,
                                      std::memory_order_acq_rel))
      return;
    for (int spins = 0; phase.load(std::memory_order_acquire) != finished;
         ++spins)
      if (spins > 100)
        std::this_thread::yield();
  }

private:
  /// A task's phase, tagged with its generation: a helper that wakes late
  /// holding an earlier task finds that task's phase gone and leaves it.
  static constexpr uint64_t kPending = 0, kRunning = 1, kFinished = 2;
  static uint64_t state(uint64_t generation, uint64_t phase) {
    return generation * 4 + phase;
  }

  struct Task {
    void (*work)(void *, int64_t) = nullptr;
    void *context = nullptr;
    std::atomic<int64_t> *next = nullptr;
    int64_t count = 0;
    std::atomic<int32_t> *word = nullptr;
    int32_t lentTo = 0;
  };

  Helper() {
    std::thread([this] { loop(); }).detach();
  }

  void loop() {
    insideShare = true;
    uint64_t seen = 0;
    while (true) {
      Task mine;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return generation != seen; });
        seen = generation;
        mine = task;
      }
      uint64_t expected = state(seen, kPending);
      if (!phase.compare_exchange_strong(expected, state(seen, kRunning),
                                         std::memory_order_acq_rel))
        continue; // The lender finished the task alone.
      while (mine.word->load(std::memory_order_acquire) == mine.lentTo) {
        int64_t i = mine.next->fetch_add(1, std::memory_order_relaxed);
        if (i >= mine.count)
          break;
        mine.work(mine.context, i);
        helperItemCount.fetch_add(1, std::memory_order_relaxed);
      }
      phase.store(state(seen, kFinished), std::memory_order_release);
    }
  }

  std::mutex mutex;
  std::condition_variable wake;
  Task task;
  /// Changed by the one thread that has the helper (shareWork), under the
  /// mutex.
  uint64_t generation = 0;
  std::atomic<uint64_t> phase{state(0, kFinished)};
};

/// A node-local peer's offered core, now lent to this rank; null when none
/// is offered.
std::atomic<int32_t> *borrowCore() {
  Words &node = nodeWords();
  for (int step = 1; step < node.localSize; ++step) {
    int peer = (node.localRank + step) % node.localSize;
    int32_t expected = kIdle;
    if (node.words[peer].compare_exchange_strong(
            expected, kLentTo + node.localRank, std::memory_order_acq_rel))
      return &node.words[peer];
  }
  return nullptr;
}

} // namespace

void zbrt::setLendingWords(std::atomic<int32_t> *words, int localRank,
                           int localSize) {
  Words &node = nodeWords();
  node.words = words;
  node.localRank = localRank;
  node.localSize = words ? localSize : 0;
}

std::string zbrt::lendingProblem() { return settings().problem; }

bool zbrt::lendingEnabled() {
  const Words &node = nodeWords();
  return node.words && node.localSize > 1 && settings().enabled &&
         settings().problem.empty();
}

LendingCounts zbrt::takeLendingCounts() {
  LendingCounts counts;
  counts.shared = sharedCount.exchange(0);
  counts.items = itemCount.exchange(0);
  counts.helperItems = helperItemCount.exchange(0);
  return counts;
}

IdleWait::~IdleWait() {
  if (word)
    word->store(kBusy, std::memory_order_release);
}

void IdleWait::offer() {
  if (word || !lendingEnabled())
    return;
  word = &nodeWords().words[nodeWords().localRank];
  word->store(kIdle, std::memory_order_release);
}

bool IdleWait::lent() const {
  return word && word->load(std::memory_order_relaxed) >= kLentTo;
}

bool zbrt::shareWork(int64_t count, int64_t macs, void (*work)(void *, int64_t),
                     void *context) {
  // One product of the process at a time has the helper thread.
  static std::atomic<bool> helperTaken{false};
  if (count < 2 || insideShare || !lendingEnabled() ||
      macs < settings().minMacs ||
      helperTaken.exchange(true, std::memory_order_acquire))
    return false;
  std::atomic<int32_t> *word = borrowCore();
  if (!word) {
    helperTaken.store(false, std::memory_order_release);
    return false;
  }
  int32_t lentTo = kLentTo + nodeWords().localRank;
  insideShare = true;
  std::atomic<int64_t> next{0};
  Helper &helper = Helper::get();
  helper.start(work, context, next, count, word, lentTo);
  while (true) {
    int64_t i = next.fetch_add(1, std::memory_order_relaxed);
    if (i >= count)
      break;
    work(context, i);
  }
  helper.finish();
  // Handed back: still offered unless its rank withdrew it meanwhile.
  word->compare_exchange_strong(lentTo, kIdle, std::memory_order_acq_rel);
  helperTaken.store(false, std::memory_order_release);
  insideShare = false;
  sharedCount.fetch_add(1, std::memory_order_relaxed);
  itemCount.fetch_add(count, std::memory_order_relaxed);
  return true;
}
