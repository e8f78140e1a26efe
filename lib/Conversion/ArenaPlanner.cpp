//===- ArenaPlanner.cpp - Offsets of values in one step arena -------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/ArenaPlanner.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <map>

using namespace zb;

namespace {
/// Free ranges below `end`; a freed range that reaches `end` lowers it
/// instead, so that the arena grows only from `end`.
class FreeList {
public:
  int64_t allocate(int64_t size) {
    auto best = free.end();
    for (auto it = free.begin(); it != free.end(); ++it)
      if (it->second >= size &&
          (best == free.end() || it->second < best->second))
        best = it;
    if (best == free.end()) {
      int64_t at = end;
      end += size;
      peak = std::max(peak, end);
      return at;
    }
    int64_t at = best->first, left = best->second - size;
    free.erase(best);
    if (left)
      free[at + size] = left;
    return at;
  }

  void release(int64_t at, int64_t size) {
    auto next = free.lower_bound(at);
    if (next != free.end() && at + size == next->first) {
      size += next->second;
      next = free.erase(next);
    }
    if (next != free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        at = prev->first;
        size += prev->second;
        free.erase(prev);
      }
    }
    if (at + size == end)
      end = at;
    else
      free[at] = size;
  }

  int64_t getPeak() const { return peak; }

private:
  std::map<int64_t, int64_t> free; // offset -> size
  int64_t end = 0, peak = 0;
};
} // namespace

ArenaPlan zb::planArena(llvm::ArrayRef<ArenaValue> values) {
  ArenaPlan plan;
  plan.offsets.assign(values.size(), -1);
  if (values.empty())
    return plan;
  int64_t numActions = 0;
  for (const ArenaValue &v : values) {
    assert(v.lastUse >= v.producer && "a value dies before it is produced");
    numActions = std::max(numActions, v.lastUse + 1);
  }
  std::vector<std::vector<size_t>> dying(numActions);
  for (size_t id = 0; id < values.size(); ++id)
    dying[values[id].lastUse].push_back(id);
  FreeList arena;
  size_t next = 0;
  for (int64_t k = 0; k < numActions; ++k) {
    for (; next < values.size() && values[next].producer == k; ++next)
      plan.offsets[next] = arena.allocate(values[next].bytes);
    assert((next == values.size() || values[next].producer > k) &&
           "values must be sorted by producer");
    for (size_t id : dying[k])
      arena.release(plan.offsets[id], values[id].bytes);
  }
  plan.size = arena.getPeak();
  return plan;
}
