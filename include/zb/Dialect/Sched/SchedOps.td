//===- SchedOps.td - The sched dialect operations ----------*- tablegen -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_SCHED_SCHEDOPS_TD
#define ZB_DIALECT_SCHED_SCHEDOPS_TD

include "zb/Dialect/Sched/SchedDialect.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Phase
//===----------------------------------------------------------------------===//

def Sched_Phase : I32EnumAttr<"Phase", "phase of a compute action", [
    I32EnumAttrCase<"F", 0>,
    I32EnumAttrCase<"B", 1>,
    I32EnumAttrCase<"W", 2>,
    I32EnumAttrCase<"BW", 3>,
    I32EnumAttrCase<"Optimizer", 4, "optimizer">
  ]> {
  let cppNamespace = "::zb::sched";
}

//===----------------------------------------------------------------------===//
// ProgramOp
//===----------------------------------------------------------------------===//

def Sched_ProgramOp : Sched_Op<"program", [IsolatedFromAbove, NoTerminator]> {
  let summary = "A pipeline program: one ordered region per rank";
  let description = [{
    Holds the per-rank programs of one training step. Region `i` is rank
    `i`'s program; its ops (`sched.compute`, `sched.send`, `sched.recv`) run
    in order. `num_stages` stages and `num_microbatches` microbatches are in
    range for the actions; the optional `stage_ranks` maps each stage to the
    rank that holds it, and then every compute action must be on its
    stage's rank. The optional `schedule` names the generator that made it.

    The optional `param_stages` names the parameters that stages on
    several ranks hold a copy of (tied weights), each with the stages that
    use it; `sched.allreduce` ops sum their gradients over the ranks that
    hold them.

    With `replicas` D > 1, D copies of the program run side by side (data
    parallelism: replica r's rank p is rank r * num_ranks + p of the
    job). `param_stages` then names every parameter with the stages that
    use it, every rank reduces each parameter it holds, a reduction runs
    over its group's ranks in every replica and ends divided by D (the
    replicas' mean of the group's sum), and its group may be one rank.

    A `forward_only` program evaluates the model: its ranks run F actions
    only (each stage's activations travel forward; no B, W, BW, optimizer
    or reduction), and the verifier rejects any other action.

    The verifier checks ranges, that no action appears twice, that transfers
    on each (rank, peer, channel) are numbered 0, 1, 2, ... in program
    order, that every send has the matching recv on its peer (same
    channel, sequence number and payload) and vice versa, and that every
    reduction is one collective: the same op (parameters, group, sequence
    number) on every rank of its group, numbered in program order per
    group, over ranks that hold its parameters, after the last W (or BW)
    on its rank of each stage that uses them, and at most once per rank.
    (That every rank holding a shared parameter reduces it is checked
    where it matters, by `--zb-lower-to-runtime`: `--zb-schedule` makes
    the program, `--zb-insert-comm` adds the reductions.)

    ```mlir
    sched.program ranks 2 stages 2 microbatches 1
        attributes {schedule = "1f1b", stage_ranks = array<i64: 0, 1>} {
    rank 0 {
      sched.compute F stage 0 microbatch 0
      sched.send F stage 0 microbatch 0 to 1 channel 0 seq 0
      sched.recv B stage 1 microbatch 0 from 1 channel 1 seq 0
      sched.compute B stage 0 microbatch 0
    }
    rank 1 {
      ...
    }
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntPositive]>:$num_ranks,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_stages,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_microbatches,
                   OptionalAttr<StrAttr>:$schedule,
                   OptionalAttr<DenseI64ArrayAttr>:$stage_ranks,
                   OptionalAttr<DictionaryAttr>:$param_stages,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$replicas,
                   UnitAttr:$forward_only);
  let regions = (region VariadicRegion<SizedRegion<1>>:$ranks);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The rank that runs region `region`.
    static int64_t getRankOf(mlir::Operation *op);
    /// The number of replicas of the program (1 without `replicas`).
    int64_t getNumReplicas() { return getReplicas().value_or(1); }
  }];
}

//===----------------------------------------------------------------------===//
// ComputeOp
//===----------------------------------------------------------------------===//

def Sched_ComputeOp : Sched_Op<"compute", [HasParent<"ProgramOp">]> {
  let summary = "Run one phase of one stage for one microbatch";
  let description = [{
    Runs `phase` of `stage` on `microbatch`. The optimizer phase updates the
    stage's parameters once per step and names no microbatch.

    ```mlir
    sched.compute W stage 3 microbatch 5
    sched.compute optimizer stage 3
    ```
  }];
  let arguments = (ins Sched_Phase:$phase,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$stage,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$microbatch);
  let assemblyFormat = "$phase `stage` $stage (`microbatch` $microbatch^)? attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// SendOp / RecvOp
//===----------------------------------------------------------------------===//

class Sched_TransferOp<string mnemonic, string direction>
    : Sched_Op<mnemonic, [HasParent<"ProgramOp">]> {
  let arguments = (ins Sched_Phase:$phase,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$stage,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$microbatch,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$peer,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$channel,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$seq);
  let assemblyFormat = "$phase `stage` $stage `microbatch` $microbatch `" # direction #
      "` $peer `channel` $channel `seq` $seq attr-dict";
  let hasVerifier = 1;
}

def Sched_SendOp : Sched_TransferOp<"send", "to"> {
  let summary = "Send the output of an action to a peer rank";
  let description = [{
    Sends what `phase` of `stage` produced for `microbatch` (the activation
    of an F, the input gradient of a B or BW) to rank `peer`. It is the
    `seq`-th transfer from this rank to `peer` on `channel`, and meets the
    recv with the same channel and sequence number on the peer.

    ```mlir
    sched.send F stage 0 microbatch 2 to 1 channel 0 seq 2
    ```
  }];
}

def Sched_RecvOp : Sched_TransferOp<"recv", "from"> {
  let summary = "Receive the output of a peer rank's action";
  let description = [{
    Receives what `phase` of `stage` produced for `microbatch` on rank
    `peer`; the counterpart of `sched.send`.

    ```mlir
    sched.recv F stage 0 microbatch 2 from 0 channel 0 seq 2
    ```
  }];
}

//===----------------------------------------------------------------------===//
// AllReduceOp
//===----------------------------------------------------------------------===//

def Sched_AllReduceOp : Sched_Op<"allreduce", [HasParent<"ProgramOp">]> {
  let summary = "Sum parameter gradients over a group of ranks";
  let description = [{
    Sums this step's gradients of `params` over the ranks of `group`
    (sorted, this rank among them): afterwards every rank of the group
    holds the total, so that the copies of a shared parameter take the
    same optimizer update. The reduction starts here, without blocking
    (the ranks' remaining actions overlap it), and completes by the end of
    the step. It is the `seq`-th reduction over `group` in program order;
    the op with the same group and sequence number on each rank of the
    group is the same collective and names the same parameters.

    ```mlir
    sched.allreduce ["wte.weight"] over [0, 3] seq 0
    sched.allreduce ["fc1.weight", "fc1.bias"] over [1] seq 0 // replicas
    ```
  }];
  let arguments = (ins StrArrayAttr:$params,
                   DenseI64ArrayAttr:$group,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$seq);
  let assemblyFormat = "$params `over` $group `seq` $seq attr-dict";
  let hasVerifier = 1;
}

#endif // ZB_DIALECT_SCHED_SCHEDOPS_TD
