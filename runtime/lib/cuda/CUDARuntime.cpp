//===- CUDARuntime.cpp - Device, allocator, launches and cuBLAS -----------===//
//
// Part of ZeroBubble MLIR.
//
// The CUDA side of the runtime: the device state, the mgpu* functions that
// MLIR's --gpu-to-llvm lowering calls (the ABI of MLIR's
// CudaRuntimeWrappers.cpp, implemented on the compute stream), the cuBLAS
// gemms of compiled code, and the host API of zbrt/CUDA.h.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include "zbrt/CUDA.h"
#include "zbrt/zbrt.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

using namespace zbrt;
using namespace zbrt::cuda;

//===----------------------------------------------------------------------===//
// Device state
//===----------------------------------------------------------------------===//

Device &cuda::device() {
  static Device state;
  return state;
}

std::string cuda::describe(CUresult result) {
  const char *name = nullptr, *text = nullptr;
  cuGetErrorName(result, &name);
  cuGetErrorString(result, &text);
  std::string out = name ? name : ("CUresult " + std::to_string(result));
  if (text)
    out += std::string(" (") + text + ")";
  return out;
}

std::string cuda::describe(cublasStatus_t status) {
  return std::string(cublasGetStatusName(status)) + " (" +
         cublasGetStatusString(status) + ")";
}

void cuda::fatal(const std::string &message) {
  if (Comm *comm = zbrt_get_comm())
    comm->abort(message);
  std::fflush(stdout);
  std::fprintf(stderr, "zb-run: error: %s\n", message.c_str());
  std::fflush(stderr);
  std::exit(1);
}

void cuda::check(CUresult result, const char *what) {
  if (result != CUDA_SUCCESS)
    fatal(std::string(what) + " failed: " + describe(result));
}

bool cuda::isDevicePointer(const void *pointer) {
  unsigned type = 0;
  CUresult result =
      cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                            reinterpret_cast<CUdeviceptr>(pointer));
  return result == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE;
}

static int countDevices() {
  if (cuInit(0) != CUDA_SUCCESS)
    return 0;
  int count = 0;
  if (cuDeviceGetCount(&count) != CUDA_SUCCESS)
    return 0;
  return count;
}

bool cuda::init(int ordinal, std::string &error) {
  Device &state = device();
  if (state.initialized) {
    if (state.ordinal == ordinal)
      return true;
    error = "CUDA is already initialised on device " +
            std::to_string(state.ordinal);
    return false;
  }
  if (CUresult result = cuInit(0); result != CUDA_SUCCESS) {
    error = "no usable NVIDIA GPU: cuInit failed: " + describe(result);
    return false;
  }
  int count = 0;
  if (CUresult result = cuDeviceGetCount(&count); result != CUDA_SUCCESS) {
    error = "cannot count CUDA devices: " + describe(result);
    return false;
  }
  if (count == 0) {
    const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
    error = "no CUDA device is visible" +
            (visible ? " (CUDA_VISIBLE_DEVICES=" + std::string(visible) + ")"
                     : std::string());
    return false;
  }
  if (ordinal < 0 || ordinal >= count) {
    error = "CUDA device " + std::to_string(ordinal) + " is not in [0, " +
            std::to_string(count) + ")";
    return false;
  }
  auto fail = [&](const char *what, CUresult result) {
    error = std::string(what) + " failed: " + describe(result);
    return false;
  };
  if (CUresult r = cuDeviceGet(&state.device, ordinal); r != CUDA_SUCCESS)
    return fail("cuDeviceGet", r);
  if (CUresult r = cuDevicePrimaryCtxRetain(&state.context, state.device);
      r != CUDA_SUCCESS)
    return fail("cuDevicePrimaryCtxRetain", r);
  if (CUresult r = cuCtxSetCurrent(state.context); r != CUDA_SUCCESS)
    return fail("cuCtxSetCurrent", r);
  if (CUresult r = cuStreamCreate(&state.compute, CU_STREAM_NON_BLOCKING);
      r != CUDA_SUCCESS)
    return fail("cuStreamCreate", r);
  if (CUresult r = cuStreamCreate(&state.copy, CU_STREAM_NON_BLOCKING);
      r != CUDA_SUCCESS)
    return fail("cuStreamCreate", r);
  if (CUresult r = cuEventCreate(&state.prefetched, CU_EVENT_DISABLE_TIMING);
      r != CUDA_SUCCESS)
    return fail("cuEventCreate", r);
  // Keep freed memory in the pool instead of returning it at each sync.
  CUmemoryPool pool;
  if (CUresult r = cuDeviceGetDefaultMemPool(&pool, state.device);
      r != CUDA_SUCCESS)
    return fail("cuDeviceGetDefaultMemPool", r);
  cuuint64_t threshold = UINT64_MAX;
  if (CUresult r = cuMemPoolSetAttribute(
          pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
      r != CUDA_SUCCESS)
    return fail("cuMemPoolSetAttribute", r);
  if (cublasStatus_t s = cublasCreate(&state.cublas);
      s != CUBLAS_STATUS_SUCCESS) {
    error = "cublasCreate failed: " + describe(s);
    return false;
  }
  cublasSetStream(state.cublas, state.compute);
  // f32 gemms stay f32 (no TF32): results match the CPU run.
  cublasSetMathMode(state.cublas, CUBLAS_DEFAULT_MATH);
  state.ordinal = ordinal;
  state.initialized = true;
  return true;
}

Device &cuda::requireDevice() {
  Device &state = device();
  if (state.initialized)
    return state;
  std::string error;
  if (!init(selectCUDADevice(countDevices()), error))
    fatal(error);
  return state;
}

/// The stream compiled code passes, or the compute stream for null.
static CUstream streamOrCompute(CUstream stream) {
  return stream ? stream : requireDevice().compute;
}

/// Whether ZB_GPU_SYNC asks to wait after every launch (to find the kernel
/// that faults).
static bool syncEveryLaunch() {
  static bool sync = [] {
    const char *text = std::getenv("ZB_GPU_SYNC");
    return text && *text && std::strcmp(text, "0") != 0;
  }();
  return sync;
}

//===----------------------------------------------------------------------===//
// Launch timing (ZB_GPU_PROFILE)
//===----------------------------------------------------------------------===//

namespace {
/// ZB_GPU_PROFILE=FILE: every kernel launch and cuBLAS call of compiled code
/// is timed on the compute stream between two events; the times are read
/// whenever the runtime waits for the stream to read results (copyToHost,
/// synchronize: once or a few times per step), and at exit FILE gets one
/// line per launch read so, in order: the number of such reads before it,
/// what ran (a kernel as `name@N`, N its module's position in the order
/// its kernels were first looked up, since outlined kernels share their
/// function's name; a gemm as `gemm <dtype> BxMxNxK` and its
/// transpositions), grid, block and microseconds. `%r` in FILE stands for
/// the rank (each rank of a pipeline writes its own file).
/// bench/gpu_profile_summary.py sums them. For finding where a step's time
/// goes: the events cost a few microseconds per launch.
class LaunchTimer {
public:
  /// The timer, or null when ZB_GPU_PROFILE is unset.
  static LaunchTimer *get() {
    static LaunchTimer *timer = [] {
      const char *path = std::getenv("ZB_GPU_PROFILE");
      return path && *path ? new LaunchTimer(path) : nullptr;
    }();
    return timer;
  }

  /// Records the start of a launch on `stream`; end() its end.
  void begin(CUstream stream, std::string label, std::string grid,
             std::string block) {
    Pending p{takeEvent(), takeEvent(), std::move(label), std::move(grid),
              std::move(block)};
    check(cuEventRecord(p.start, stream), "cuEventRecord");
    pending.push_back(std::move(p));
  }
  void end(CUstream stream) {
    check(cuEventRecord(pending.back().stop, stream), "cuEventRecord");
  }

  /// Reads the times of the launches before a wait for the compute stream
  /// (where every launch runs); one whose events cannot be read is left
  /// out, counted, and reported at exit.
  void collect() {
    for (Pending &p : pending) {
      float ms = 0;
      if (cuEventElapsedTime(&ms, p.start, p.stop) == CUDA_SUCCESS)
        lines += std::to_string(waits) + "\t" + p.label + "\t" + p.grid + "\t" +
                 p.block + "\t" + std::to_string(ms * 1e3) + "\n";
      else
        ++unread;
      spare.push_back(p.start);
      spare.push_back(p.stop);
    }
    pending.clear();
    ++waits;
  }

  /// The label of kernel `function` of `module`.
  void nameKernel(CUmodule module, CUfunction function, const char *name) {
    auto [it, inserted] = modules.try_emplace(module, modules.size());
    labels[function] = std::string(name) + "@" + std::to_string(it->second);
  }
  std::string kernelLabel(CUfunction function) const {
    auto it = labels.find(function);
    return it == labels.end() ? "kernel" : it->second;
  }

  ~LaunchTimer() = delete;

private:
  struct Pending {
    CUevent start, stop;
    std::string label, grid, block;
  };

  explicit LaunchTimer(std::string path) : path(std::move(path)) {
    std::atexit([] { get()->write(); });
  }

  CUevent takeEvent() {
    if (!spare.empty()) {
      CUevent event = spare.back();
      spare.pop_back();
      return event;
    }
    CUevent event = nullptr;
    check(cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate");
    return event;
  }

  void write() {
    std::string name = path;
    Comm *comm = zbrt_get_comm();
    std::string rank = std::to_string(comm ? comm->rank() : 0);
    for (size_t at = name.find("%r"); at != std::string::npos;
         at = name.find("%r", at + rank.size()))
      name.replace(at, 2, rank);
    if (unread || !pending.empty())
      std::fprintf(stderr,
                   "zb-run: warning: ZB_GPU_PROFILE: %zu launches not "
                   "timed (%zu unreadable, %zu after the last wait)\n",
                   unread + pending.size(), unread, pending.size());
    FILE *file = std::fopen(name.c_str(), "w");
    if (!file) {
      std::fprintf(stderr, "zb-run: warning: ZB_GPU_PROFILE: cannot write %s\n",
                   name.c_str());
      return;
    }
    std::fputs("wait\tlaunch\tgrid\tblock\tus\n", file);
    std::fputs(lines.c_str(), file);
    std::fclose(file);
  }

  std::string path, lines;
  std::vector<Pending> pending;
  std::vector<CUevent> spare;
  std::unordered_map<CUmodule, size_t> modules;
  std::unordered_map<CUfunction, std::string> labels;
  size_t waits = 0, unread = 0;
};
} // namespace

static std::string dims(intptr_t x, intptr_t y, intptr_t z) {
  return std::to_string(x) + "x" + std::to_string(y) + "x" + std::to_string(z);
}

/// Reads the launch times (ZB_GPU_PROFILE) after a wait for the stream.
static void collectLaunchTimes() {
  if (LaunchTimer *timer = LaunchTimer::get())
    timer->collect();
}

//===----------------------------------------------------------------------===//
// The mgpu* ABI of --gpu-to-llvm
//===----------------------------------------------------------------------===//
//
// Every stream compiled code asks for is the compute stream, so all its work
// is ordered without host waits. A stream "synchronisation" at the end of a
// function therefore does not wait: the host never reads device memory
// except through this runtime, which waits where it must (copyToHost,
// synchronize, the NCCL backend). ZB_GPU_SYNC=1 makes it wait.

extern "C" {

CUmodule mgpuModuleLoad(void *data, size_t /*gpuBlobSize*/) {
  requireDevice();
  CUmodule module = nullptr;
  check(cuModuleLoadData(&module, data), "cuModuleLoadData");
  return module;
}

CUmodule mgpuModuleLoadJIT(void *data, int optLevel) {
  requireDevice();
  CUmodule module = nullptr;
  char log[8192] = {0};
  CUjit_option options[] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {reinterpret_cast<void *>(static_cast<intptr_t>(optLevel)),
                    log, reinterpret_cast<void *>(sizeof(log) - 1)};
  CUresult result = cuModuleLoadDataEx(&module, data, 3, options, values);
  if (result != CUDA_SUCCESS)
    fatal("JIT-compiling PTX failed: " + describe(result) +
          (log[0] ? std::string(": ") + log : std::string()));
  return module;
}

void mgpuModuleUnload(CUmodule module) {
  // Runs from global destructors, possibly after the driver shut down.
  cuModuleUnload(module);
}

CUfunction mgpuModuleGetFunction(CUmodule module, const char *name) {
  CUfunction function = nullptr;
  CUresult result = cuModuleGetFunction(&function, module, name);
  if (result != CUDA_SUCCESS)
    fatal(std::string("kernel '") + name + "' not found: " + describe(result));
  if (LaunchTimer *timer = LaunchTimer::get())
    timer->nameKernel(module, function, name);
  return function;
}

void mgpuLaunchKernel(CUfunction function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, CUstream stream,
                      void **params, void **extra, size_t /*paramsCount*/) {
  CUstream s = streamOrCompute(stream);
  LaunchTimer *timer = LaunchTimer::get();
  if (timer)
    timer->begin(s, timer->kernelLabel(function), dims(gridX, gridY, gridZ),
                 dims(blockX, blockY, blockZ));
  check(cuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY, blockZ,
                       smem, s, params, extra),
        "cuLaunchKernel");
  if (timer)
    timer->end(s);
  if (syncEveryLaunch())
    check(cuStreamSynchronize(s), "a kernel");
}

CUstream mgpuStreamCreate() { return requireDevice().compute; }

void mgpuStreamDestroy(CUstream stream) {
  if (stream != device().compute)
    check(cuStreamDestroy(stream), "cuStreamDestroy");
}

void mgpuStreamSynchronize(CUstream stream) {
  if (stream != device().compute || syncEveryLaunch())
    check(cuStreamSynchronize(stream), "cuStreamSynchronize");
}

void mgpuStreamWaitEvent(CUstream stream, CUevent event) {
  check(cuStreamWaitEvent(streamOrCompute(stream), event, 0),
        "cuStreamWaitEvent");
}

CUevent mgpuEventCreate() {
  requireDevice();
  CUevent event = nullptr;
  check(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  return event;
}

void mgpuEventDestroy(CUevent event) {
  check(cuEventDestroy(event), "cuEventDestroy");
}

void mgpuEventSynchronize(CUevent event) {
  check(cuEventSynchronize(event), "cuEventSynchronize");
}

void mgpuEventRecord(CUevent event, CUstream stream) {
  check(cuEventRecord(event, streamOrCompute(stream)), "cuEventRecord");
}

/// The size of each live allocation of compiled code, for the runtime's
/// count of the bytes compiled code holds (zbrt_count_bytes).
static std::mutex allocationsMutex;
static std::unordered_map<void *, uint64_t> allocations;

void *mgpuMemAlloc(uint64_t sizeBytes, CUstream stream, bool isHostShared) {
  if (isHostShared)
    fatal("gpu.alloc host_shared (managed memory) is not supported");
  if (sizeBytes == 0)
    return nullptr;
  CUdeviceptr pointer = 0;
  CUresult result =
      cuMemAllocAsync(&pointer, sizeBytes, streamOrCompute(stream));
  if (result != CUDA_SUCCESS)
    fatal("allocating " + std::to_string(sizeBytes) +
          " bytes on the GPU failed: " + describe(result));
  void *p = reinterpret_cast<void *>(pointer);
  {
    std::lock_guard<std::mutex> lock(allocationsMutex);
    allocations[p] = sizeBytes;
  }
  zbrt_count_bytes(static_cast<int64_t>(sizeBytes));
  return p;
}

void mgpuMemFree(void *pointer, CUstream stream) {
  if (!pointer)
    return;
  check(cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(pointer),
                       streamOrCompute(stream)),
        "cuMemFreeAsync");
  uint64_t size = 0;
  {
    std::lock_guard<std::mutex> lock(allocationsMutex);
    auto it = allocations.find(pointer);
    if (it != allocations.end()) {
      size = it->second;
      allocations.erase(it);
    }
  }
  zbrt_count_bytes(-static_cast<int64_t>(size));
}

void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, CUstream stream) {
  check(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                      reinterpret_cast<CUdeviceptr>(src), sizeBytes,
                      streamOrCompute(stream)),
        "cuMemcpyAsync");
}

void mgpuMemset32(void *dst, unsigned int value, size_t count,
                  CUstream stream) {
  check(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                         streamOrCompute(stream)),
        "cuMemsetD32Async");
}

void mgpuMemset16(void *dst, unsigned short value, size_t count,
                  CUstream stream) {
  check(cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                         streamOrCompute(stream)),
        "cuMemsetD16Async");
}

void mgpuSetDefaultDevice(int32_t ordinal) {
  std::string error;
  if (!cuda::init(ordinal, error))
    fatal(error);
}

} // extern "C"

//===----------------------------------------------------------------------===//
// cuBLAS gemms
//===----------------------------------------------------------------------===//

static int toInt(int64_t value, const char *what) {
  if (value < 0 || value > INT_MAX)
    fatal(std::string("zbrt_gpu_sgemm_batched: ") + what + " " +
          std::to_string(value) + " is out of cuBLAS's range");
  return static_cast<int>(value);
}

/// Row-major C = alpha op(A) op(B) + beta C is column-major
/// C^T = alpha op(B)^T op(A)^T + beta C^T: the same buffers with A and B
/// swapped and m and n swapped.
static void gemm(bool bf16, int32_t transA, int32_t transB, int64_t batch,
                 int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                 int64_t lda, int64_t strideA, const float *b, int64_t ldb,
                 int64_t strideB, float beta, float *c, int64_t ldc,
                 int64_t strideC) {
  Device &state = requireDevice();
  if (batch == 0 || m == 0 || n == 0)
    return;
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  int cm = toInt(n, "n"), cn = toInt(m, "m"), ck = toInt(k, "k");
  int clda = toInt(ldb, "ldb"), cldb = toInt(lda, "lda"),
      cldc = toInt(ldc, "ldc"), count = toInt(batch, "batch");
  LaunchTimer *timer = LaunchTimer::get();
  if (timer)
    timer->begin(state.compute,
                 std::string("gemm ") + (bf16 ? "bf16 " : "f32 ") +
                     std::to_string(batch) + "x" + std::to_string(m) + "x" +
                     std::to_string(n) + "x" + std::to_string(k) +
                     (transA ? " tA" : "") + (transB ? " tB" : ""),
                 "-", "-");
  cublasStatus_t status;
  if (bf16) {
    status = cublasGemmStridedBatchedEx(
        state.cublas, opB, opA, cm, cn, ck, &alpha, b, CUDA_R_32F, clda,
        strideB, a, CUDA_R_32F, cldb, strideA, &beta, c, CUDA_R_32F, cldc,
        strideC, count, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
  } else {
    status = cublasSgemmStridedBatched(state.cublas, opB, opA, cm, cn, ck,
                                       &alpha, b, clda, strideB, a, cldb,
                                       strideA, &beta, c, cldc, strideC, count);
  }
  if (timer)
    timer->end(state.compute);
  if (status != CUBLAS_STATUS_SUCCESS)
    fatal(std::string(bf16 ? "zbrt_gpu_sgemm_batched_bf16"
                           : "zbrt_gpu_sgemm_batched") +
          ": cuBLAS failed: " + describe(status));
}

void zbrt_gpu_sgemm_batched(int32_t transA, int32_t transB, int64_t batch,
                            int64_t m, int64_t n, int64_t k, float alpha,
                            const float *a, int64_t lda, int64_t strideA,
                            const float *b, int64_t ldb, int64_t strideB,
                            float beta, float *c, int64_t ldc,
                            int64_t strideC) {
  gemm(/*bf16=*/false, transA, transB, batch, m, n, k, alpha, a, lda, strideA,
       b, ldb, strideB, beta, c, ldc, strideC);
}

void zbrt_gpu_sgemm_batched_bf16(int32_t transA, int32_t transB, int64_t batch,
                                 int64_t m, int64_t n, int64_t k, float alpha,
                                 const float *a, int64_t lda, int64_t strideA,
                                 const float *b, int64_t ldb, int64_t strideB,
                                 float beta, float *c, int64_t ldc,
                                 int64_t strideC) {
  gemm(/*bf16=*/true, transA, transB, batch, m, n, k, alpha, a, lda, strideA, b,
       ldb, strideB, beta, c, ldc, strideC);
}

//===----------------------------------------------------------------------===//
// The host API (zbrt/CUDA.h)
//===----------------------------------------------------------------------===//

namespace zbrt::cuda {
std::unique_ptr<Comm> createNCCLComm(std::unique_ptr<Comm> host,
                                     std::string &error);
} // namespace zbrt::cuda

static bool requireInit(std::string &error) {
  if (device().initialized)
    return true;
  error = "the CUDA runtime is not initialised (call init first)";
  return false;
}

static std::string deviceName() {
  Device &state = device();
  if (!state.initialized)
    return "no CUDA device";
  char name[256] = {0};
  cuDeviceGetName(name, sizeof(name) - 1, state.device);
  int major = 0, minor = 0;
  cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                       state.device);
  cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                       state.device);
  size_t bytes = 0;
  cuDeviceTotalMem(&bytes, state.device);
  return std::string(name) + " (sm_" + std::to_string(major) +
         std::to_string(minor) + ", " + std::to_string(bytes >> 30) + " GiB)";
}

static void *allocDevice(size_t bytes, std::string &error) {
  if (!requireInit(error))
    return nullptr;
  CUdeviceptr pointer = 0;
  CUresult result =
      cuMemAllocAsync(&pointer, bytes ? bytes : 1, device().compute);
  if (result != CUDA_SUCCESS) {
    error = "allocating " + std::to_string(bytes) +
            " bytes on the GPU failed: " + describe(result);
    return nullptr;
  }
  return reinterpret_cast<void *>(pointer);
}

static void freeDevice(void *pointer) {
  if (pointer && device().initialized)
    cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(pointer), device().compute);
}

static bool copyToDevice(void *dst, const void *src, size_t bytes,
                         std::string &error) {
  if (!requireInit(error))
    return false;
  // Synchronous with respect to the host buffer, ordered on the stream.
  CUresult result = cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src,
                                      bytes, device().compute);
  if (result == CUDA_SUCCESS)
    result = cuStreamSynchronize(device().compute);
  if (result != CUDA_SUCCESS) {
    error = "copying " + std::to_string(bytes) +
            " bytes to the GPU failed: " + describe(result);
    return false;
  }
  return true;
}

/// `result` of an asynchronous operation on `bytes` bytes, as an error
/// naming `what`.
static bool checkAsync(CUresult result, const char *what, size_t bytes,
                       std::string &error) {
  if (result == CUDA_SUCCESS)
    return true;
  error = std::string(what) + " " + std::to_string(bytes) +
          " bytes on the GPU failed: " + describe(result);
  return false;
}

static bool copyToDeviceAsync(void *dst, const void *src, size_t bytes,
                              std::string &error) {
  if (!requireInit(error))
    return false;
  // From pageable memory the driver stages the data before returning, so
  // the caller may reuse `src` at once.
  return checkAsync(cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src,
                                      bytes, device().compute),
                    "uploading", bytes, error);
}

static bool copyOnDevice(void *dst, const void *src, size_t bytes,
                         std::string &error) {
  if (!requireInit(error))
    return false;
  return checkAsync(cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst),
                                      reinterpret_cast<CUdeviceptr>(src), bytes,
                                      device().compute),
                    "copying", bytes, error);
}

static bool zeroDevice(void *dst, size_t bytes, std::string &error) {
  if (!requireInit(error))
    return false;
  return checkAsync(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(dst), 0,
                                    bytes, device().compute),
                    "zeroing", bytes, error);
}

static bool copyToHost(void *dst, const void *src, size_t bytes,
                       std::string &error) {
  if (!requireInit(error))
    return false;
  CUresult result = cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src),
                                      bytes, device().compute);
  if (result == CUDA_SUCCESS)
    result = cuStreamSynchronize(device().compute);
  if (result != CUDA_SUCCESS) {
    error = "copying " + std::to_string(bytes) +
            " bytes from the GPU failed: " + describe(result);
    return false;
  }
  collectLaunchTimes();
  return true;
}

static bool prefetchToDevice(void *dst, const void *src, size_t bytes,
                             std::string &error) {
  if (!requireInit(error))
    return false;
  Device &state = device();
  auto failed = [&](CUresult r) {
    error = "the GPU failed (seen while prefetching step data): " + describe(r);
    return false;
  };
  // The first prefetch since the last await reuses the staging memory:
  // the copies that read it before must be done (in practice long since).
  if (!state.prefetchPending) {
    if (CUresult r = cuEventSynchronize(state.prefetched); r != CUDA_SUCCESS)
      return failed(r);
    state.stagingUsed = 0;
  }
  constexpr size_t kAlign = 256;
  size_t offset = (state.stagingUsed + kAlign - 1) / kAlign * kAlign;
  if (offset + bytes > state.stagingBytes) {
    // Grow it: wait for the copies still reading the old one.
    if (CUresult r = cuStreamSynchronize(state.copy); r != CUDA_SUCCESS)
      return failed(r);
    // Rarely more than once a run: pinning may wait for the whole device.
    size_t grown =
        std::max({2 * state.stagingBytes, offset + bytes, size_t(1) << 20});
    void *pinned = nullptr;
    if (CUresult r = cuMemHostAlloc(&pinned, grown, 0); r != CUDA_SUCCESS)
      return checkAsync(r, "pinning host memory for prefetching", bytes, error);
    if (state.staging)
      cuMemFreeHost(state.staging);
    state.staging = static_cast<char *>(pinned);
    state.stagingBytes = grown;
  }
  char *staged = state.staging + offset;
  std::memcpy(staged, src, bytes);
  state.stagingUsed = offset + bytes;
  state.prefetchPending = true;
  CUresult result = cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst),
                                      staged, bytes, state.copy);
  if (result == CUDA_SUCCESS)
    result = cuEventRecord(state.prefetched, state.copy);
  return checkAsync(result, "prefetching", bytes, error);
}

static bool awaitPrefetches(std::string &error) {
  if (!requireInit(error))
    return false;
  Device &state = device();
  if (!state.prefetchPending)
    return true;
  state.prefetchPending = false;
  if (CUresult r = cuStreamWaitEvent(state.compute, state.prefetched, 0);
      r != CUDA_SUCCESS) {
    error =
        "ordering the step after its prefetched data failed: " + describe(r);
    return false;
  }
  return true;
}

static bool synchronize(std::string &error) {
  if (!requireInit(error))
    return false;
  if (CUresult result = cuStreamSynchronize(device().compute);
      result != CUDA_SUCCESS) {
    error = "the GPU failed: " + describe(result);
    return false;
  }
  collectLaunchTimes();
  return true;
}

const CUDARuntime *zbrt_cuda_runtime(void) {
  static const CUDARuntime runtime = {
      /*init=*/cuda::init,
      /*deviceCount=*/countDevices,
      /*deviceName=*/deviceName,
      /*createNCCLComm=*/cuda::createNCCLComm,
      /*alloc=*/allocDevice,
      /*free=*/freeDevice,
      /*copyToDevice=*/copyToDevice,
      /*copyToHost=*/copyToHost,
      /*synchronize=*/synchronize,
      /*copyToDeviceAsync=*/copyToDeviceAsync,
      /*copyOnDevice=*/copyOnDevice,
      /*zero=*/zeroDevice,
      /*prefetchToDevice=*/prefetchToDevice,
      /*awaitPrefetches=*/awaitPrefetches,
  };
  return &runtime;
}
