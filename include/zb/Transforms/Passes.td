//===- Passes.td - ZeroBubble passes -----------------------*- tablegen -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_TRANSFORMS_PASSES_TD
#define ZB_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ZBStripCuts : Pass<"zb-strip-cuts"> {
  let summary = "Replace pipe.cut markers by their operands";
  let description = [{
    Removes the stage-boundary markers a frontend placed, forwarding each
    marker's operand to its uses. The result is the unpartitioned model that
    runs on one process: the ground truth a pipelined run is compared with.

    ```mlir
    %h = pipe.cut %x : tensor<4x16xf32>
    %y = arith.addf %h, %h : tensor<4x16xf32>
    // becomes
    %y = arith.addf %x, %x : tensor<4x16xf32>
    ```
  }];
  let dependentDialects = [];
}

def ZBFuseElementwise : Pass<"zb-fuse-elementwise"> {
  let summary = "Fuse producer-consumer chains of elementwise linalg ops";
  let description = [{
    Fuses each `linalg.generic` producer whose only user is another
    elementwise `linalg.generic` into that user, so a chain such as
    bias-add, activation and scaling becomes one loop nest. An elementwise
    generic that reads or writes through a `tensor.expand_shape` /
    `tensor.collapse_shape` takes the other side's shape (upstream's
    folding of reshapes by collapsing) when it writes a fresh tensor, so
    that the chain fuses across the reshape: a bias add on a gemm's (token,
    feature) rows and the residual add after it on (batch, token,
    feature) become one loop nest on the rows. Unlike upstream
    `--linalg-fuse-elementwise-ops` it does not propagate reshapes into
    contractions, nor into an op that updates an argument in place (a
    gradient sum, which must keep its argument's shape to stay in place),
    nor into an op that reads its positions (`linalg.index`: a
    convolution's patches, whose collapsed loops would recover each
    position with divisions and remainders per element), and fuses nothing into a matrix product
    written as a `linalg.generic` (`out + a * b` of two inputs over a
    reduction both index, each with a parallel loop of its own, once the
    bodies are folded: autodiff's weight gradients): not a bf16 stash
    widened back to f32, not a ReLU's derivative that no input gradient
    needs materialised. Matmul-family ops keep their form and still lower
    to the runtime's gemm.

    A narrowing copy (all loops parallel, identity maps, one
    `arith.truncf`: `--zb-narrow-stash`'s bf16 stash) of an all-parallel
    producer's result (a generic, or a named op such as a transpose, then
    generalised) joins the producer even though other ops read that
    result: the copy
    moves right after the producer and the fused op writes both the f32
    value, which the other readers take, and its bf16 copy. The stash is
    then written where its value is computed instead of by a copy that
    reads it back at the end of the forward.

    Likewise an all-parallel generic whose result the function returns (a
    forward's stash) and one all-parallel generic writing a fresh tensor
    reads (the bias add before GELU) joins that reader, which then writes
    both: the stashed value is not read back from memory to compute the
    next one.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def ZBMarkTriangularProducts : Pass<"zb-mark-triangular-products",
                                    "mlir::ModuleOp"> {
  let summary = "Mark matrix products half of whose terms a causal mask "
                "makes unneeded";
  let description = [{
    Causal attention multiplies matrices that are zero above the diagonal
    (the softmax of scores masked to -inf there, and the gradient of the
    scores, masked to zero), and its score products feed only the mask,
    which overwrites their upper half. This pass finds such contractions
    and gives each a `zb.skip_terms = array<i64: r, c>` attribute, `r` and
    `c` two of its loop dimensions: every term at an iteration point where
    loop `c` exceeds loop `r` either vanishes (an operand indexed by
    `(r, c)` is zero there) or lands in a result element nothing reads.
    `--zb-lower-gemm-to-runtime` then skips those terms (attention's six
    products at context T do about half their work).

    What is zero, -inf or unread above the diagonal (an operand's last two
    dimensions, indexed by two loops) follows values through
    `linalg.softmax` over the last dimension, elementwise `linalg.generic`
    bodies (`arith.select` on a constant `i1` mask that is uniform above
    the diagonal or on a comparison of the two loop indices, products with
    zero, `math.exp` of -inf, ...), reshapes that keep the last two
    dimensions, stage markers, and a `pipe.stage`'s regions (an input from
    the previous stage's forward, the F→B and B→W stashes, a result's
    gradient from the next stage's backward). The reasoning takes the
    model's values to be finite (`0 * x = 0`) except where it sees -inf
    flow from a mask, and an unread element replaced by a finite value to
    stay finite only through additions, products, selections and the like
    (not through a division or a logarithm). Skipped terms that vanish are
    exact zeros, so those results do not change; unread elements may hold
    anything finite.

    Only f32 products are marked (the runtime's f32 gemm is what skips
    terms). Every stage that has costs gets its `cost_f`, `cost_b` and
    `cost_w` recorded again, a marked product counting the terms of the
    exact triangle (the gemm kernel skips whole register blocks, so it
    computes somewhat more), so that the schedule plans with the work the
    stage does.

    Runs on the staged model after `--zb-split-backward` (`zb-pipeline`
    does for `target=cpu`; cuBLAS computes every term), or on a plain
    function after `--zb-autodiff`.
  }];
  let dependentDialects = [];
}

def ZBUniqueFills : Pass<"zb-unique-fills"> {
  let summary = "Give each destination use of a shared linalg.fill its own "
                "fill";
  let description = [{
    CSE merges identical fills on tensors (the zeros every reduction and
    matmul accumulates into) into one value that many ops then write
    into. Bufferization must then copy the filled buffer once per writer.
    This pass clones the fill, and its `tensor.empty` destination, right
    before each op that uses the fill's result as a destination (a DPS
    init), so that each writer fills a buffer of its own in place: a write
    instead of an allocation, a read and a write. Other uses (inputs,
    returned values) keep the original fill, which goes when none is
    left. A fill with a single writer thus moves right before it, where
    the gemm lowering folds a zero fill into the product (beta = 0).

    ```mlir
    %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    %a = linalg.reduce ins(%x : tensor<4x8xf32>) outs(%z : tensor<4xf32>) ...
    %b = linalg.reduce ins(%y : tensor<4x8xf32>) outs(%z : tensor<4xf32>) ...
    // becomes: %a and %b each reduce into a fill of their own
    ```
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def ZBDecomposeAggregates : Pass<"zb-decompose-aggregates"> {
  let summary = "Decompose aggregate linalg ops such as linalg.softmax";
  let description = [{
    Replaces every op implementing `linalg::AggregatedOpInterface`
    (`linalg.softmax`) by the simpler linalg ops it stands for (max
    reduction, exp of the difference, sum reduction, division), which the
    rest of the CPU pipeline lowers.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect",
                           "mlir::tensor::TensorDialect"];
}

def ZBExpandGroupedProducts : Pass<"zb-expand-grouped-products"> {
  let summary = "Rewrite grouped products as products over every group";
  let description = [{
    For a target without a grouped gemm (the GPU): rewrites every grouped
    product on tensors (zb/Analysis/GroupedProduct.h) of a mixture of
    experts' forward form, rows r times their group's matrix,
    `y[r, n] = init + sum over e, k of (g[r] == e ? x[r, k] * w[e, k, n] : 0)`
    (w also as [e, n, k]), into x broadcast over the groups, one batched
    product per group `t[e, r, n] = x[r, :] w[e]` (a gemm the target's
    library runs, cuBLAS's strided batches), and the pick of each row's own
    group, `y[r, n] = init + sum over e of (g[r] == e ? t[e, r, n] : 0)`.
    It costs groups times the grouped product's FLOPs and a
    [groups, rows, n] tensor; its gradients are batched gemms and sums
    again. Runs before autodiff and the partition, so that both see what
    the target computes. Other grouped products are left alone.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::tensor::TensorDialect"];
}

def ZBAutodiff : Pass<"zb-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode automatic differentiation on tensors";
  let description = [{
    Derives backward computations with the ops' GradientOpInterface rules
    (linalg structured ops through their generic form, softmax, tensor
    reshapes and slices, embedding lookups inside linalg.generic bodies as
    scatter-adds). Activity analysis skips everything that does not lie
    between a differentiated input and the loss: data arguments and integer
    computations (masks, indices) get no gradient work.

    - Every `pipe.stage` without a backward gets a `backward` region: its
      arguments are the forward stash (the forward values the backward
      reads, now yielded by the forward as `stash(...)`; constants and
      `tensor.empty` are rematerialised instead) and one cotangent per
      result; it yields the gradients of the stage's `inputs`, then of its
      `params`. The backward is folded before the stash is chosen (bodies,
      operands a body no longer reads, ops that only pass an operand on),
      so that a value only a folded-away term read, such as the product a
      bias was added to, is not stashed. The stage gets `cost_f`, `cost_b`
      (FLOPs) and `mem_b` (stash bytes, parameters excluded).
    - A public function without stages that returns the scalar loss gets a
      companion `@<name>_grad` (attribute `zb.gradient_of`) returning the
      loss and the gradient of every `{zb.param}` argument, in order.
      With `accumulate`, the companion is `@<name>_grad_acc(args...,
      sums...) -> (loss, sums...)` instead: one sum per parameter, each
      returned with its gradient added, computed into the sum (the function
      is marked `zb.grad_sums`, so that after bufferization it updates the
      caller's buffers in place, and
      --zb-accumulate-in-gemms lets the gemm computing a weight gradient add
      into the sum itself). A caller summing the gradients of several
      microbatches then needs no addition of its own, and adds them as a
      pipelined step does.

    An op without a rule is an error naming the op and the value whose
    gradient needed it.
  }];
  let options = [
    Option<"accumulate", "accumulate", "bool", /*default=*/"false",
           "Give a function without stages `@<name>_grad_acc`, which adds "
           "the gradients into sums it takes, instead of `@<name>_grad`">,
  ];
  let dependentDialects = ["zb::ZBDialect", "mlir::linalg::LinalgDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::tensor::TensorDialect",
                           "zb::pipe::PipeDialect"];
}

def ZBSplitBackward : Pass<"zb-split-backward", "mlir::ModuleOp"> {
  let summary = "Split each stage's backward into B (input grad) and W";
  let description = [{
    For every `pipe.stage` with a `backward` region: B (`backward_input`)
    is the ops the input gradients depend on; W (`backward_weight`) is the
    ops only the weight gradients need. Values B computes (or receives) that
    W reads become the B→W stash: B yields them as `stash(...)` and they are
    W's block arguments. A first stage (no inputs) gets an empty B that only
    hands its arguments on. The stage's `cost_f`, `cost_b`, `cost_w` (FLOPs)
    and `mem_b`, `mem_w` (bytes of the two stashes, parameters excluded) are
    set for the scheduler. B followed by W computes exactly what the
    unsplit backward computed.
  }];
}

def ZBNarrowStash : Pass<"zb-narrow-stash", "mlir::ModuleOp"> {
  let summary = "Keep the stages' stashes in a narrower float type (bf16)";
  let description = [{
    Mixed precision for what a stage holds between its actions: every f32
    tensor of a `pipe.stage`'s forward stash (F→B) and of its B→W stash is
    rounded to `dtype` (to nearest even) where it is stashed and widened
    back to f32 where the backward reads it. Parameters, data and
    non-f32 values stay as they are, and so does all arithmetic: the
    forward, the gradients and their sums run in f32 on f32 parameters;
    the backward computes from the rounded activations. `mem_b` and
    `mem_w` are recomputed, so the schedule plans with the smaller stash
    (half the bytes for bf16). Run after `--zb-split-backward` (an unsplit
    `backward` is handled too).

    Example (`dtype=bf16`): `pipe.yield %r stash(%a : tensor<4x8xf32>)`
    becomes a `linalg.generic` of `arith.truncf` to `tensor<4x8xbf16>`
    stashed instead, and the backward's block argument becomes
    `tensor<4x8xbf16>` with an `arith.extf` generic at the region's start.
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"bf16\"",
           "Stash element type (bf16)">,
  ];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::tensor::TensorDialect"];
}

def ZBPartitionStages : Pass<"zb-partition-stages", "mlir::ModuleOp"> {
  let summary = "Cut the model's forward into pipeline stages";
  let description = [{
    Rewrites the model function (the public function of the model
    convention) into a chain of `pipe.stage` ops, `stages` × `chunks` of
    them, placed on `stages` ranks.

    - With `pipe.cut` markers, the cuts are exactly there: the function must
      hold stages × chunks − 1 markers (an op belongs to the stage given by
      the number of markers it depends on). With
      `ignore-mismatched-cuts` (as `--zb-pipeline` and `zb-run` run it),
      markers that do not make that many stages are removed with a warning
      and the cost model cuts instead.
    - Without markers, a cost model (FLOPs per op, see CostModel.h) and a
      dynamic program over the valid cut points (positions in program order
      where at most three tensors are live across the boundary: the
      activation and a residual, or inside an attention the residual, the
      normalised input and a projection of it, not a fan of intermediates)
      minimise the most expensive stage; ties go to the smaller transfer
      plus the bytes of the parameters a cut makes shared.

    Values crossing a boundary become the stage's `inputs` and the previous
    stage's results (values skipping a stage are handed through it);
    parameters go to the stages that use them (a parameter used by two
    stages, such as a tied embedding, is a parameter of both, and the
    schedule sums its gradient over the ranks holding it, see
    `sched.allreduce`; one that no operation reads is a parameter of
    stage 0, whose rank trains, writes and restores it as the whole model
    on one process does); data arguments are `data` of every stage that
    reads them; constants and `tensor.empty` are recreated where used.
    - With `profile`, the measured F/B/W milliseconds of each stage of
      another partition of the same model into N stages (what `zb-run
      --profile` writes; `zb-run --balance` measures one with up to N =
      4·P·V stages round the ranks): the pass redoes that partition (the rule above for N
      stages), gives each op its stage's measured time in proportion to
      the op's FLOPs, and cuts by the same dynamic program on those times
      instead of the FLOPs, ignoring markers. With `schedule` (and
      `microbatches`), the cuts then move, one cut point at a time, while
      that schedule, simulated on those times, ends sooner: the program
      evens out each stage's total, but the schedule's makespan also
      depends on where the F, B and W times lie (the first stage's F
      delays every other rank; a stage whose input needs no gradient has
      no B). Each stage records its
      measured share as `time_f`/`time_b`/`time_w`, which `--zb-schedule`
      plans with.

    Placement `loop` puts stage s on rank s mod P; `v` (two chunks) puts
    stages r and 2P−1−r on rank r.
  }];
  let options = [
    Option<"numStages", "stages", "int64_t", "1",
           "Pipeline ranks P">,
    Option<"numChunks", "chunks", "int64_t", "1",
           "Stages per rank V (P·V stages in all)">,
    Option<"placement", "placement", "std::string", "\"loop\"",
           "Stage placement: loop (interleaved) or v">,
    Option<"ignoreMismatchedCuts", "ignore-mismatched-cuts", "bool", "false",
           "Markers that do not make stages × chunks stages: warn and cut "
           "by the cost model (default: an error)">,
    Option<"profile", "profile", "std::string", "\"\"",
           "Cut by the measured stage times of this profile of an N-stage "
           "partition of the model (JSON, zb-run --profile)">,
    Option<"scheduleName", "schedule", "std::string", "\"\"",
           "With profile: move the cuts while this schedule (see zb-sched), "
           "simulated on the measured times, ends sooner">,
    Option<"numMicrobatches", "microbatches", "int64_t", "1",
           "With schedule: microbatches M per step">
  ];
  let dependentDialects = ["zb::pipe::PipeDialect"];
}

#endif // ZB_TRANSFORMS_PASSES_TD
