//===- RunComms.h - The communicators of one process of a run ---*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// A run of P pipeline ranks and D replicas has P * D processes; replica r's
// ranks are processes r*P .. r*P+P-1. Each process talks to its pipeline
// (what compiled code's transfers use: MPI, or NCCL on the process's GPU)
// and to the world (every process: the replicas' gradient means, the step
// barrier, the loss, the measurements).
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_RUNCOMMS_H
#define ZB_DRIVER_RUNCOMMS_H

#include "zbrt/CUDA.h"
#include "zbrt/Comm.h"

#include <memory>
#include <string>

namespace zb {

class RunComms {
public:
  /// The communicators of this process, installed for the C ABI
  /// (zbrt_set_comm, zbrt_set_replicas). Over MPI (initialised from
  /// `argc`/`argv`) when the run has several processes and `local` is
  /// false, else one local process. With `gpu`, the CUDA runtime is loaded,
  /// this process's device selected and the pipeline's transfers go over
  /// NCCL. Aborts the job when the world does not hold P * D processes or a
  /// communicator cannot be split; returns null with `error` set when one
  /// cannot be created.
  static std::unique_ptr<RunComms> open(int64_t ranks, int64_t replicas,
                                        bool local, bool gpu, int *argc,
                                        char ***argv, std::string &error);
  /// Uninstalls the communicators and finalises MPI.
  ~RunComms();

  zbrt::Comm &pipeline() { return *pipelineComm; }
  zbrt::Comm &world() { return worldComm ? *worldComm : *pipelineComm; }
  int64_t replica() const { return replicaIndex; }
  /// The CUDA runtime with `gpu` (and not `local`), else null.
  const zbrt::CUDARuntime *cuda() const { return cudaRuntime; }

private:
  RunComms() = default;

  /// Null when it is the pipeline (no replicas).
  std::unique_ptr<zbrt::Comm> worldComm;
  std::unique_ptr<zbrt::Comm> pipelineComm;
  int64_t replicaIndex = 0;
  const zbrt::CUDARuntime *cudaRuntime = nullptr;
};

} // namespace zb

#endif // ZB_DRIVER_RUNCOMMS_H
