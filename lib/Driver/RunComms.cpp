//===- RunComms.cpp - The communicators of one process of a run -----------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/RunComms.h"

#include "zbrt/zbrt.h"

using namespace zb;

std::unique_ptr<RunComms> RunComms::open(int64_t ranks, int64_t replicas,
                                         bool local, bool gpu, int *argc,
                                         char ***argv, std::string &error) {
  std::unique_ptr<RunComms> comms(new RunComms());
  std::unique_ptr<zbrt::Comm> world;
  int64_t worldSize = ranks * replicas;
  if (worldSize > 1 && !local) {
    zbrt::initComm(argc, argv);
    world = zbrt::createMPIComm(error);
  } else {
    world = zbrt::createLocalComm();
  }
  if (!world)
    return nullptr;
  if (!local && world->size() != worldSize)
    world->abort(
        "started with " + std::to_string(world->size()) +
        " processes, but --np " + std::to_string(ranks) +
        (replicas > 1 ? " --dp " + std::to_string(replicas) : std::string()) +
        " needs " + std::to_string(worldSize));
  comms->replicaIndex = world->rank() / ranks;
  if (replicas > 1) {
    comms->pipelineComm =
        world->split(static_cast<int>(comms->replicaIndex),
                     static_cast<int>(world->rank() % ranks), error);
    if (!comms->pipelineComm)
      world->abort(error);
    comms->worldComm = std::move(world);
  } else {
    comms->pipelineComm = std::move(world);
  }
  // The model runs on this process's GPU; NCCL moves its values.
  if (gpu && !local) {
    const zbrt::CUDARuntime *cuda = zbrt::loadCUDARuntime(error);
    if (!cuda ||
        !cuda->init(zbrt::selectCUDADevice(cuda->deviceCount()), error))
      comms->pipelineComm->abort("--backend nccl: " + error);
    comms->pipelineComm =
        cuda->createNCCLComm(std::move(comms->pipelineComm), error);
    if (!comms->pipelineComm) {
      error = "--backend nccl: " + error;
      return nullptr;
    }
    comms->cudaRuntime = cuda;
  }
  zbrt_set_comm(comms->pipelineComm.get());
  zbrt_set_replicas(&comms->world(), replicas);
  return comms;
}

RunComms::~RunComms() {
  zbrt_set_replicas(nullptr, 1);
  zbrt_set_comm(nullptr);
  pipelineComm.reset();
  worldComm.reset();
  zbrt::finalizeComm();
}
