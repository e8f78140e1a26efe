//===- Init.h - Seeded parameters and synthetic data ------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_INIT_H
#define ZBRT_INIT_H

#include "zbrt/Npz.h"

#include <cstdint>
#include <string>

namespace zbrt {

/// Fills the float parameter `array` named `name` from `seed`. Matrices
/// ([in, out, ...]) are uniform in ±1/sqrt(in); vectors and scalars are 1
/// for normalisation scales (a name component starting with "ln" or
/// containing "norm", ending in "weight", "gamma" or "scale") and 0
/// otherwise. The values depend only on (seed, name, shape).
void initParam(NpyArray &array, const std::string &name, uint64_t seed);

/// Fills data `array` from (seed, name, index): floats uniform in [-1, 1),
/// integers uniform in [0, range) (range 2 when not positive).
void synthesizeData(NpyArray &array, const std::string &name, uint64_t seed,
                    uint64_t index, int64_t range);

/// SplitMix64's finaliser: a bijection of 64-bit words that mixes every
/// input bit into every output bit.
uint64_t mix64(uint64_t z);

/// The random key of a model's {zb.rng} argument for one microbatch:
/// mix64(mix64(seed) + microbatch), with `microbatch` the global index
/// (step, replica and microbatch; ModelData::globalMicrobatch).
uint64_t rngKey(uint64_t seed, uint64_t microbatch);

} // namespace zbrt

#endif // ZBRT_INIT_H
