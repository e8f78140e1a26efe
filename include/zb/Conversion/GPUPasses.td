//===- GPUPasses.td - ZeroBubble GPU conversion passes -----*- tablegen -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_CONVERSION_GPUPASSES_TD
#define ZB_CONVERSION_GPUPASSES_TD

include "mlir/Pass/PassBase.td"

def ZBLowerGemmToCUBLAS : Pass<"zb-lower-gemm-to-cublas", "mlir::ModuleOp"> {
  let summary = "Lower f32 matmul-family linalg ops on device buffers to "
                "cuBLAS calls through the runtime";
  let description = [{
    The GPU counterpart of `--zb-lower-gemm-to-runtime`: the same ops are
    recognised (by the same code), f32 ones only (f64 products stay loops),
    and become calls of the runtime's
    `zbrt_gpu_sgemm_batched`, which runs cuBLAS on the compute stream, with
    the signature of `zbrt_sgemm_batched`. The operands are device pointers.
    A zero fill of C right before the op becomes beta = 0 the same way, so
    no fill kernel runs before the call.

    With `dtype=bf16` the callee is `zbrt_gpu_sgemm_batched_bf16`: the
    operands stay f32 in memory, the products use bf16 tensor cores and
    accumulate in f32 (cuBLAS `CUBLAS_COMPUTE_32F_FAST_16BF`).
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"f32\"",
           "Multiply in f32 or bf16 (accumulating in f32)">,
  ];
  let dependentDialects = ["mlir::func::FuncDialect",
                           "mlir::LLVM::LLVMDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect"];
}

def ZBMapToGPU : Pass<"zb-map-to-gpu", "mlir::ModuleOp"> {
  let summary = "Put buffers on the device and map linalg ops on buffers to "
                "GPU-mapped parallel loops, row-wise chains to one kernel";
  let description = [{
    Prepares bufferized host functions for `--convert-parallel-loops-to-gpu`
    so that every buffer lives on the device and all computation runs in
    kernels; the host only launches, allocates and copies:

    - `memref.alloc`/`memref.alloca` become `gpu.alloc` (an alloca is freed
      at the end of its block), `memref.dealloc` becomes `gpu.dealloc`, and
      a `memref.get_global` becomes a device buffer filled from the global
      by `gpu.memcpy` (freed at the end of its block), except one that only
      host code loads from (a step function's action table, read by its
      loop of calls): that stays in host memory;
    - `memref.copy` becomes `linalg.copy`, so that it runs as a kernel;
    - a linalg op (outside loops) with a run of two or more adjacent
      reduction loops (a loss's mean over [batch, tokens], a bias
      gradient's sum over them) that every operand reads as adjacent dims,
      in order, of a buffer that collapses without a copy, reduces one loop
      over the buffers collapsed along them (`memref.collapse_shape`), so
      that it takes one of the two forms below;
    - a linalg op that reduces its innermost loop, of 32 elements or more,
      into one output as `out = combine(out, element)` with `addf`, `mulf`,
      or a float max or min (a softmax's row maximum and sum, a norm's
      statistics, a loss's log-sum-exp) becomes a `gpu.launch` with a
      block per row (its parallel loops, delinearised row-major) and up to
      `block-size` threads that each combine a strided share of the row,
      then a tree over the block (`gpu.all_reduce`, see
      `--zb-lower-all-reduce`), combined with the output's initial value.
      The row-wise linalg ops around it in the same block join that kernel
      (a row kernel), so that a softmax, a LayerNorm forward or backward,
      or a loss is one kernel: ops over the same rows with at most one
      more loop, no longer than the reduction's (fills of a row's
      statistic run in thread 0; elementwise ops stride their threads
      over the row; other reductions as above), with a barrier between
      two. An op joins only while every buffer the kernel writes is
      accessed, by all its ops, through one value at the row's own
      elements, so that blocks never share data; only views, constants,
      allocations and frees may lie between its ops (the frees move after
      the kernel). A reduction into one element runs alone;
    - a linalg op that reduces one other loop (not the innermost), of 128
      elements or more, the same way into fewer output elements than 64
      blocks hold threads, directly in the function's body (a bias
      gradient: the sum over the rows), runs as two kernels: chunks of
      max(64, sqrt(length)) rows fold into a device buffer of partial
      results, a thread per chunk and output element, then a thread per
      output element folds the output's initial value and its chunks in
      order;
    - every other linalg op becomes loops: its parallel dimensions one
      `scf.parallel`, its reductions sequential `scf.for` loops inside (an
      op without parallel dimensions gets a one-iteration `scf.parallel`);
    - an outermost host-level `scf.for` that loads or stores buffers and
      holds only scalar arithmetic, math and structured control flow (the
      scatter-add of a gather's gradient: sequential, since indices may
      repeat) runs in one GPU thread, wrapped in a one-iteration
      `scf.parallel`;
    - each outermost `scf.parallel` is collapsed to one dimension and tiled
      by `block-size`, then mapped: tiles to blocks, iterations of a tile
      to threads (`gpu.loop_dim_map` attributes).

    Run after bufferization, `--zb-deallocate-buffers` and
    `--zb-lower-gemm-to-cublas`. Elementwise chains are fused on tensors
    before (`--zb-fuse-elementwise`), so one fused `linalg.generic` is one
    kernel. A host-level `memref.load` or `memref.store` of device memory
    (which the host cannot read) is an error that names the op.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::affine::AffineDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect"];
}

def ZBLowerAllReduce : Pass<"zb-lower-all-reduce", "mlir::gpu::GPUModuleOp"> {
  let summary = "Lower gpu.all_reduce in outlined kernels to warp shuffles";
  let description = [{
    Rewrites each `gpu.all_reduce` of a kernel (a block's tree reduction,
    from a row reduction `--zb-map-to-gpu` gave a block per row) into
    warp shuffles and a shared-memory exchange between warps (upstream's
    all-reduce patterns), ready for `--convert-gpu-to-nvvm`. Runs on the
    outlined `gpu.module`s.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::cf::ControlFlowDialect",
                           "mlir::memref::MemRefDialect"];
}

def ZBEmulateGPU : Pass<"zb-emulate-gpu", "mlir::ModuleOp"> {
  let summary = "Run the GPU lowering's code on the host: kernels as loops, "
                "device buffers and cuBLAS as the host's (for testing)";
  let description = [{
    Turns the kernels of the GPU lowering, before outlining, into host code
    that computes the same, so that the GPU lowering can be run and
    checked on a machine without a GPU (`--zb-lower-to-gpu="emulate=true"`
    runs it after `--convert-parallel-loops-to-gpu`, then the CPU's
    lowering of loops):

    - each `gpu.launch` becomes loops over its blocks; its body is cut at
      its top-level `gpu.barrier` and `gpu.all_reduce` ops into phases, and
      each phase runs every thread of the block, one after the other,
      before the next phase starts, as the barriers guarantee. A
      `gpu.all_reduce` stores each thread's value, then folds them in
      thread order with its region. A value a later phase uses is
      recomputed there when its op has no memory effects; otherwise (or
      for a barrier or a reduction not at the body's top level, or one
      with an `op` attribute instead of a region) the pass fails and names
      the op. Threads of one phase run in order, so a race between them
      goes unseen, and so does a block reading what an earlier block
      wrote (blocks run in order): this checks what a kernel computes, not
      that its barriers suffice or that its blocks are independent. Mapped
      `scf.parallel` loops not yet launches stay plain loops. A launch
      body of more than one block, or GPU ops in it other than barriers
      and reductions, are errors;
    - `gpu.alloc`, `gpu.dealloc` and `gpu.memcpy` become `memref.alloc`,
      `memref.dealloc` and `memref.copy`; a new float buffer is filled with
      NaN (a `linalg.fill`), as device memory holds garbage, so that code
      reading what it never wrote shows;
    - calls of the runtime's cuBLAS gemms call their host counterparts,
      of the same signatures: `zbrt_gpu_sgemm_batched` the host BLAS gemm
      `zbrt_sgemm_batched`, and the bf16 one (`_bf16`: bf16 products
      accumulated in f32) `zbrt_sgemm_batched_bf16`, which rounds its
      inputs to bf16 and multiplies them in f32.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::scf::SCFDialect"];
}

#endif // ZB_CONVERSION_GPUPASSES_TD
