//===- ArenaPlannerTest.cpp - The step arena's memory plan ----------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/ArenaPlanner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace zb;

namespace {

/// Whether two values are live at one time: one is produced before (or
/// when) the other is read for the last time, and the other way round.
bool overlapInTime(const ArenaValue &a, const ArenaValue &b) {
  return a.producer <= b.lastUse && b.producer <= a.lastUse;
}

/// The plan's invariants, checked by brute force: values live at one time
/// never share a byte, and the arena holds every value.
void expectValid(const std::vector<ArenaValue> &values, const ArenaPlan &plan) {
  ASSERT_EQ(plan.offsets.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_GE(plan.offsets[i], 0) << i;
    EXPECT_LE(plan.offsets[i] + values[i].bytes, plan.size) << i;
    for (size_t j = i + 1; j < values.size(); ++j) {
      if (!overlapInTime(values[i], values[j]))
        continue;
      bool apart = plan.offsets[i] + values[i].bytes <= plan.offsets[j] ||
                   plan.offsets[j] + values[j].bytes <= plan.offsets[i];
      EXPECT_TRUE(apart) << "values " << i << " and " << j
                         << " are live together and overlap";
    }
  }
}

/// The most bytes live at once: no plan can use less.
int64_t peakLive(const std::vector<ArenaValue> &values) {
  int64_t numActions = 0, peak = 0;
  for (const ArenaValue &v : values)
    numActions = std::max(numActions, v.lastUse + 1);
  for (int64_t k = 0; k < numActions; ++k) {
    int64_t live = 0;
    for (const ArenaValue &v : values)
      if (v.producer <= k && k <= v.lastUse)
        live += v.bytes;
    peak = std::max(peak, live);
  }
  return peak;
}

TEST(ArenaPlanner, Empty) {
  ArenaPlan plan = planArena({});
  EXPECT_TRUE(plan.offsets.empty());
  EXPECT_EQ(plan.size, 0);
}

TEST(ArenaPlanner, DisjointLifetimesShareTheirBytes) {
  // A chain: each value is read by the next action only.
  std::vector<ArenaValue> chain = {{64, 0, 1}, {64, 2, 3}, {64, 4, 5}};
  ArenaPlan plan = planArena(chain);
  expectValid(chain, plan);
  EXPECT_EQ(plan.size, 64);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 0, 0}));
}

TEST(ArenaPlanner, ResultNeverOverwritesWhatItsActionReads) {
  // Action 1 reads value 0 for the last time and produces value 1: they are
  // live together (the call reads one while writing the other).
  std::vector<ArenaValue> values = {{128, 0, 1}, {128, 1, 2}};
  ArenaPlan plan = planArena(values);
  expectValid(values, plan);
  EXPECT_EQ(plan.size, 256);
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
}

TEST(ArenaPlanner, BestFitTakesTheSmallestHoleThatFits) {
  // Values 0 (256 bytes at 0) and 2 (64 at 320) die at action 1, between
  // values 1 (at 256) and 3 (at 384) that stay: holes of 256 and 64. Value
  // 4 (64) takes the small hole, value 5 (192) the big one, and the arena
  // does not grow.
  std::vector<ArenaValue> values = {{256, 0, 1}, {64, 0, 5}, {64, 0, 1},
                                    {64, 0, 5},  {64, 2, 5}, {192, 3, 5}};
  ArenaPlan plan = planArena(values);
  expectValid(values, plan);
  EXPECT_EQ(plan.offsets[3], 384);
  EXPECT_EQ(plan.offsets[4], 320);
  EXPECT_EQ(plan.offsets[5], 0);
  EXPECT_EQ(plan.size, 448);
}

TEST(ArenaPlanner, FreedNeighboursMerge) {
  // Two adjacent 64-byte holes merge into one that takes a 128-byte value.
  std::vector<ArenaValue> values = {
      {64, 0, 1}, {64, 0, 1}, {64, 0, 4}, {128, 2, 4}};
  ArenaPlan plan = planArena(values);
  expectValid(values, plan);
  EXPECT_EQ(plan.offsets[3], 0);
  EXPECT_EQ(plan.size, 192);
}

TEST(ArenaPlanner, RandomProgramsAreValidAndNearTheBound) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    int numActions = 1 + rng() % 40;
    std::vector<ArenaValue> values;
    for (int k = 0; k < numActions; ++k)
      for (int n = rng() % 3; n > 0; --n) {
        int64_t last = k + rng() % std::max(1, numActions - k);
        values.push_back({64 * (1 + int64_t(rng() % 8)), k, last});
      }
    ArenaPlan plan = planArena(values);
    expectValid(values, plan);
    int64_t bound = peakLive(values);
    EXPECT_GE(plan.size, bound);
    // Best fit with merging stays within a small factor of the bound on
    // such programs (fragmentation); a regression to bump allocation
    // (the sum of all sizes) would not.
    EXPECT_LE(plan.size, 2 * bound) << "trial " << trial;
  }
}

} // namespace
