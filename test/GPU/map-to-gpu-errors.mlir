// RUN: zb-opt %s --zb-map-to-gpu -split-input-file -verify-diagnostics
// RUN: not zb-opt %s --zb-map-to-gpu="block-size=2048" 2>&1 | FileCheck %s --check-prefix=BLOCK

// BLOCK: error: zb-map-to-gpu: block-size 2048 is not in [1, 1024]

// The host cannot read device memory.
func.func @host_load(%x: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error @below {{zb-map-to-gpu: host code accesses a device buffer outside a kernel}}
  %v = memref.load %x[%c0] : memref<4xf32>
  return %v : f32
}
