//===- PipeOps.td - The pipe dialect operations ------------*- tablegen -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_PIPE_PIPEOPS_TD
#define ZB_DIALECT_PIPE_PIPEOPS_TD

include "zb/Dialect/Pipe/PipeDialect.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// CutOp
//===----------------------------------------------------------------------===//

def Pipe_CutOp : Pipe_Op<"cut", [Pure, SameOperandsAndResultType]> {
  let summary = "Stage boundary marker";
  let description = [{
    An identity on its operand that marks the end of a pipeline stage: the
    value is the activation sent to the next stage. A frontend places these
    markers in the forward computation; `--zb-partition-stages` cuts there.
    In a backward computation written by a frontend, the same marker with
    the `adjoint` flag marks where the gradient crosses the stage boundary.

    Example:

    ```mlir
    %h = pipe.cut %x : tensor<4x16xf32>
    %g = pipe.cut %dx adjoint : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, UnitAttr:$adjoint);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input (`adjoint` $adjoint^)? attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// StageOp
//===----------------------------------------------------------------------===//

def Pipe_StageOp : Pipe_Op<"stage", [IsolatedFromAbove, AttrSizedOperandSegments]> {
  let summary = "One pipeline stage: forward, and backward or its B/W split";
  let description = [{
    A pipeline stage placed on a rank. Operands are the stage's `inputs`
    (activations from the previous stage; differentiable), its `data`
    (microbatch data such as token ids or targets; not differentiated) and
    its `params` (weights). The results are the activations handed to the
    next stage, or the scalar loss for the last stage.

    Regions and their signatures, with `S` the forward stash and `WS` the
    B→W stash:

    - `forward(inputs..., data..., params...)` yields `results...` and
      `stash(S...)`;
    - `backward(S..., d_results...)` yields `d_inputs..., d_params...`;
    - after the split, `backward_input(S..., d_results...)` (B) yields
      `d_inputs...` and `stash(WS...)`, and `backward_weight(WS...)` (W)
      yields `d_params...`.

    A stage has either no backward, a `backward` region, or both split
    regions.

    Optional attributes carry what the scheduler needs, per microbatch:
    `cost_f`, `cost_b`, `cost_w` are the FLOPs of the forward, of B (of the
    whole backward before the split) and of W; `mem_b` is the bytes of the
    forward stash (held from F until B) and `mem_w` the bytes of the B→W
    stash (held from B until W). `time_f`, `time_b` and `time_w` are
    measured milliseconds per microbatch, set when the partition was made
    from a profile (`--zb-partition-stages profile=...`); the schedule plans
    with them in preference to the FLOPs. The regions are isolated from above: everything they use is a
    block argument or defined inside.

    Example:

    ```mlir
    %y = pipe.stage 0 on rank 0 inputs(%x : tensor<4x8xf32>)
           params(%w : tensor<8x8xf32>) -> tensor<4x8xf32>
      forward {
      ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>):
        ...
        pipe.yield %r : tensor<4x8xf32> stash(%a : tensor<4x8xf32>)
      }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs,
                   Variadic<AnyRankedTensor>:$data,
                   Variadic<AnyRankedTensor>:$params,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$stage,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$rank,
                   OptionalAttr<F64Attr>:$cost_f,
                   OptionalAttr<F64Attr>:$cost_b,
                   OptionalAttr<F64Attr>:$cost_w,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$mem_b,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$mem_w,
                   OptionalAttr<F64Attr>:$time_f,
                   OptionalAttr<F64Attr>:$time_b,
                   OptionalAttr<F64Attr>:$time_w);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$forward, AnyRegion:$backward,
                 AnyRegion:$backward_input, AnyRegion:$backward_weight);
  let assemblyFormat = [{
    $stage `on` `rank` $rank
    (`inputs` `(` $inputs^ `:` type($inputs) `)`)?
    (`data` `(` $data^ `:` type($data) `)`)?
    (`params` `(` $params^ `:` type($params) `)`)?
    (`->` type($results)^)? attr-dict-with-keyword
    `forward` $forward
    (`backward` $backward^)?
    (`backward_input` $backward_input^)?
    (`backward_weight` $backward_weight^)?
  }];
  let builders = [
    OpBuilder<(ins "mlir::TypeRange":$results, "mlir::ValueRange":$inputs,
                   "mlir::ValueRange":$data, "mlir::ValueRange":$params,
                   "int64_t":$stage, "int64_t":$rank), [{
      build($_builder, $_state, results, inputs, data, params,
            $_builder.getI64IntegerAttr(stage),
            $_builder.getI64IntegerAttr(rank), /*cost_f=*/nullptr,
            /*cost_b=*/nullptr, /*cost_w=*/nullptr, /*mem_b=*/nullptr,
            /*mem_w=*/nullptr, /*time_f=*/nullptr, /*time_b=*/nullptr,
            /*time_w=*/nullptr);
    }]>
  ];
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The terminator of the forward region.
    YieldOp getForwardYield();
    /// Whether the backward has been split into B and W regions.
    bool isSplit() { return !getBackwardInput().empty(); }
    /// Whether the stage has any backward computation.
    bool hasBackward() { return !getBackward().empty() || isSplit(); }
  }];
}

//===----------------------------------------------------------------------===//
// YieldOp
//===----------------------------------------------------------------------===//

def Pipe_YieldOp : Pipe_Op<"yield", [Pure, Terminator, ReturnLike,
    HasParent<"StageOp">, AttrSizedOperandSegments]> {
  let summary = "Terminator of a stage region, with its explicit stash";
  let description = [{
    Ends a `pipe.stage` region. `values` are the region's results (see
    `pipe.stage` for what each region yields); `stash` are the values the
    region hands to the next region of the same stage: the forward's
    activations kept for the backward, or B's values kept for W.

    ```mlir
    pipe.yield %y : tensor<4x8xf32> stash(%a, %m : tensor<4x8xf32>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values, Variadic<AnyType>:$stash);
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, mlir::ValueRange(), mlir::ValueRange()); }]>];
  let assemblyFormat = [{
    ($values^ `:` type($values))?
    (`stash` `(` $stash^ `:` type($stash) `)`)? attr-dict
  }];
}

//===----------------------------------------------------------------------===//
// RunningStatOp
//===----------------------------------------------------------------------===//

def Pipe_RunningStatOp : Pipe_Op<"running_stat"> {
  let summary = "A statistic of the forward kept as a running average";
  let description = [{
    Records `value`, computed by the forward of one microbatch, into the
    running average `buffer`: a model buffer that is not a parameter
    and takes no gradient, such as a batch norm's `running_mean` and
    `running_var` in training mode. After each training step the buffer
    becomes `(1 - momentum) * buffer + momentum * value` once per
    microbatch, in microbatch order (what PyTorch does when the microbatches
    run one after the other); it starts from `init` in every element unless
    the parameters file gives it. zb-run saves the buffers with the
    parameters (`--dump-params`, checkpoints).

    The op reads its operand and has no results; nothing in the forward
    reads the buffer, so the loss and the gradients do not depend on it.
    Partitioning keeps it in the stage of its operand, autodiff ignores it,
    and the CPU lowering turns it into a runtime call
    (`--zb-lower-running-stats`).

    ```mlir
    pipe.running_stat %mean {buffer = "bn1.running_mean", momentum = 1.000000e-01 : f64} : tensor<16xf32>
    pipe.running_stat %var {buffer = "bn1.running_var", init = 1.000000e+00 : f64, momentum = 1.000000e-01 : f64} : tensor<16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value, StrAttr:$buffer, F64Attr:$momentum,
                   DefaultValuedAttr<F64Attr, "0.0">:$init);
  let assemblyFormat = "$value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

#endif // ZB_DIALECT_PIPE_PIPEOPS_TD
