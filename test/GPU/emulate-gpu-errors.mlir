// RUN: zb-opt %s --zb-emulate-gpu -split-input-file -verify-diagnostics

// What the emulation cannot run on the host is named, not guessed at.

// GPU ops other than barriers and reductions.
func.func @thread_id(%x: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%b0, %b1, %b2) in (%g0 = %c1, %g1 = %c1, %g2 = %c1)
             threads(%t0, %t1, %t2) in (%s0 = %c1, %s1 = %c1, %s2 = %c1) {
    // expected-error @below {{zb-emulate-gpu: not supported in a launch}}
    %t = gpu.thread_id x
    gpu.terminator
  }
  return
}

// -----

// A barrier inside control flow.
func.func @nested_barrier(%x: memref<4xf32>, %p: i1) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%b0, %b1, %b2) in (%g0 = %c1, %g1 = %c1, %g2 = %c1)
             threads(%t0, %t1, %t2) in (%s0 = %c1, %s1 = %c1, %s2 = %c1) {
    scf.if %p {
      // expected-error @below {{zb-emulate-gpu: expected at the top level of the launch's body}}
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// -----

// A reduction by its op attribute.
func.func @reduction_attribute(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%b0, %b1, %b2) in (%g0 = %c1, %g1 = %c1, %g2 = %c1)
             threads(%t0, %t1, %t2) in (%s0 = %c1, %s1 = %c1, %s2 = %c1) {
    %v = memref.load %x[%t0] : memref<4xf32>
    // expected-error @below {{zb-emulate-gpu: expected a reduction with a region}}
    %s = gpu.all_reduce add %v {} : (f32) -> f32
    memref.store %s, %x[%c0] : memref<4xf32>
    gpu.terminator
  }
  return
}

// -----

// A host gemm of the name the bf16 one becomes.
// expected-error @below {{zb-emulate-gpu: zbrt_sgemm_batched_bf16 is declared already}}
func.func private @zbrt_gpu_sgemm_batched_bf16(i32, i32, i64, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64)
func.func private @zbrt_sgemm_batched_bf16(i32, i32, i64, i64, i64, i64, f32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, f32, !llvm.ptr, i64, i64)
