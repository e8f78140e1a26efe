//===- Init.cpp - Seeded parameters and synthetic data --------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Init.h"

#include <cmath>
#include <sstream>
#include <vector>

using namespace zbrt;

namespace {
/// SplitMix64: small, fast, and identical on every platform.
class Rng {
public:
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() { return mix64(state += 0x9E3779B97F4A7C15ull); }
  /// Uniform in [0, 1).
  double uniform() { return (next() >> 11) * 0x1.0p-53; }

private:
  uint64_t state;
};
} // namespace

/// FNV-1a of `text`, mixed with `seed` and `index`.
static uint64_t streamSeed(const std::string &text, uint64_t seed,
                           uint64_t index) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : text)
    h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  Rng mix(h ^ (seed * 0x9E3779B97F4A7C15ull) ^ (index << 32));
  return mix.next();
}

/// Whether `name` names a normalisation scale, e.g. "h0.ln1.weight".
static bool isNormScale(const std::string &name) {
  std::vector<std::string> parts;
  std::stringstream ss(name);
  std::string part;
  while (std::getline(ss, part, '.'))
    parts.push_back(part);
  if (parts.size() < 2)
    return false;
  const std::string &last = parts.back();
  if (last != "weight" && last != "gamma" && last != "scale")
    return false;
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    if (parts[i].rfind("ln", 0) == 0 ||
        parts[i].find("norm") != std::string::npos)
      return true;
  return false;
}

template <typename T>
static void fill(NpyArray &array, Rng &rng, double lo, double hi) {
  T *out = array.as<T>();
  for (int64_t i = 0, e = array.numElements(); i < e; ++i)
    out[i] = static_cast<T>(lo + (hi - lo) * rng.uniform());
}

template <typename T> static void fillConstant(NpyArray &array, T value) {
  T *out = array.as<T>();
  for (int64_t i = 0, e = array.numElements(); i < e; ++i)
    out[i] = value;
}

uint64_t zbrt::mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t zbrt::rngKey(uint64_t seed, uint64_t microbatch) {
  return mix64(mix64(seed) + microbatch);
}

void zbrt::initParam(NpyArray &array, const std::string &name,
                     uint64_t seed) {
  array.data.assign(array.numElements() * dtypeSize(array.dtype), 0);
  bool isF64 = array.dtype == DType::F64;
  if (array.shape.size() < 2) {
    double v = isNormScale(name) ? 1.0 : 0.0;
    isF64 ? fillConstant<double>(array, v)
          : fillConstant<float>(array, static_cast<float>(v));
    return;
  }
  Rng rng(streamSeed(name, seed, 0));
  double bound = 1.0 / std::sqrt(static_cast<double>(array.shape[0]));
  isF64 ? fill<double>(array, rng, -bound, bound)
        : fill<float>(array, rng, -bound, bound);
}

void zbrt::synthesizeData(NpyArray &array, const std::string &name,
                          uint64_t seed, uint64_t index, int64_t range) {
  array.data.assign(array.numElements() * dtypeSize(array.dtype), 0);
  Rng rng(streamSeed(name, seed, index + 1));
  if (range <= 0)
    range = 2;
  switch (array.dtype) {
  case DType::F32:
    return fill<float>(array, rng, -1, 1);
  case DType::F64:
    return fill<double>(array, rng, -1, 1);
  case DType::I32: {
    int32_t *out = array.as<int32_t>();
    for (int64_t i = 0, e = array.numElements(); i < e; ++i)
      out[i] = static_cast<int32_t>(rng.next() % range);
    return;
  }
  case DType::I64: {
    int64_t *out = array.as<int64_t>();
    for (int64_t i = 0, e = array.numElements(); i < e; ++i)
      out[i] = static_cast<int64_t>(rng.next() % range);
    return;
  }
  }
}
