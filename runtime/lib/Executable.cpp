//===- Executable.cpp - Loading and calling compiled code -----------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Executable.h"

#include <cstring>
#include <dlfcn.h>

using namespace zbrt;

std::unique_ptr<SharedObject> SharedObject::open(const std::string &path,
                                                 std::string &error) {
  // RTLD_NOW: an unresolved symbol is reported here, not mid-step.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *msg = dlerror();
    error = "cannot load '" + path + "': " + (msg ? msg : "unknown error");
    return nullptr;
  }
  return std::unique_ptr<SharedObject>(new SharedObject(handle));
}

SharedObject::~SharedObject() { dlclose(handle); }

EntryFn SharedObject::lookup(const std::string &symbol,
                             std::string &error) const {
  dlerror();
  void *sym = dlsym(handle, symbol.c_str());
  if (!sym) {
    error = "compiled code has no entry '" + symbol + "'";
    return nullptr;
  }
  EntryFn fn;
  static_assert(sizeof(fn) == sizeof(sym), "function pointer size");
  std::memcpy(&fn, &sym, sizeof(fn));
  return fn;
}

void zbrt::callEntry(EntryFn entry, const std::vector<NpyArray *> &arrays,
                     const std::vector<void *> *pointers) {
  // Descriptor of rank r: {allocated, aligned, offset, sizes[r], strides[r]}.
  std::vector<std::vector<int64_t>> descriptors(arrays.size());
  std::vector<void *> args(arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    NpyArray &array = *arrays[i];
    size_t rank = array.shape.size();
    std::vector<int64_t> &d = descriptors[i];
    d.resize(3 + 2 * rank);
    auto ptr = reinterpret_cast<int64_t>(
        pointers ? (*pointers)[i] : static_cast<void *>(array.data.data()));
    d[0] = d[1] = ptr;
    d[2] = 0;
    int64_t stride = 1;
    for (size_t r = rank; r-- > 0;) {
      d[3 + r] = array.shape[r];
      d[3 + rank + r] = stride;
      stride *= array.shape[r];
    }
    args[i] = d.data();
  }
  entry(args.data());
}
