//===- CPUCompiler.h - Models to native shared objects ----------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_TARGET_CPUCOMPILER_H
#define ZB_TARGET_CPUCOMPILER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace zb {

/// The prefix of the packed entry point emitted for each public function:
/// `void zb_entry_<name>(void **args)`, where args[i] points to the memref
/// descriptor of the i-th argument of the bufferized function (results come
/// last, as out-parameters).
inline constexpr llvm::StringLiteral kEntryPrefix = "zb_entry_";

struct CPUCompileOptions {
  /// LLVM optimisation level, 0 to 3. 2: -O3 took 11-24% longer to
  /// compile the bench/ GPTs and their steps ran no faster (bench/README.md).
  unsigned optLevel = 2;
  /// Where the model's computation runs: "cpu" (--zb-lower-to-cpu) or "gpu"
  /// (--zb-lower-to-gpu: host code for this CPU launching kernels embedded
  /// for `gpuChip`; the shared object then needs libzbrt_cuda.so loaded
  /// with RTLD_GLOBAL, see zbrt::loadCUDARuntime()), or "gpu-emulated"
  /// (the GPU lowering run on the host, --zb-lower-to-gpu="emulate=true":
  /// for testing it without a GPU).
  std::string target = "cpu";
  /// The host CPU the code is for, as LLVM names it (x86-64-v3, znver4,
  /// ...); empty: this machine's CPU and features.
  std::string cpu;
  /// target=gpu: the GPU architecture and the matmul precision (f32, bf16).
  std::string gpuChip = "sm_90";
  std::string gpuDtype = "f32";
};

/// Registers the dialects, extensions and LLVM IR translations that
/// compiling a model needs.
void registerCPUCompilerDependencies(mlir::DialectRegistry &registry);

/// Why `cpu` names no CPU of this host's target (LLVM's names); empty when
/// it does or is empty (this machine's own).
std::string unknownTargetCPU(llvm::StringRef cpu);

/// Why this machine cannot run code compiled for the CPU `cpu` (as LLVM
/// names it): the instruction sets it implies that this machine's CPU
/// lacks. Empty when it can, when `cpu` is empty (this machine's own) or
/// unknown (unknownTargetCPU's to report).
std::string hostCannotRun(llvm::StringRef cpu);

/// A string naming the compiler and the host it targets: part of the key of
/// any cache of compiled objects.
std::string getCPUCompilerFingerprint(const CPUCompileOptions &options);

/// Lowers `module` in place with --zb-lower-to-cpu (or --zb-lower-to-gpu
/// for target "gpu"), translates it to LLVM
/// IR with a packed entry point per public function, optimises it for the
/// host CPU, and links a shared object at `outputPath` (written atomically).
/// Emits diagnostics on failure.
mlir::LogicalResult compileToSharedObject(mlir::ModuleOp module,
                                          llvm::StringRef outputPath,
                                          const CPUCompileOptions &options);

} // namespace zb

#endif // ZB_TARGET_CPUCOMPILER_H
