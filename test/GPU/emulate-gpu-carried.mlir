// RUN: zb-opt %s --zb-emulate-gpu | FileCheck %s

// A value that an effectful op (a load) defines before a barrier and that
// a later phase uses, as a row kernel keeps a thread's row elements in
// registers across its steps: each thread stores it in a buffer of one
// element per thread in the first phase and reads its own element back in
// the second, whose ops recompute the pure ones on it.
// CHECK-LABEL: func.func @load_across_barrier(
// CHECK-SAME: %[[X:[^:]*]]: memref<8xf32>, %[[Y:[^:]*]]: memref<8xf32>
// CHECK: %[[CARRIED:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: scf.for %[[T1:[^ ]*]] = %c0 to %c8
// CHECK: %[[V:.*]] = memref.load %[[X]][%[[T1]]]
// CHECK: memref.store %[[V]], %[[CARRIED]][%[[L1:.*]]] : memref<?xf32>
// CHECK: memref.store %{{.*}}, %[[X]][%[[T1]]]
// CHECK: scf.for %[[T2:[^ ]*]] = %c0 to %c8
// CHECK: %[[W:.*]] = memref.load %[[CARRIED]][%{{.*}}] : memref<?xf32>
// CHECK: %[[D:.*]] = arith.addf %[[W]], %[[W]]
// CHECK: memref.store %[[D]], %[[Y]][%[[T2]]]
// CHECK: memref.dealloc %[[CARRIED]]
func.func @load_across_barrier(%x: memref<8xf32>, %y: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  gpu.launch blocks(%b0, %b1, %b2) in (%g0 = %c1, %g1 = %c1, %g2 = %c1)
             threads(%t0, %t1, %t2) in (%s0 = %c8, %s1 = %c1, %s2 = %c1) {
    %v = memref.load %x[%t0] : memref<8xf32>
    memref.store %zero, %x[%t0] : memref<8xf32>
    gpu.barrier
    %d = arith.addf %v, %v : f32
    memref.store %d, %y[%t0] : memref<8xf32>
    gpu.terminator
  }
  return
}
