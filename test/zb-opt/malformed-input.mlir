// A malformed file gives a diagnostic and a non-zero exit, never a crash.
// RUN: not zb-opt %s 2>&1 | FileCheck %s
// RUN: not zb-opt %S/does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not zb-opt %s --zb-no-such-pass 2>&1 | FileCheck %s --check-prefix=FLAG
// RUN: zb-opt --help | FileCheck %s --check-prefix=HELP

// CHECK: malformed-input.mlir:[[@LINE+2]]:{{[0-9]+}}: error:
func.func @broken(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = pipe.cut %x : tensor<4xf32
  return %y : tensor<4xf32>
}

// MISSING: cannot open input file {{.*}}does-not-exist.mlir
// FLAG: Unknown command line argument '--zb-no-such-pass'
// HELP: --zb-strip-cuts
