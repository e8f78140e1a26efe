//===- PipeDialect.td - The pipe dialect definition --------*- tablegen -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_PIPE_PIPEDIALECT_TD
#define ZB_DIALECT_PIPE_PIPEDIALECT_TD

include "mlir/IR/OpBase.td"

def Pipe_Dialect : Dialect {
  let name = "pipe";
  let summary = "Model structure for pipeline-parallel training";
  let description = [{
    The `pipe` dialect describes how one training step of a model is split
    into pipeline stages. A frontend marks stage boundaries with `pipe.cut`;
    the partitioner turns the forward computation into `pipe.stage` ops whose
    regions hold the stage's forward, its backward, and after the B/W split
    the backward-for-input (B) and backward-for-weights (W) computations.
    Values that one region hands to a later one (activations stashed by the
    forward for the backward, and the B→W stash) are explicit operands of
    the regions' `pipe.yield` terminators and block arguments of the
    consuming region.
  }];
  let cppNamespace = "::zb::pipe";
  // Loading it loads the verifier of the zb.* attributes.
  let dependentDialects = ["::zb::ZBDialect"];
}

class Pipe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Pipe_Dialect, mnemonic, traits>;

#endif // ZB_DIALECT_PIPE_PIPEDIALECT_TD
