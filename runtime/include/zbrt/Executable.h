//===- Executable.h - Loading and calling compiled code ---------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// A compiled model is a shared object whose entry points take a packed
// array of pointers to memref descriptors (see zb::kEntryPrefix). This file
// opens such objects and calls their entries on host arrays.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_EXECUTABLE_H
#define ZBRT_EXECUTABLE_H

#include "zbrt/Npz.h"

#include <memory>
#include <string>
#include <vector>

namespace zbrt {

/// A packed entry point: args[i] points to the i-th memref descriptor.
using EntryFn = void (*)(void **args);

/// A loaded shared object.
class SharedObject {
public:
  /// Opens `path`; on failure returns null and sets `error`.
  static std::unique_ptr<SharedObject> open(const std::string &path,
                                            std::string &error);
  ~SharedObject();
  SharedObject(const SharedObject &) = delete;
  SharedObject &operator=(const SharedObject &) = delete;

  /// The entry named `symbol`, or null (with `error` set).
  EntryFn lookup(const std::string &symbol, std::string &error) const;

private:
  explicit SharedObject(void *handle) : handle(handle) {}
  void *handle;
};

/// Calls `entry` with one memref descriptor per array, in order (the
/// function's arguments, then its out-parameters). Arrays are dense, C
/// order, and must outlive the call. With `pointers`, descriptor i points at
/// `(*pointers)[i]` (e.g. device memory of the same size) instead of the
/// array's data, which then only gives the shape.
void callEntry(EntryFn entry, const std::vector<NpyArray *> &arrays,
               const std::vector<void *> *pointers = nullptr);

} // namespace zbrt

#endif // ZBRT_EXECUTABLE_H
