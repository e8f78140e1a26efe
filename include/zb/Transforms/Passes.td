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
    bias-add, activation and scaling becomes one loop nest. Unlike
    upstream `--linalg-fuse-elementwise-ops` it does not propagate
    reshapes into contractions: matmul-family ops keep their named form and
    still lower to the runtime's gemm.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
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

#endif // ZB_TRANSFORMS_PASSES_TD
