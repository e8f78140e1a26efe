// RUN: zb-opt %s --zb-outline-loop-nests="loops=2" | FileCheck %s
// RUN: zb-opt %s --zb-outline-loop-nests="loops=4" | FileCheck %s --check-prefix=FEW
// RUN: zb-opt %s --zb-outline-loop-nests="loops=2" --zb-lower-to-cpu | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVM
// RUN: zb-opt %s --zb-outline-loop-nests="loops=1" | FileCheck %s --check-prefix=ONE
// RUN: zb-opt %s --zb-outline-loop-nests="loops=1" --zb-lower-to-cpu | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=ONE-LLVM
// RUN: not zb-opt %s --zb-outline-loop-nests="loops=0" 2>&1 | FileCheck %s --check-prefix=ERR

// Five loop nests (six loops) in one function, cut into parts of two
// loops. The buffers stay in the function (allocating is all they do) and
// are handed to the parts; the constants are cloned into them. The second
// part holds the sum %s and the nest that reads it. The tail (one loop)
// stays.

// CHECK-LABEL: func.func @five(
// CHECK-SAME:    %[[X:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<8xf32>)
// CHECK:         %[[A:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    %[[B:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    call @five_part0(%[[X]], %[[A]], %[[B]])
// CHECK-NEXT:    call @five_part1(%[[B]], %[[X]], %[[OUT]])
// CHECK-NEXT:    memref.dealloc %[[B]]
// CHECK-NEXT:    scf.for
// CHECK:         memref.dealloc %[[A]]
// CHECK-NEXT:    return

// CHECK:       func.func private @five_part1(%{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32>) attributes {passthrough = ["noinline"]}
// CHECK-DAG:     arith.constant 0 : index
// CHECK-DAG:     arith.constant 8 : index
// CHECK:         scf.for {{.*}} iter_args
// CHECK:         scf.for
// CHECK:         return

// CHECK:       func.func private @five_part0(%{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32>) attributes {passthrough = ["noinline"]}
// CHECK-COUNT-2: scf.for
// CHECK:         return

// A part ends where it has its loops, even where a later op reads what it
// defines: the sum %s becomes the result of the part that computes it and
// an argument of the next.
// ONE-LABEL: func.func @five(
// ONE:         call @five_part1(
// ONE-NEXT:    %[[S:.*]] = call @five_part2(%{{.*}}) : (memref<8xf32>) -> f32
// ONE-NEXT:    call @five_part3(%{{.*}}, %[[S]], %{{.*}}) : (memref<8xf32>, f32, memref<8xf32>) -> ()
// ONE:       func.func private @five_part2(%{{.*}}: memref<8xf32>) -> f32
// ONE:         %[[SUM:.*]] = scf.for
// ONE:         return %[[SUM]] : f32

// ONE-LLVM: %[[V:.*]] = call float @five_part2(
// ONE-LLVM: call void @five_part3({{.*}}float %[[V]]
// ONE-LLVM: define internal float @five_part2(

// Functions of no more loops than asked stay whole.
// FEW-LABEL: func.func @five(
// FEW:         call @five_part0
// FEW-NOT:     call
// FEW:         return
// FEW-LABEL: func.func @small(
// FEW-NOT:     call
// FEW:         return

// The parts are not inlined again.
// LLVM: define void @five(
// LLVM:   call void @five_part0(
// LLVM:   call void @five_part1(
// LLVM: define internal void @five_part1({{.*}}) #[[ATTRS:[0-9]+]]
// LLVM: attributes #[[ATTRS]] = { noinline }

// ERR: --zb-outline-loop-nests needs 'loops' of at least 1, got 0

func.func @five(%x: memref<8xf32>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<8xf32>
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i] : memref<8xf32>
    %w = arith.mulf %v, %v : f32
    memref.store %w, %a[%i] : memref<8xf32>
  }
  %b = memref.alloc() : memref<8xf32>
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %a[%j] : memref<8xf32>
      memref.store %v, %b[%i] : memref<8xf32>
    }
  }
  %s = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> f32 {
    %v = memref.load %b[%i] : memref<8xf32>
    %t = arith.addf %acc, %v : f32
    scf.yield %t : f32
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i] : memref<8xf32>
    %t = arith.addf %s, %v : f32
    memref.store %t, %out[%i] : memref<8xf32>
  }
  memref.dealloc %b : memref<8xf32>
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %out[%i] : memref<8xf32>
    memref.store %v, %a[%i] : memref<8xf32>
  }
  memref.dealloc %a : memref<8xf32>
  return
}

func.func @small(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i] : memref<8xf32>
    memref.store %v, %x[%i] : memref<8xf32>
  }
  return
}
