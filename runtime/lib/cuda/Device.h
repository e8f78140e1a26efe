//===- Device.h - The process's CUDA device (internal) ----------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// State shared by the files of libzbrt_cuda: the device, its primary
// context, the compute stream and the cuBLAS handle bound to it.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_LIB_CUDA_DEVICE_H
#define ZBRT_LIB_CUDA_DEVICE_H

#include <cublas_v2.h>
#include <cuda.h>

#include <string>

namespace zbrt::cuda {

struct Device {
  bool initialized = false;
  int ordinal = -1;
  CUdevice device = 0;
  CUcontext context = nullptr;
  /// Every kernel, gemm, allocation and copy of compiled code runs here.
  CUstream compute = nullptr;
  cublasHandle_t cublas = nullptr;
  /// Host-to-device prefetches (CUDARuntime::prefetchToDevice) run here,
  /// from `staging` (pinned host memory, `stagingBytes` of it, `stagingUsed`
  /// by the prefetches since the last await); `prefetched` marks the last.
  CUstream copy = nullptr;
  CUevent prefetched = nullptr;
  char *staging = nullptr;
  size_t stagingBytes = 0;
  size_t stagingUsed = 0;
  /// Whether a prefetch was issued since the last awaitPrefetches().
  bool prefetchPending = false;
};

/// The process's device (uninitialised until init()).
Device &device();

/// Initialises `ordinal` (see zbrt::CUDARuntime::init).
bool init(int ordinal, std::string &error);

/// The initialised device; initialises the device selectCUDADevice()
/// picks when compiled code runs before init() (ends the job on failure).
Device &requireDevice();

/// "CUDA_ERROR_NAME (description)".
std::string describe(CUresult result);
std::string describe(cublasStatus_t status);

/// Ends the job: through the communicator's abort() when one is set (every
/// rank stops), else "zb-run: error: <message>" and exit status 1.
[[noreturn]] void fatal(const std::string &message);

/// Ends the job unless `result` is CUDA_SUCCESS; `what` names the call.
void check(CUresult result, const char *what);

/// Whether `pointer` is device memory of the current context.
bool isDevicePointer(const void *pointer);

} // namespace zbrt::cuda

#endif // ZBRT_LIB_CUDA_DEVICE_H
