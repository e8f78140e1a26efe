//===- ZBDialect.td - The zb attribute dialect -------------*- tablegen -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_ZB_ZBDIALECT_TD
#define ZB_DIALECT_ZB_ZBDIALECT_TD

include "mlir/IR/OpBase.td"

def ZB_Dialect : Dialect {
  let name = "zb";
  let summary = "The attributes of the model convention and of lowered "
                "programs";
  let description = [{
    The `zb` dialect has no ops: it owns the `zb.*` attributes the compiler
    and its tools exchange, names them as constants, and verifies them
    wherever it is loaded (every ZeroBubble pass loads it).

    On arguments of a model function (the model convention):
    - `zb.param` (unit or a non-empty string, the parameter's name): a
      parameter; float elements.
    - `zb.data` (non-empty string): the name of a data argument.
    - `zb.range` (positive integer): integer data lies in [0, range).
    - `zb.range_from` (negative integer, with `zb.range`): the data may also
      lie in [range_from, 0), indices counted from the end where every use
      wraps them; no table is indexed by the values directly.
    - `zb.range_ignored` (integer outside the range, with `zb.range`): one
      more value the data may hold, which every use leaves out (a loss's
      `ignore_index`, such as -100); no table is indexed by it.
    - `zb.rng` (unit), on a `tensor<1xi64>` data argument: a random key
      the runner supplies per microbatch (never read from input files),
      for the model's random ops (training-mode dropout).

    On functions:
    - `zb.gradient_of` (symbol): the function `--zb-autodiff` derived it from.
    - `zb.grad_sums` (integer ≥ 1, at most the number of arguments): a
      gradient function's last N arguments are gradient sums, which it
      returns last with the gradients added, updated in place
      (`--zb-autodiff=accumulate=true`).
    - `zb.rank` (integer ≥ 0), `zb.params` (array of strings),
      `zb.microbatches` (integer ≥ 1), `zb.arena_bytes` (integer ≥ 0): a
      rank's step function (`--zb-lower-to-runtime`).
    - `zb.optimizer` (string: sgd, sgd-momentum or adamw), with `zb.rank`
      and `zb.params`: a rank's optimizer update (`--zb-emit-optimizer`).

    On modules: `zb.stages`, the stage table (ranks, costs and stash sizes
    per stage; zb/Dialect/ZB/StageTable.h).

    On `memref.view`: `zb.out_slot` (unit), the arena slot a call writes its
    result into (`--zb-results-to-slots`).

    On a `linalg` contraction: `zb.skip_terms` (two distinct loop
    dimensions `r`, `c`), the terms at iteration points where loop `c`
    exceeds loop `r` are not needed (`--zb-mark-triangular-products`).
  }];
  let cppNamespace = "::zb";
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let extraClassDeclaration = [{
    constexpr const static ::llvm::StringLiteral kParamAttrName = "zb.param";
    constexpr const static ::llvm::StringLiteral kDataAttrName = "zb.data";
    constexpr const static ::llvm::StringLiteral kRangeAttrName = "zb.range";
    constexpr const static ::llvm::StringLiteral kRangeFromAttrName =
        "zb.range_from";
    constexpr const static ::llvm::StringLiteral kRangeIgnoredAttrName =
        "zb.range_ignored";
    constexpr const static ::llvm::StringLiteral kRngAttrName = "zb.rng";
    constexpr const static ::llvm::StringLiteral kGradientOfAttrName =
        "zb.gradient_of";
    constexpr const static ::llvm::StringLiteral kGradSumsAttrName =
        "zb.grad_sums";
    constexpr const static ::llvm::StringLiteral kRankAttrName = "zb.rank";
    constexpr const static ::llvm::StringLiteral kParamsAttrName = "zb.params";
    constexpr const static ::llvm::StringLiteral kMicrobatchesAttrName =
        "zb.microbatches";
    constexpr const static ::llvm::StringLiteral kArenaBytesAttrName =
        "zb.arena_bytes";
    constexpr const static ::llvm::StringLiteral kStagesAttrName = "zb.stages";
    constexpr const static ::llvm::StringLiteral kOutSlotAttrName =
        "zb.out_slot";
    constexpr const static ::llvm::StringLiteral kOptimizerAttrName =
        "zb.optimizer";
    constexpr const static ::llvm::StringLiteral kSkipTermsAttrName =
        "zb.skip_terms";
  }];
}

#endif // ZB_DIALECT_ZB_ZBDIALECT_TD
