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

#endif // ZB_TRANSFORMS_PASSES_TD
