//===- ArenaPlanner.h - Offsets of values in one step arena -----*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The memory plan of a loop-form step function (--zb-lower-to-runtime):
// every value an action hands to a later one lives at a fixed offset of one
// arena. A pure function of the values' sizes and lifetimes, so that it is
// tested on its own.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_CONVERSION_ARENAPLANNER_H
#define ZB_CONVERSION_ARENAPLANNER_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <vector>

namespace zb {

/// A value to place: its size and the actions (indices in program order)
/// that produce it and read it last (lastUse >= producer).
struct ArenaValue {
  int64_t bytes;
  int64_t producer;
  int64_t lastUse;
};

struct ArenaPlan {
  /// Byte offset of each value.
  std::vector<int64_t> offsets;
  /// The arena's size: the highest end any value reached.
  int64_t size = 0;
};

/// Places `values` (sorted by producer) in program order: at each action
/// its results first, best fit among the free ranges (the smallest that
/// fits; the arena grows only at its end), then the ranges of the values it
/// read last are freed and merged with their free neighbours. A value is
/// thus never placed over one that is read by the action producing it.
ArenaPlan planArena(llvm::ArrayRef<ArenaValue> values);

} // namespace zb

#endif // ZB_CONVERSION_ARENAPLANNER_H
