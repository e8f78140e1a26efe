//===- LoadCUDA.cpp - Opening the runtime's GPU library -------------------===//
//
// Part of ZeroBubble MLIR.
//
// libzbrt has no CUDA dependency; loadCUDARuntime() opens libzbrt_cuda.so
// from the directory libzbrt.so was loaded from, so that a missing driver
// or NCCL is an error message of --backend nccl, not a loader failure of
// every run.
//
//===----------------------------------------------------------------------===//

#include "zbrt/CUDA.h"
#include "zbrt/zbrt.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

using namespace zbrt;

/// The directory libzbrt.so was loaded from.
static std::string runtimeDirectory() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&zbrt_version), &info) ||
      !info.dli_fname)
    return ".";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

const CUDARuntime *zbrt::loadCUDARuntime(std::string &error) {
  static const CUDARuntime *runtime = nullptr;
  static std::string loadError;
  static bool tried = false;
  if (tried) {
    error = loadError;
    return runtime;
  }
  tried = true;
  std::string path = runtimeDirectory() + "/libzbrt_cuda.so";
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    loadError = "this build has no GPU support: " + path +
                " was not built (CMake found no CUDA toolkit or NCCL)";
    error = loadError;
    return nullptr;
  }
  // RTLD_GLOBAL: compiled GPU models resolve mgpu* and zbrt_gpu_* here.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    const char *why = dlerror();
    loadError = "cannot load the GPU runtime (" + path +
                "): " + (why ? why : "unknown error") +
                " (is the NVIDIA driver installed, and are the CUDA, cuBLAS "
                "and NCCL libraries on the library path?)";
    error = loadError;
    return nullptr;
  }
  using Entry = const CUDARuntime *(*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, "zbrt_cuda_runtime"));
  if (!entry) {
    loadError = path + " has no zbrt_cuda_runtime entry point";
    error = loadError;
    return nullptr;
  }
  runtime = entry();
  return runtime;
}

int zbrt::selectCUDADevice(int deviceCount) {
  if (deviceCount <= 0)
    return 0;
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "SLURM_LOCALID", "LOCAL_RANK"}) {
    const char *text = std::getenv(name);
    if (!text || !*text)
      continue;
    char *end = nullptr;
    long value = std::strtol(text, &end, 10);
    if (*end == '\0' && value >= 0)
      return static_cast<int>(value % deviceCount);
  }
  return 0;
}
