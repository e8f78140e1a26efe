// Bad options of --zb-lower-to-gpu are diagnostics before anything runs
// (an unknown chip used to fail in NVPTX's instruction selection, an empty
// one in the target attribute's verifier).
// RUN: not zb-opt %s --zb-lower-to-gpu=chip=sm_9999 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not zb-opt %s --zb-lower-to-gpu=chip= 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not zb-opt %s --zb-lower-to-gpu=format=bogus 2>&1 | FileCheck %s --check-prefix=FORMAT

// CHIP: error: zb-lower-to-gpu: unknown GPU architecture 'sm_9999' (NVPTX's names: sm_80, sm_90, ...)
// CHIP-NOT: Stack dump
// EMPTY: error: zb-lower-to-gpu: unknown GPU architecture ''
// FORMAT: error: zb-lower-to-gpu: unknown format 'bogus'; known: bin, fatbin, isa

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.exp ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
