//===- MemRefView.h - A strided buffer compiled code passes -----*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The ranked descriptor behind a zbrt_unranked_memref (zbrt.h), read out
// for the runtime functions that compiled code passes buffers to.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_LIB_MEMREFVIEW_H
#define ZBRT_LIB_MEMREFVIEW_H

#include "zbrt/zbrt.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace zbrt {

/// A ranked descriptor read out of an unranked memref.
struct View {
  char *data = nullptr; // aligned + offset, in bytes
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides; // in elements
  size_t elementSize = 0;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t size : sizes)
      n *= size;
    return n;
  }

  /// Whether the elements are dense in row-major order.
  bool isContiguous() const {
    int64_t expected = 1;
    for (size_t i = sizes.size(); i-- > 0;) {
      if (sizes[i] == 1)
        continue;
      if (strides[i] != expected)
        return false;
      expected *= sizes[i];
    }
    return true;
  }

  /// Copies the elements, in row-major order, to the dense buffer `out`.
  void packInto(char *out) const {
    if (isContiguous()) {
      std::memcpy(out, data, numElements() * elementSize);
      return;
    }
    forEach([&](const char *element) {
      std::memcpy(out, element, elementSize);
      out += elementSize;
    });
  }

  /// Fills the elements, in row-major order, from the dense buffer `in`.
  void unpackFrom(const char *in) const {
    if (isContiguous()) {
      std::memcpy(data, in, numElements() * elementSize);
      return;
    }
    forEach([&](char *element) {
      std::memcpy(element, in, elementSize);
      in += elementSize;
    });
  }

  /// Calls `fn(pointer)` for each element in row-major order.
  template <typename Fn> void forEach(Fn fn) const {
    if (numElements() == 0)
      return;
    size_t rank = sizes.size();
    if (rank == 0) {
      fn(data);
      return;
    }
    std::vector<int64_t> index(rank, 0);
    int64_t innerSize = sizes[rank - 1];
    int64_t innerStride = strides[rank - 1] * static_cast<int64_t>(elementSize);
    while (true) {
      int64_t start = 0;
      for (size_t d = 0; d + 1 < rank; ++d)
        start += index[d] * strides[d];
      char *p = data + start * static_cast<int64_t>(elementSize);
      for (int64_t i = 0; i < innerSize; ++i, p += innerStride)
        fn(p);
      // Advance the outer index like an odometer.
      size_t d = rank - 1;
      while (d > 0) {
        --d;
        if (++index[d] < sizes[d])
          break;
        index[d] = 0;
        if (d == 0)
          return;
      }
      if (rank == 1)
        return;
    }
  }
};

/// The view of `memref`'s descriptor
///   { T *allocated; T *aligned; int64_t offset; int64_t sizes[rank];
///     int64_t strides[rank]; }.
inline View viewOf(const zbrt_unranked_memref *memref, size_t elementSize) {
  const char *raw = static_cast<const char *>(memref->descriptor);
  View view;
  view.elementSize = elementSize;
  char *aligned;
  int64_t offset;
  std::memcpy(&aligned, raw + sizeof(void *), sizeof(void *));
  std::memcpy(&offset, raw + 2 * sizeof(void *), sizeof(int64_t));
  size_t rank = static_cast<size_t>(memref->rank);
  view.sizes.resize(rank);
  view.strides.resize(rank);
  const char *sizes = raw + 2 * sizeof(void *) + sizeof(int64_t);
  std::memcpy(view.sizes.data(), sizes, rank * sizeof(int64_t));
  std::memcpy(view.strides.data(), sizes + rank * sizeof(int64_t),
              rank * sizeof(int64_t));
  view.data = aligned + offset * static_cast<int64_t>(elementSize);
  return view;
}

} // namespace zbrt

#endif // ZBRT_LIB_MEMREFVIEW_H
