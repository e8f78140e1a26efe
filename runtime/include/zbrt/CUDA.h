//===- CUDA.h - The runtime's GPU support -----------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The GPU side of the runtime lives in its own library, libzbrt_cuda.so,
// built only where the CUDA toolkit and NCCL are found. Tools do not link
// it: loadCUDARuntime() opens it (RTLD_GLOBAL, so that compiled GPU models
// resolve the mgpu* and zbrt_gpu_* functions against it), which keeps CPU
// runs working on machines without an NVIDIA driver and turns a missing
// driver, GPU or NCCL into an error message.
//
// Device state: one CUDA device per process (the primary context), one
// compute stream on which every kernel, cuBLAS call, allocation and copy
// of compiled code runs (and a copy stream for the host's prefetches), a
// cuBLAS handle bound to it, and device memory from cuMemAllocAsync on that
// stream (plain device memory from the device's default pool, never managed
// memory).
//
// Communication: createNCCLComm() wraps a host communicator (MPI, or the
// local one for P = 1). Point-to-point transfers go through NCCL, with one
// two-rank communicator and one stream per peer and direction, ordered
// against the compute stream by events so that transfers overlap compute;
// NCCL's unique ids are bootstrapped over the host communicator. Host-memory
// collectives (losses, barriers, gathers) stay on the host communicator.
// NCCL has no tags: the k-th send to a peer meets the peer's k-th recv from
// this rank, whatever the channel, so both sides must issue them in the
// same order (the sched.program order does).
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_CUDA_H
#define ZBRT_CUDA_H

#include "zbrt/Comm.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace zbrt {

/// The entry points of libzbrt_cuda.so, as loaded by loadCUDARuntime().
/// Every function that can fail returns false (or null) and sets `error`.
struct CUDARuntime {
  /// Initialises the driver on `device` (an ordinal among the visible
  /// devices, see selectCUDADevice()): context, compute stream, cuBLAS and
  /// the allocator. Fails with a clear message when there is no driver or
  /// no GPU. Call once, before loading a compiled GPU model.
  bool (*init)(int device, std::string &error);
  /// The number of visible devices (0 when there is no driver).
  int (*deviceCount)();
  /// A one-line description of the current device, e.g. "NVIDIA H200
  /// (sm_90, 139 GiB)".
  std::string (*deviceName)();
  /// Wraps `host` (taking ownership) into the NCCL backend. With one rank
  /// no NCCL communicator is created. Needs init().
  std::unique_ptr<Comm> (*createNCCLComm)(std::unique_ptr<Comm> host,
                                          std::string &error);
  /// Device memory of `bytes` bytes (stream-ordered on the compute
  /// stream), or null with `error` set.
  void *(*alloc)(size_t bytes, std::string &error);
  void (*free)(void *pointer);
  /// Copies between host and device memory, ordered on the compute stream;
  /// copyToHost waits for the copy (and all compute before it).
  bool (*copyToDevice)(void *device, const void *host, size_t bytes,
                       std::string &error);
  bool (*copyToHost)(void *host, const void *device, size_t bytes,
                     std::string &error);
  /// Waits for all work on the compute stream.
  bool (*synchronize)(std::string &error);
  /// Stream-ordered, without waiting: a copy from pageable host memory
  /// (which the caller may reuse once it returns), a copy between device
  /// buffers, and zeroing device memory.
  bool (*copyToDeviceAsync)(void *device, const void *host, size_t bytes,
                            std::string &error);
  bool (*copyOnDevice)(void *dst, const void *src, size_t bytes,
                       std::string &error);
  bool (*zero)(void *device, size_t bytes, std::string &error);
  /// A copy of host memory to the device on the runtime's copy stream,
  /// without waiting, overlapping the compute stream's work: the bytes are
  /// staged in pinned host memory first, so the caller may reuse `host` at
  /// once. The destination must not be in use by queued compute work.
  /// awaitPrefetches() orders the compute stream after every prefetch
  /// issued so far, without a host wait; call it before compute work reads
  /// (or frees) what a prefetch writes.
  bool (*prefetchToDevice)(void *device, const void *host, size_t bytes,
                           std::string &error);
  bool (*awaitPrefetches)(std::string &error);
};

/// Opens libzbrt_cuda.so (next to libzbrt.so) once and returns its entry
/// points, or null with `error` saying why: this build has no GPU support,
/// or the NVIDIA driver, CUDA or NCCL libraries are missing.
const CUDARuntime *loadCUDARuntime(std::string &error);

/// The device this process should use: its node-local rank (from
/// OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID or
/// LOCAL_RANK; 0 without) modulo `deviceCount`. CUDA_VISIBLE_DEVICES is
/// applied by the driver before that.
int selectCUDADevice(int deviceCount);

} // namespace zbrt

extern "C" {
/// The symbol loadCUDARuntime() looks up in libzbrt_cuda.so.
const zbrt::CUDARuntime *zbrt_cuda_runtime(void);

/// The cuBLAS gemms compiled GPU code calls for matmul-family ops (see
/// --zb-lower-gemm-to-cublas): zbrt_sgemm_batched's contract (zbrt.h) on
/// device pointers, run on the compute stream. The _bf16 variant keeps f32
/// storage and accumulation but multiplies in bf16 (tensor cores).
void zbrt_gpu_sgemm_batched(int32_t transA, int32_t transB, int64_t batch,
                            int64_t m, int64_t n, int64_t k, float alpha,
                            const float *a, int64_t lda, int64_t strideA,
                            const float *b, int64_t ldb, int64_t strideB,
                            float beta, float *c, int64_t ldc, int64_t strideC);
void zbrt_gpu_sgemm_batched_bf16(int32_t transA, int32_t transB, int64_t batch,
                                 int64_t m, int64_t n, int64_t k, float alpha,
                                 const float *a, int64_t lda, int64_t strideA,
                                 const float *b, int64_t ldb, int64_t strideB,
                                 float beta, float *c, int64_t ldc,
                                 int64_t strideC);
}

#endif // ZBRT_CUDA_H
