//===- Pipelines.h - The ZeroBubble pass pipelines --------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The named pipelines, in a library of their own (as upstream's
// mlir/lib/Dialect/GPU/Pipelines): an options struct and one build function
// per pipeline, registration apart. The conversion, transform and schedule
// libraries know nothing of the pipelines built from their passes.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_PIPELINES_PIPELINES_H
#define ZB_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace zb {

/// Options of the CPU lowering pipeline.
struct LowerToCPUOptions : mlir::PassPipelineOptions<LowerToCPUOptions> {
  Option<bool> useRuntimeGemm{
      *this, "runtime-gemm",
      llvm::cl::desc("Lower matmul-family ops to the runtime's BLAS gemm, "
                     "and copies that move the innermost dimension to its "
                     "transposes (otherwise both to loops)"),
      llvm::cl::init(true)};
};

/// Builds `--zb-lower-to-cpu`: linalg on tensors to the LLVM dialect, with
/// elementwise fusion, one-shot bufferization with buffer deallocation,
/// results turned into out-parameters, matmul-family ops as runtime gemm
/// calls, transposing copies as runtime transposes, the rest as loops, and
/// a C entry point per public function.
void buildLowerToCPUPipeline(mlir::OpPassManager &pm,
                             const LowerToCPUOptions &options);

/// Builds the part both lowerings share: strip cut markers, decompose
/// aggregates, fuse elementwise chains, prepare entry points, one-shot
/// bufferization across functions, results as out-parameters, and buffer
/// deallocation.
void buildBufferizeModelPipeline(mlir::OpPassManager &pm);

/// Builds the CPU lowering's last part, which the GPU lowering's emulation
/// on the host shares: loops, memrefs and math on buffers to the LLVM
/// dialect (inline approximations of exp and its kin, allocations through
/// the runtime).
void buildLoopsToLLVMPipeline(mlir::OpPassManager &pm);

/// Options of the GPU lowering pipeline.
struct LowerToGPUOptions : mlir::PassPipelineOptions<LowerToGPUOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("GPU architecture (default sm_90)"),
                           llvm::cl::init("sm_90")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Kernel binary embedded in the host code: bin (cubin, "
                     "default), fatbin, or isa (PTX text, JIT-compiled at "
                     "load)"),
      llvm::cl::init("bin")};
  Option<std::string> dtype{
      *this, "dtype",
      llvm::cl::desc("Matmul precision: f32 (default) or bf16 (bf16 "
                     "products, f32 accumulation)"),
      llvm::cl::init("f32")};
  Option<int64_t> blockSize{*this, "block-size",
                            llvm::cl::desc("Threads per block (default 256)"),
                            llvm::cl::init(256)};
  Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit for ptxas and libdevice (default: "
                     "$CUDA_ROOT, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda)"),
      llvm::cl::init("")};
  Option<bool> emulate{
      *this, "emulate",
      llvm::cl::desc("Run on the host instead, for testing: after "
                     "--convert-parallel-loops-to-gpu, --zb-emulate-gpu and "
                     "the CPU's lowering of loops (f32 only)"),
      llvm::cl::init(false)};
};

/// Builds `--zb-lower-to-gpu`: the shared bufferization, matmul-family ops
/// as cuBLAS calls through the runtime, every other linalg op a kernel
/// (tiled parallel loops, gpu.launch, outlined, NVVM, PTX and a cubin for
/// `chip`), buffers on the device, and host code calling the runtime's
/// CUDA wrappers (mgpu*) for module loading, launches, allocation and
/// copies, all on one compute stream.
/// What is wrong with `options` (an unknown format or chip; zb-map-to-gpu
/// checks the block size), empty when nothing is.
std::string lowerToGPUProblem(const LowerToGPUOptions &options);

void buildLowerToGPUPipeline(mlir::OpPassManager &pm,
                             const LowerToGPUOptions &options);

/// Options of the end-to-end pipeline.
struct ZBPipelineOptions : mlir::PassPipelineOptions<ZBPipelineOptions> {
  Option<int64_t> stages{*this, "stages", llvm::cl::desc("Pipeline ranks P"),
                         llvm::cl::init(1)};
  Option<int64_t> microbatches{*this, "microbatches",
                               llvm::cl::desc("Microbatches M per step"),
                               llvm::cl::init(1)};
  Option<std::string> schedule{*this, "schedule",
                               llvm::cl::desc("Schedule (see zb-sched --help)"),
                               llvm::cl::init("zb-h1")};
  Option<int64_t> chunks{
      *this, "chunks",
      llvm::cl::desc("Stages per rank V (default: the schedule's)"),
      llvm::cl::init(0)};
  Option<int64_t> replicas{
      *this, "replicas",
      llvm::cl::desc("Copies of the pipeline side by side (data "
                     "parallelism): gradients averaged over them"),
      llvm::cl::init(1)};
  Option<bool> forwardOnly{
      *this, "forward-only",
      llvm::cl::desc("Evaluate: every rank runs its stages' forwards only "
                     "(the schedule's F actions)"),
      llvm::cl::init(false)};
  Option<double> memLimit{
      *this, "mem-limit",
      llvm::cl::desc("Peak activation bytes per rank for memory-aware "
                     "schedules (0: the schedule's default)"),
      llvm::cl::init(0.0)};
  Option<std::string> costs{
      *this, "costs",
      llvm::cl::desc("Profile JSON with measured per-stage F/B/W times "
                     "(zb-run --profile) for the schedule; default: the "
                     "cost model's FLOPs")};
  Option<std::string> partitionProfile{
      *this, "partition-profile",
      llvm::cl::desc("Profile JSON of a finer partition of the model "
                     "(zb-run --balance): cut at the measured times "
                     "(--zb-partition-stages profile=), which the schedule "
                     "then plans with")};
  Option<bool> lowerToCPU{
      *this, "lower-to-cpu",
      llvm::cl::desc("Finish with the target's lowering (default true; "
                     "false stops at runtime calls on tensors)"),
      llvm::cl::init(true)};
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("Code for: cpu (--zb-lower-to-cpu, default) or gpu "
                     "(--zb-lower-to-gpu)"),
      llvm::cl::init("cpu")};
  Option<std::string> dtype{
      *this, "dtype",
      llvm::cl::desc("Precision: f32 (default) or bf16 (mixed: activation "
                     "stashes kept in bf16, f32 parameters, gradients and "
                     "arithmetic; with target=gpu the gemms also multiply in "
                     "bf16)"),
      llvm::cl::init("f32")};
  Option<bool> unroll{
      *this, "unroll",
      llvm::cl::desc("Step functions with every action inline "
                     "(--zb-lower-to-runtime=unroll=true) instead of a loop "
                     "over an action table (on the host for target=gpu)"),
      llvm::cl::init(false)};
  Option<std::string> optimizer{
      *this, "optimizer",
      llvm::cl::desc("Also compile each rank's optimizer update, "
                     "zb_rank<r>_update (--zb-emit-optimizer): sgd, "
                     "sgd-momentum or adamw; default none"),
      llvm::cl::init("")};
};

/// Builds `--zb-pipeline`: partition into stages (placement and chunks from
/// the schedule), autodiff, cleanup, B/W split, schedule, send/recv,
/// lowering of stages and rank programs, then the CPU lowering. Returns
/// failure (with a message in `error`) for an unknown schedule or layout.
mlir::LogicalResult buildZBPipeline(mlir::OpPassManager &pm,
                                    const ZBPipelineOptions &options,
                                    std::string &error);

/// Registers the ZeroBubble pass pipelines (`--zb-lower-to-cpu`,
/// `--zb-lower-to-gpu`, `--zb-pipeline`).
void registerZBPipelines();
/// Registers `--zb-lower-to-gpu` (called by registerZBPipelines()).
void registerZBGPUPipeline();

} // namespace zb

#endif // ZB_PIPELINES_PIPELINES_H
