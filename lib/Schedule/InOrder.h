//===- InOrder.h - Evaluate side by side, consume in order -------*- C++
//-*-===//
//
// Part of ZeroBubble MLIR.
//
// Internal to lib/Schedule: zb-auto's candidates and the V greedy's
// variants are evaluated on several threads and compared in their own
// order, so that the result is the one-after-another search's.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_LIB_INORDER_H
#define ZB_SCHEDULE_LIB_INORDER_H

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace zb::schedule::detail {

/// Runs `evaluate(i)` (returning a T) for i in [0, n) on up to
/// `maxWorkers` threads (at most the hardware's), each taking the next
/// index as it finishes one, and hands each result to `consume(result)` in
/// index order as soon as every earlier one is in. `evaluate` must only
/// read shared state; `consume` runs under a lock. A worker does not run
/// more than one index per worker ahead of the next result to consume, so
/// few results wait (each may be a schedule of hundreds of MB).
template <typename T, typename Evaluate, typename Consume>
void evaluateInOrder(std::size_t n, unsigned maxWorkers, Evaluate evaluate,
                     Consume consume) {
  unsigned workers =
      std::clamp(std::thread::hardware_concurrency(), 1u, maxWorkers);
  std::vector<T> results(n);
  std::vector<char> done(n, 0);
  std::size_t nextToRun = 0, nextToConsume = 0;
  std::mutex mutex;
  std::condition_variable consumed;
  auto work = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      consumed.wait(lock, [&] {
        return nextToRun >= n || nextToRun < nextToConsume + workers;
      });
      if (nextToRun >= n)
        return;
      std::size_t i = nextToRun++;
      lock.unlock();
      T result = evaluate(i);
      lock.lock();
      results[i] = std::move(result);
      done[i] = 1;
      while (nextToConsume < n && done[nextToConsume]) {
        consume(results[nextToConsume]);
        results[nextToConsume] = T();
        ++nextToConsume;
      }
      consumed.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < workers; ++i)
    threads.emplace_back(work);
  work();
  for (std::thread &t : threads)
    t.join();
}

} // namespace zb::schedule::detail

#endif // ZB_SCHEDULE_LIB_INORDER_H
