//===- Passes.td - ZeroBubble conversion passes ------------*- tablegen -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_CONVERSION_PASSES_TD
#define ZB_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ZBLowerGemmToRuntime : Pass<"zb-lower-gemm-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower f32 and f64 matmul-family linalg ops on buffers to "
                "runtime gemm calls";
  let description = [{
    Rewrites every linalg op on memrefs that is a plain f32 or f64
    contraction (one element type throughout) with one M, one N, one K and
    at most one batch dimension (`linalg.matmul` with any operand
    transposition, `linalg.batch_matmul`, and equivalent `linalg.generic`
    ops) into a call of the runtime's `zbrt_sgemm_batched` (f64:
    `zbrt_dgemm_batched`), which runs the host BLAS. The op's body must be
    exactly `out + a * b`. Operands must have a unit innermost stride;
    their leading-dimension and batch strides are read at run time. The
    call accumulates into C (beta = 1), as the op does; where the op right
    before is a `linalg.fill` of zero into the same C (and C is not an
    input), the call overwrites C instead (beta = 0) and the fill goes.
    A grouped product (a mixture of experts' products,
    zb/Analysis/GroupedProduct.h) over four loops, row r, group e and two
    more, calls `zbrt_sgemm_grouped_rows` when C is (r, j) and A (r, p)
    times B (e, p, j) or (e, j, p), and `zbrt_sgemm_grouped_reduce` when C
    is (e, i, j) summing A (r, i) times B (r, j) (f64: `zbrt_dgemm_*`), the
    group index an i64 buffer; the same fill rule sets beta. Other linalg
    ops are left for loop lowering.

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

def ZBLowerTransposesToRuntime : Pass<"zb-lower-transposes-to-runtime",
                                      "mlir::ModuleOp"> {
  let summary = "Lower f32 copies that move the innermost dimension to "
                "runtime transposes";
  let description = [{
    Rewrites every f32 permutation copy on memrefs (a `linalg.transpose`, or
    an all-parallel `linalg.generic` with permutation maps whose body yields
    its one input) of rank 2 to 4, with static sizes and unit innermost
    strides, that moves the innermost dimension (the output's innermost
    dimension is not the input's) into a call of the runtime's
    `zbrt_transpose_f32`: a batch of up to two dimensions of 2-D transposes,
    which transposes 8 x 8 blocks in registers where loops would read one
    element at a time (attention's K^T, the transposed operands autodiff
    writes). Strides are read at run time. Copies that keep the innermost
    dimension in place are left to the loops, which copy rows.

    ```mlir
    linalg.transpose ins(%k : memref<4x64x4x64xf32>)
                     outs(%kt : memref<4x4x64x64xf32>) permutation = [0, 2, 3, 1]
    // becomes: for each of the 4 x 4 (batch, head), the 64 x 64 matrix of
    // rows (token) 256 apart transposed into rows (feature) 64 apart
    func.call @zbrt_transpose_f32(%c4, %c4, %c64, %c64, %pk, %s0, %s2, %s1,
        %pkt, %t0, %t1, %t2) : ...
    ```
  }];
  let dependentDialects = ["mlir::func::FuncDialect",
                           "mlir::LLVM::LLVMDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect"];
}

def ZBAccumulateInGemms : Pass<"zb-accumulate-in-gemms",
                                "mlir::func::FuncOp"> {
  let summary = "Let a GEMM add its product to a sum argument in place";
  let description = [{
    On tensors, before bufferization. Where a function adds `x` to one of
    its arguments in place (an elementwise `linalg.generic` with `x` as its
    input, the argument as its output and `out + in` as its body: the
    accumulating stage functions of `--zb-lower-to-runtime`'s loop form add
    a microbatch's weight gradients to the step's sums so), and `x` is a
    GEMM (as `--zb-lower-gemm-to-runtime` recognises one) or a grouped
    product (a mixture of experts' weight gradient, summed over each
    expert's rows) that starts from a zero `linalg.fill` and that nothing
    else reads, the GEMM starts from
    the argument instead and the addition goes. The runtime gemm then adds
    its products to the sum (beta = 1): no separate pass over the sum, no
    zeroed gradient buffer. The sum is the same, bit for bit, where the
    BLAS adds each element's whole k-sum to C at once (OpenBLAS does for k
    up to its block depth); otherwise it differs in rounding only.

    ```mlir
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
    %g = linalg.matmul ins(%a, %b : ...) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
    %s = linalg.generic {...} ins(%g : tensor<4x4xf32>) outs(%sum : tensor<4x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %r = arith.addf %out, %in : f32
      linalg.yield %r : f32
    } -> tensor<4x4xf32>
    // becomes
    %s = linalg.matmul ins(%a, %b : ...) outs(%sum : tensor<4x4xf32>) -> tensor<4x4xf32>
    ```
  }];
}

def ZBExpandBF16 : Pass<"zb-expand-bf16"> {
  let summary = "Lower f32<->bf16 conversions to integer arithmetic";
  let description = [{
    Rewrites each `arith.truncf` to bf16 (round to nearest even, NaN kept
    a NaN) and `arith.extf` from bf16 into shifts and adds on the bits
    (MLIR's bf16 expansion patterns), so that CPU code with bf16 stashes
    (`--zb-narrow-stash`) needs neither AVX512-BF16 nor a compiler runtime
    helper (`__truncsfbf2`) for them. Other ops are left alone.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def ZBApproximateMath : Pass<"zb-approximate-math"> {
  let summary = "Replace f32 math functions by inline polynomial "
                "approximations";
  let description = [{
    Rewrites the f32 (and vector of f32) `math` ops named by `ops` into
    plain arithmetic that LLVM inlines and vectorises, instead of one libm
    call per element (GELU's `math.erf` was the CPU forward's most expensive
    op). `math.erf` becomes x P(x^2) / Q(x^2) on x clamped to [-3.8, 3.8]
    (ten fused multiply-adds and a division; a vectorised GELU forward
    takes under half the time it took with MLIR's approximation, which
    picks coefficients per element from three intervals and stays for
    f16); the others become MLIR's polynomial approximations. f64 ops and
    ops not named stay and become libm calls (`--convert-math-to-libm`).
    erf is within 6 ulp of libm's (3.5e-7 absolute; checked on every f32
    in [0.5, 3.8], where the error peaks, and samples elsewhere); exp and
    log within 2 ulp where input and result are normal f32 numbers (MLIR's
    log takes a subnormal input as the smallest normal one); tanh (GELU's
    tanh form, GPT-2's) within 5 ulp; NaN stays NaN.
  }];
  let options = [
    ListOption<"ops", "ops", "std::string",
               "The math ops to approximate (default: erf, exp, log, tanh)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::math::MathDialect",
                           "mlir::vector::VectorDialect"];
}

def ZBSplitLongSums : Pass<"zb-split-long-sums"> {
  let summary = "Float sums of many elements in blocks, on buffers";
  let description = [{
    A loop that adds N floats into one accumulator rounds at every step,
    and where the terms are alike its rounding errors do not cancel: the
    mean of a million squared errors of about 0.7 comes out 0.6% low in
    f32. This pass cuts such sums into blocks of at most `chain` terms, sums
    each block into a buffer of partial sums, and adds those in order (again
    in blocks while there are more than `chain`), so that no accumulator
    adds more than `chain` terms.

    A `linalg.generic` on memrefs is rewritten when its one output holds
    floats of at most 32 bits, its body ends in an `arith.addf` of the
    output's block argument (which nothing else reads) yielded as it is,
    its loop ranges are static, and it adds more than `chain` terms into
    each output element (the product of its reduction loops' ranges). Its
    outermost reduction loop d of range r > 1 is cut into f blocks of w = r
    / f iterations (f the smallest divisor of r that leaves at most `chain`
    terms per block; r itself when r is too short for that, and another
    loop is cut next): a parallel loop j and a reduction loop i with d = j *
    w + i (the body's `linalg.index` renumbered alike); the op sums each
    block into a zeroed buffer [output..., f], and a second generic adds the
    f partial sums into the output in order. Where no divisor of r gives
    blocks that small (a prime r), the blocks are w = ceil(r / n) long (n
    the blocks wanted), f = floor(r / w) of them as above over a view of
    the first f * w iterations, and a copy of the op over the rest (a
    `memref.subview` of the inputs along d, the index counted from f * w)
    sums the shorter last block into partial sum f + 1. Both sums are
    rewritten again while longer than `chain`. Row reductions that
    --zb-vectorize-row-reductions turned into vector code (each lane its
    own accumulator) are no longer linalg ops and stay as they are. The order depends only on the op's shapes, so
    every rank and the unpartitioned model still compute a sum to the same
    bits.
  }];
  let options = [
    Option<"chain", "chain", "int64_t", "64",
           "The most terms one accumulator adds (at least 2)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::memref::MemRefDialect"];
}

def ZBOutlineLoopNests : Pass<"zb-outline-loop-nests", "mlir::ModuleOp"> {
  let summary = "Cut functions of many loops into functions of fewer";
  let description = [{
    LLVM's loop passes (IndVarSimplify, LoopRotate) take time that grows
    with the square of a function's loops: a model's gradient of 4400 loop
    nests on one process (a small MobileViT) spent 86 of its 118 s of
    optimisation in IndVarSimplify, where the forward's 1200 loops took 5 s
    in all. After the lowering to loops, this pass cuts each function with
    more than `loops` `scf.for` ops into parts: runs of consecutive
    top-level ops holding about `loops` loops each, each moved into a
    private function (`<name>_part<k>`, `passthrough = ["noinline"]`, so
    that LLVM's inliner does not join them again) and called where the run
    ended. The values a part reads from the function become its arguments
    (constants are cloned into it), and the values it defines that ops
    after it read, its results (a reduction's scalar, a view). The ops of a
    run that only allocate (`memref.alloc`, `memref.alloca`) or compute
    without effects on values from before the run stay in the function,
    before the call. What runs, and in which order, is unchanged.

    The parts cost some run time (the GPT example's weight gradient, 354
    loops, cut into two at `loops=256` trained 6% slower), so the default
    keeps functions of up to 512 loops whole; the small MobileViT's
    gradient of 4400 loops then takes 15 s to optimise instead of 118.
  }];
  let options = [
    Option<"loops", "loops", "int64_t", "512",
           "The most loops a function keeps (at least 1)">
  ];
  let dependentDialects = ["mlir::func::FuncDialect"];
}

def ZBVectorizeRowReductions : Pass<"zb-vectorize-row-reductions"> {
  let summary = "Vector code in a fixed order for row reductions on buffers";
  let description = [{
    A reduction along the rows' innermost dimension (LayerNorm's mean and
    variance, softmax's max and sum, cross-entropy's log-sum-exp, their
    gradients' sums) becomes a loop that adds every element into one
    accumulator. LLVM vectorises such a loop only if allowed to reorder the
    sum, and then the order follows its choices for each function: a
    pipeline stage and the whole model would round differently. This pass
    writes the vector code itself, in an order of its own.

    A `linalg.generic` on memrefs is rewritten when its only reduction
    dimension is its innermost loop, with a static size N that is a
    multiple of `width`; every operand is f32, and every input either reads
    the rows contiguously (the reduction dimension is its innermost index,
    and the buffer's innermost stride is 1) or not at all (a broadcast);
    its indexing maps are projected permutations; the body is elementwise
    `arith` and `math` ops ending in one combiner (`addf`, `mulf`,
    `maximumf`, `minimumf`, `maxnumf`, `minnumf`) of the output's block
    argument, which nothing else reads. Per output element:

    - lane l of a `vector<width x f32>` accumulator, starting at the
      combiner's neutral element, folds in the body's values at l,
      l + width, l + 2 width, ..., in that order;
    - the lanes are folded as a tree: the lower half with the upper half,
      down to one lane;
    - the output's value (the reduction's init) is folded with that last.

    Other linalg ops are left to `--convert-linalg-to-loops`. The order
    depends only on N and `width`, so every rank and the unpartitioned
    model compute a reduction of a given shape to the same bits.

    ```mlir
    linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                     affine_map<(i, j) -> (i)>],
                    iterator_types = ["parallel", "reduction"]}
        ins(%x : memref<4x64xf32>) outs(%sum : memref<4xf32>) {...}
    // becomes: scf.for %i { scf.for %j step 16 iter_args(vector<16xf32>)
    // { vector.load %x[%i, %j] ... arith.addf ... }; four halvings by
    // vector.extract_strided_slice; memref.store to %sum[%i] }
    ```
  }];
  let options = [
    Option<"width", "width", "int64_t", "16",
           "The accumulator's lanes, a power of two (16: a 512-bit vector "
           "of f32)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::vector::VectorDialect"];
}

def ZBUniqueResults : Pass<"zb-unique-results", "mlir::ModuleOp"> {
  let summary = "Return each value of a function once";
  let description = [{
    After bufferization two tensor results of a function may become the
    same buffer. For every private `func.func` whose `return` repeats a
    value, the repeats are dropped from the signature and every call's
    extra results replaced by the first one, so that results can become
    out-parameters. A public function keeps its signature: each repeat is
    returned as a copy of its own (a model's gradient function can return
    one value for two parameters, such as two biases whose gradients are
    the same sum). An optimizer update (`zb.optimizer`) returns its own
    arguments, updated in place: it stops returning anything (an error if
    a result is not an argument). So does a gradient function with
    `zb.grad_sums` = N for its last N results, each of which must be the
    matching one of its last N arguments. In every function, a buffer
    returned through a reshape (`memref.expand_shape` or
    `memref.collapse_shape` of a `memref.alloc`) is allocated in the
    returned shape instead, the reshape's inverse a view for its writers,
    so that it becomes an out-parameter without a copy.
  }];
}

def ZBDeallocateBuffers : Pass<"zb-deallocate-buffers", "mlir::ModuleOp"> {
  let summary = "Free every local allocation after its last use";
  let description = [{
    The buffer deallocation of the lowering pipelines, for the code they
    produce after bufferization and `--buffer-results-to-out-params`:
    functions that return no memrefs. For every `memref.alloc` the pass
    follows its aliases (every memref or tensor result of an op that uses
    an alias: views, casts, `bufferization.to_tensor`, ...) and inserts one
    `memref.dealloc` right after the last operation of the allocation's
    block that uses an alias (an operation with regions counts as a use when
    a use is inside them). Calls are taken not to capture their arguments,
    which holds for the functions the pipelines produce and the runtime's.

    Cost: linear in the number of uses. The upstream ownership-based
    pipeline handles arbitrary control flow, but its simplification pass is
    quadratic in the size of a function, which made large unrolled step
    functions take minutes to compile.

    An allocation with an alias that reaches a block terminator (returned,
    yielded or branched to another block) is an error naming the op.
    Allocations that the input already frees are left alone.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def ZBLowerRunningStats : Pass<"zb-lower-running-stats", "mlir::ModuleOp"> {
  let summary = "Running statistics to runtime calls";
  let description = [{
    Replaces each `pipe.running_stat %v {buffer = "name"}` by a call that
    hands the value to the runtime, which keeps one record per microbatch
    for the driver to fold into the buffer after the step:

    ```mlir
    %b = bufferization.to_buffer %v read_only : tensor<16xf32> to memref<16xf32, strided<[?], offset: ?>>
    %u = memref.cast %b : memref<16xf32, strided<[?], offset: ?>> to memref<*xf32>
    %n = memref.get_global @__zb_running_stat : memref<4xi8>   // "name"
    %s = memref.cast %n : memref<4xi8> to memref<*xi8>
    func.call @zbrt_record_stat_f32(%u, %s) : (memref<*xf32>, memref<*xi8>) -> ()
    ```

    The value's buffer goes to the runtime as it is (read only, so
    bufferization makes no copy). The name travels as bytes, so a rank's module
    (`--zb-keep-rank`) needs no numbering shared with the others. Runs
    before bufferization. With
    `target=gpu` a running statistic is an error: the GPU lowering does not
    support them yet.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu, or gpu (where running statistics are refused)">
  ];
  let dependentDialects = ["mlir::bufferization::BufferizationDialect",
                           "mlir::func::FuncDialect",
                           "mlir::LLVM::LLVMDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::tensor::TensorDialect"];
}

def ZBPrepareEntryPoints : Pass<"zb-prepare-entry-points", "mlir::ModuleOp"> {
  let summary = "Make public functions callable from the runtime";
  let description = [{
    For every public `func.func` with a body: marks its tensor arguments
    read-only for bufferization (`bufferization.writable = false`, so the
    compiled code never writes into the caller's parameters or data), and
    sets `llvm.emit_c_interface` so that the LLVM lowering emits
    `_mlir_ciface_<name>` taking memref descriptors by pointer: the entry
    the runtime and `zb-run` call. An optimizer update (`zb.optimizer`,
    `--zb-emit-optimizer`) keeps its arguments writable: it updates the
    parameters and state in place; so do a gradient function's sums
    (`zb.grad_sums`, `--zb-autodiff=accumulate=true`). Private functions
    with a body get internal linkage (`llvm.linkage`), so that LLVM can drop the memref
    descriptor fields their callers pass as constants or that they never
    read (a step function's calls of its stage functions carry thousands of
    scalars otherwise). Runs before bufferization.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def ZBLowerToRuntime : Pass<"zb-lower-to-runtime", "mlir::ModuleOp"> {
  let summary = "Stages to functions, rank programs to step functions";
  let description = [{
    Consumes the staged model function and its `sched.program` (with
    transfers, see `--zb-insert-comm`):

    - each stage region becomes a private function
      `@zb_stage<s>_forward(inputs, data, params) -> (results, stash)`,
      `@zb_stage<s>_backward_input(stash, cotangents) -> (d_inputs, w_stash)`,
      `@zb_stage<s>_backward_weight(w_stash) -> (d_params)` (or
      `@zb_stage<s>_backward` before the split);
    - each rank's program becomes a public function
      `@zb_rank<r>_step(params of rank r..., data...) -> (loss, grads...)`
      that runs one training step in the program's order: data arguments
      arrive stacked `[M][shape]` and are sliced per microbatch; forward
      stashes live from F to B and B→W stashes from B to W; the last
      stage's backward is seeded with 1/M, so the gradients and the
      returned loss are means; each microbatch's gradients are added to
      the running sums (how: below);
      `sched.send` and `sched.recv` become calls of the runtime's
      `zbrt_send_f32` / `zbrt_recv_f32` (`_f64`, `_i32`, `_i64`, `_i1` for
      values of those element types; tag = channel), except that no
      gradient of an integer input is sent or received: none flows
      through an integer (`autodiff::isDifferentiable`), and the stage
      before takes a zero tensor for it; every F, B, W and
      BW is bracketed by `zbrt_action_begin` / `zbrt_action_end` (phase,
      stage, microbatch), which the runtime records. Its attributes name
      the rank (`zb.rank`), its parameters (`zb.params`) and the
      microbatch count.

    How the step function runs the program's actions:

    - by default, as one `scf.for` over a table of the rank's actions (a
      private constant `memref.global @zb_rank<r>_actions`, one row per
      action: the action's template, its microbatch and the byte offsets
      of the values it reads and writes) whose body switches
      (`scf.index_switch`) to one case per distinct action: F, B, W or BW
      of a stage, a send or a receive. Every value that outlives its
      action (stashes, activations and gradients in flight, received
      payloads) lives in one arena per rank, `memref<Nxi8>` allocated once
      per step, at offsets planned at compile time from the program's order
      (best fit, freed after the value's last use): the step function's
      size grows with the number of distinct actions, not with the number
      of microbatches, and its stash memory is allocated once. The arena's
      size is the step function's `zb.arena_bytes`. The gradient sums and
      the loss sum are buffers zeroed at the start of the step. A W (or BW)
      calls the function's accumulating form,
      `@zb_stage<s>_backward_weight_acc(w_stash, sums...) -> (sums...)`
      (`_backward_acc(stash, cotangents, sums...) -> (d_inputs, sums...)`),
      which adds its gradients to the sums in place (the plain function,
      no longer called, goes), so that `--zb-accumulate-in-gemms` can let
      a weight's gemm add into its sum directly;
    - with `unroll`, every action inline in the program's order, each value
      an SSA value of its own, each microbatch's gradients added to the
      sums with one call of
      `@zb_stage<s>_add_grads(sums..., grads...) -> (sums...)`.

    The module attribute `zb.stages` records per stage its rank, the cost
    model's `cost_f/b/w` and the split's `mem_b/w` (0 where absent), which
    the runtime's measurements use. The model function and the program are
    removed; `--zb-lower-to-cpu` then compiles the module unchanged.
  }];
  let options = [
    Option<"unroll", "unroll", "bool", /*default=*/"false",
           "Emit every action inline instead of a loop over an action table">
  ];
  let dependentDialects = ["mlir::func::FuncDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::bufferization::BufferizationDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::tensor::TensorDialect"];
}

def ZBEmitOptimizer : Pass<"zb-emit-optimizer", "mlir::ModuleOp"> {
  let summary = "Emit each rank's optimizer update as compiled code";
  let description = [{
    After `--zb-lower-to-runtime`: for every step function
    `@zb_rank<r>_step` (a function with `zb.rank` and `zb.params`, whose
    first arguments are the parameters), adds the public function
    `@zb_rank<r>_update(params, grads, state..., hyper)` that applies the
    optimizer `kind` (sgd, sgd-momentum, adamw) to them in place: one
    `linalg.generic` per parameter, reading the gradient and the step's
    hyper-parameters (a `tensor<13xf64>`, layout in
    zb/Conversion/CompiledOptimizer.h) and writing the parameter and its
    state. The update is elementwise code like the model's, so the target's
    lowering places it: loops on the CPU, kernels on the GPU, where the
    parameters, gradient sums and state then never leave the device.

    Arithmetic in f64, rounded once to the parameter's type, in the order
    of the runtime's optimizer (zbrt::Optimizer), so that on the CPU both
    give the same bits. Parameters must be f32 or f64 tensors.

    Next to it, `@zb_rank<r>_grad_squares(grads) -> (tensor<f64>, ...)`:
    per gradient the sum of its squares in f64 (for an f32 gradient
    non-finite exactly when an element is), which the caller adds over the gradients that count in the
    global norm (the clipping and skipping check) without reading the
    gradients back from the device. Each sum is two row reductions (along
    the innermost dimension, then over the partial sums), so that the GPU
    runs them as block reductions.

    Example (`kind=sgd`, one parameter `tensor<4xf32>`):
    `func.func @zb_rank0_update(%p: tensor<4xf32>, %g: tensor<4xf32>,
    %h: tensor<13xf64>) -> tensor<4xf32>` with `zb.optimizer = "sgd"`,
    whose result bufferizes into `%p`.
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"sgd\"",
           "The update rule: sgd, sgd-momentum or adamw">,
  ];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::math::MathDialect",
                           "mlir::tensor::TensorDialect"];
}

def ZBKeepRank : Pass<"zb-keep-rank", "mlir::ModuleOp"> {
  let summary = "Keep one rank's step function and what it uses";
  let description = [{
    After `--zb-lower-to-runtime`: removes every `@zb_rank<r>_step` but
    rank `rank`'s, then every private function and global nothing left
    refers to (the other ranks' stage functions and action tables), so
    that each rank compiles only its own code (`zb-run --np` does, on every
    rank at once). An error if the module has no step function for `rank`.
  }];
  let options = [
    Option<"rank", "rank", "int64_t", /*default=*/"0", "The rank to keep">
  ];
}

def ZBResultsToSlots : Pass<"zb-results-to-slots", "mlir::ModuleOp"> {
  let summary = "Let calls write their results into the step's arena slots";
  let description = [{
    For the loop form of `--zb-lower-to-runtime`, after bufferization and
    `--buffer-results-to-out-params`: where a call fills an out-parameter
    buffer only for it to be copied into a `memref.view` of the arena
    marked `zb.out_slot` (a slot the lowering guarantees aliases no other
    operand of that call), the call writes into the view directly and the
    buffer and the copy go away (further copies of the same buffer then
    copy from that view). Copies of a buffer onto itself (what an in-place
    update such as the gradient sums leaves) are removed.
  }];
}

#endif // ZB_CONVERSION_PASSES_TD
