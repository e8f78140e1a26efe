//===- Npz.h - NumPy .npz archives ------------------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// Reading and writing NumPy's .npz format (a ZIP archive of .npy arrays, as
// numpy.savez writes it: stored, not compressed). Used for parameters,
// inputs, gradients and checkpoints. Writes are atomic: a temporary file in
// the same directory, renamed over the target when complete.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_NPZ_H
#define ZBRT_NPZ_H

#include "zbrt/Printable.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace zbrt {

/// Element types the runtime reads and writes.
enum class DType { F32, F64, I32, I64 };

/// The NumPy `descr` of a dtype, e.g. "<f4".
const char *dtypeDescr(DType dtype);
/// The size in bytes of one element.
size_t dtypeSize(DType dtype);

/// One array: little-endian, C order.
struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<char> data;

  int64_t numElements() const;
  /// "[2, 16]" for messages.
  std::string shapeString() const;
  template <typename T> T *as() { return reinterpret_cast<T *>(data.data()); }
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(data.data());
  }
};

/// Arrays by name, in name order.
using NpzArchive = std::map<std::string, NpyArray>;

/// Reads `path`; on failure returns false and sets `error` to a message
/// naming the file and, where it applies, the array.
bool readNpz(const std::string &path, NpzArchive &archive, std::string &error);

/// Reads the name, dtype and shape of each array of `path`, their data left
/// empty: only the archive's directory and the arrays' headers are read
/// (no CRC check). Fails as readNpz does on what it reads, with the same
/// messages.
bool readNpzHeaders(const std::string &path, NpzArchive &archive,
                    std::string &error);

/// Writes `archive` to `path` atomically; on failure returns false, sets
/// `error` and leaves any existing file at `path` untouched.
bool writeNpz(const std::string &path, const NpzArchive &archive,
              std::string &error);

/// Writes `contents` to `path` atomically (temporary file, then rename).
bool writeFileAtomically(const std::string &path, const std::string &contents,
                         std::string &error);

} // namespace zbrt

#endif // ZBRT_NPZ_H
