//===- Trace.cpp - Action records and the compiled code's allocator -------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Trace.h"
#include "zbrt/zbrt.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

using namespace zbrt;

namespace {
std::mutex recordsMutex;
std::vector<ActionRecord> records;
/// The action begun and not yet ended.
ActionRecord open;
std::atomic<int64_t> live{0};
std::atomic<int64_t> peak{0};

/// Every block starts with a header this large, just before the pointer the
/// compiled code gets: [offset to the block's start, size].
constexpr uint64_t kHeader = 16;

void *track(char *block, uint64_t offset, uint64_t size) {
  if (!block)
    return nullptr;
  char *p = block + offset;
  reinterpret_cast<uint64_t *>(p)[-2] = offset;
  reinterpret_cast<uint64_t *>(p)[-1] = size;
  zbrt_count_bytes(static_cast<int64_t>(size));
  return p;
}

#if defined(__GLIBC__)
/// Compiled code allocates and frees the same buffers every step: the
/// rank's arena (one block, tens to hundreds of MiB) and the buffers of
/// each action. glibc would give the large ones back to the kernel (each
/// its own mmap, and the heap's top trimmed on free) and take a page fault
/// per page to get them again, a tenth of a step's time at GPT sizes; it
/// keeps them instead: every block comes from the heap (glibc still maps
/// one on its own if the heap cannot grow), and the heap is never trimmed.
struct KeepFreedBuffers {
  KeepFreedBuffers() {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, -1);
  }
} keepFreedBuffers;
#endif
} // namespace

double zbrt::traceClock() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<ActionRecord> zbrt::takeActionRecords() {
  std::lock_guard<std::mutex> lock(recordsMutex);
  std::vector<ActionRecord> taken;
  taken.swap(records);
  return taken;
}

static std::atomic<double> reductionWait{0.0};

double zbrt::takeReductionWaitSeconds() {
  return reductionWait.exchange(0.0, std::memory_order_relaxed);
}

void zbrt::addReductionWaitSeconds(double seconds) {
  double seen = reductionWait.load(std::memory_order_relaxed);
  while (!reductionWait.compare_exchange_weak(seen, seen + seconds,
                                              std::memory_order_relaxed))
    ;
}

int64_t zbrt::liveBytes() { return live.load(std::memory_order_relaxed); }
int64_t zbrt::peakLiveBytes() { return peak.load(std::memory_order_relaxed); }
void zbrt::resetPeakLiveBytes() {
  peak.store(live.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void zbrt_action_begin(int32_t phase, int64_t stage, int64_t microbatch) {
  open.phase = phase;
  open.stage = stage;
  open.microbatch = microbatch;
  open.start = traceClock();
}

void zbrt_action_end(int32_t phase, int64_t stage, int64_t microbatch) {
  ActionRecord record = open;
  record.phase = phase;
  record.stage = stage;
  record.microbatch = microbatch;
  record.end = traceClock();
  record.liveBytes = liveBytes();
  std::lock_guard<std::mutex> lock(recordsMutex);
  records.push_back(record);
}

void zbrt_count_bytes(int64_t delta) {
  int64_t now = live.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t before = peak.load(std::memory_order_relaxed);
  while (now > before &&
         !peak.compare_exchange_weak(before, now, std::memory_order_relaxed)) {
  }
}

void *_mlir_memref_to_llvm_alloc(uint64_t size) {
  return track(static_cast<char *>(std::malloc(size + kHeader)), kHeader,
               size);
}

void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t size) {
  uint64_t offset = std::max<uint64_t>(alignment, kHeader);
  // aligned_alloc wants a power-of-two alignment and a multiple of it.
  uint64_t align = std::max<uint64_t>(alignment, alignof(std::max_align_t));
  uint64_t total = (size + offset + align - 1) / align * align;
  return track(static_cast<char *>(std::aligned_alloc(align, total)), offset,
               size);
}

void _mlir_memref_to_llvm_free(void *ptr) {
  if (!ptr)
    return;
  char *p = static_cast<char *>(ptr);
  uint64_t offset = reinterpret_cast<uint64_t *>(p)[-2];
  uint64_t size = reinterpret_cast<uint64_t *>(p)[-1];
  zbrt_count_bytes(-static_cast<int64_t>(size));
  std::free(p - offset);
}
