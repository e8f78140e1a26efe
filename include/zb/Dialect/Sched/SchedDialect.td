//===- SchedDialect.td - The sched dialect definition ------*- tablegen -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_SCHED_SCHEDDIALECT_TD
#define ZB_DIALECT_SCHED_SCHEDDIALECT_TD

include "mlir/IR/OpBase.td"

def Sched_Dialect : Dialect {
  let name = "sched";
  let summary = "Per-rank pipeline programs: ordered compute and transfers";
  let description = [{
    The `sched` dialect holds what a pipeline schedule decides: for every
    rank, the ordered list of compute actions (a stage's forward F, its
    backward-for-input B, backward-for-weights W, fused backward BW, or the
    optimizer step) for each microbatch, and the point-to-point transfers
    between ranks. A `sched.program` has one region per rank; program order
    inside a region is execution order on that rank.
  }];
  let cppNamespace = "::zb::sched";
  // Loading it loads the verifier of the zb.* attributes.
  let dependentDialects = ["::zb::ZBDialect"];
}

class Sched_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sched_Dialect, mnemonic, traits>;

#endif // ZB_DIALECT_SCHED_SCHEDDIALECT_TD
