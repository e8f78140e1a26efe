//===- Transforms.h - ZeroBubble conversion entry points --------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The transformations behind the conversion passes, as functions, so that
// passes for different targets share them.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_CONVERSION_TRANSFORMS_H
#define ZB_CONVERSION_TRANSFORMS_H

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace zb {

/// The runtime's host BLAS gemms (`--zb-lower-gemm-to-runtime`), f32 and
/// f64.
inline constexpr llvm::StringLiteral kHostGemmFn = "zbrt_sgemm_batched";
inline constexpr llvm::StringLiteral kHostGemmF64Fn = "zbrt_dgemm_batched";
/// The host f32 gemm over some of each product's terms (a `zb.skip_terms`
/// contraction's).
inline constexpr llvm::StringLiteral kHostGemmTermsFn =
    "zbrt_sgemm_batched_terms";
/// The runtime's grouped products (a mixture of experts' layers), f32 and
/// f64: rows times their group's matrix, and each group's sum over its rows.
inline constexpr llvm::StringLiteral kHostGroupedRowsFn =
    "zbrt_sgemm_grouped_rows";
inline constexpr llvm::StringLiteral kHostGroupedRowsF64Fn =
    "zbrt_dgemm_grouped_rows";
inline constexpr llvm::StringLiteral kHostGroupedReduceFn =
    "zbrt_sgemm_grouped_reduce";
inline constexpr llvm::StringLiteral kHostGroupedReduceF64Fn =
    "zbrt_dgemm_grouped_reduce";
/// The runtime's cuBLAS gemms (`--zb-lower-gemm-to-cublas`): f32, and f32
/// storage with bf16 products accumulated in f32.
inline constexpr llvm::StringLiteral kGPUGemmFn = "zbrt_gpu_sgemm_batched";
inline constexpr llvm::StringLiteral kGPUGemmBF16Fn =
    "zbrt_gpu_sgemm_batched_bf16";
/// The host's counterpart of kGPUGemmBF16Fn (--zb-emulate-gpu).
inline constexpr llvm::StringLiteral kHostGemmBF16Fn =
    "zbrt_sgemm_batched_bf16";

/// Rewrites every linalg op on buffers in `module` that is a plain f32
/// (batched) GEMM into a call of `callee`, a function with the signature of
/// `zbrt_sgemm_batched` (zbrt.h), and with a non-empty `f64Callee` every f64
/// one into a call of it (the signature of `zbrt_dgemm_batched`), each
/// declared privately in `module` when needed. With a non-empty
/// `termsCallee` (the signature of `zbrt_sgemm_batched_terms`), an f32 GEMM
/// whose `zb.skip_terms` names terms the runtime can leave out calls that
/// instead. Other linalg ops are left alone. Returns the number of ops
/// rewritten.
unsigned lowerGemmsToCalls(mlir::ModuleOp module, llvm::StringRef callee,
                           llvm::StringRef f64Callee = {},
                           llvm::StringRef termsCallee = {});

/// Rewrites every grouped product on buffers in `module`
/// (zb/Analysis/GroupedProduct.h) whose operands the runtime takes (f32 or
/// f64 static row-major buffers, an i64 group index; A[r] times its group's
/// B into C[r], or each group's sum of A[r]^T B[r] into C[g]) into a call of
/// the runtime's grouped products (zbrt.h), declared privately in `module`
/// when needed. Returns the number of ops rewritten.
unsigned lowerGroupedProductsToCalls(mlir::ModuleOp module);

/// Whether `op`, on tensors or on buffers, has the shape of a plain f32 or
/// f64 (batched) GEMM: one m, n and k dimension, at most one batch dimension,
/// each operand stored [batch,] row-major or transposed, static shapes (the
/// buffers of `lowerGemmsToCalls` must also be unit-stride innermost).
bool isGemm(mlir::linalg::LinalgOp op);

/// The runtime transposing copy (`--zb-lower-transposes-to-runtime`).
inline constexpr llvm::StringLiteral kHostTransposeFn = "zbrt_transpose_f32";

/// Rewrites every f32 permutation copy on buffers in `module` (a
/// `linalg.transpose` or an all-parallel `linalg.generic` that yields its one
/// input) that moves the innermost dimension, of rank 2 to 4 with static
/// sizes and unit innermost strides, into a call of `zbrt_transpose_f32`
/// (zbrt.h), declared privately in `module` when needed. Returns the number
/// of ops rewritten.
unsigned lowerTransposesToCalls(mlir::ModuleOp module);

/// For a runtime call at `builder`'s insertion point: a pointer (an LLVM
/// pointer) to the first element of the buffer `memref` of `element`s, and
/// its strides in elements as i64 values, read from its descriptor.
std::pair<mlir::Value, llvm::SmallVector<mlir::Value>>
describeBuffer(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value memref,
               mlir::Type element);

/// Declares the runtime function `name` of `type` privately in `module` at
/// `builder`'s insertion point, unless `module` has it already; with
/// `cInterface`, compiled code calls it through `_mlir_ciface_<name>`
/// (memref arguments by descriptor pointer).
void declareRuntimeFunction(mlir::OpBuilder &builder, mlir::ModuleOp module,
                            llvm::StringRef name, mlir::FunctionType type,
                            bool cInterface);

} // namespace zb

#endif // ZB_CONVERSION_TRANSFORMS_H
