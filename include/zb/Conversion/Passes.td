//===- Passes.td - ZeroBubble conversion passes ------------*- tablegen -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_CONVERSION_PASSES_TD
#define ZB_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ZBLowerGemmToRuntime : Pass<"zb-lower-gemm-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower f32 matmul-family linalg ops on buffers to runtime gemm calls";
  let description = [{
    Rewrites every linalg op on memrefs that is a plain f32 contraction with
    one M, one N, one K and at most one batch dimension (`linalg.matmul` with
    any operand transposition, `linalg.batch_matmul`, and equivalent
    `linalg.generic` ops) into a call of the runtime's
    `zbrt_sgemm_batched`, which runs the host BLAS. Operands must have a
    unit innermost stride; their leading-dimension and batch strides are
    read at run time. Other linalg ops are left for loop lowering.

    ```mlir
    linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>)
                  outs(%c : memref<8x32xf32>)
    // becomes
    func.call @zbrt_sgemm_batched(%c0_i32, %c0_i32, %c1, %c8, %c32, %c16,
        %one, %pa, %lda, %c0, %pb, %ldb, %c0, %one, %pc, %ldc, %c0) : ...
    ```
  }];
  let dependentDialects = ["mlir::func::FuncDialect",
                           "mlir::LLVM::LLVMDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect"];
}

def ZBPrepareEntryPoints : Pass<"zb-prepare-entry-points", "mlir::ModuleOp"> {
  let summary = "Make public functions callable from the runtime";
  let description = [{
    For every public `func.func` with a body: marks its tensor arguments
    read-only for bufferization (`bufferization.writable = false`, so the
    compiled code never writes into the caller's parameters or data), and
    sets `llvm.emit_c_interface` so that the LLVM lowering emits
    `_mlir_ciface_<name>` taking memref descriptors by pointer: the entry
    the runtime and `zb-run` call. Runs before bufferization.
  }];
}

#endif // ZB_CONVERSION_PASSES_TD
