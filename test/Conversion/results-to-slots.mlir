// RUN: zb-opt %s --zb-results-to-slots | FileCheck %s

func.func private @f(%a: memref<4xf32>, %out: memref<4xf32>)

// A result copied into a marked slot is written there by the call.
// CHECK-LABEL: func.func @into_slot(
// CHECK-SAME: %[[A:.*]]: memref<4xf32>, %[[ARENA:.*]]: memref<64xi8>, %[[O:.*]]: index)
// CHECK-NEXT: %[[V:.*]] = memref.view %[[ARENA]][%[[O]]][] {zb.out_slot}
// CHECK-NEXT: call @f(%[[A]], %[[V]])
// CHECK-NEXT: return
func.func @into_slot(%a: memref<4xf32>, %arena: memref<64xi8>, %o: index) {
  %v = memref.view %arena[%o][] {zb.out_slot} : memref<64xi8> to memref<4xf32>
  %r = memref.alloc() : memref<4xf32>
  call @f(%a, %r) : (memref<4xf32>, memref<4xf32>) -> ()
  memref.copy %r, %v : memref<4xf32> to memref<4xf32>
  return
}

// One buffer copied into two slots: the call fills the first, which is
// then copied into the second.
// CHECK-LABEL: func.func @two_slots(
// CHECK: %[[V1:.*]] = memref.view {{.*}} {zb.out_slot}
// CHECK: %[[V2:.*]] = memref.view {{.*}} {zb.out_slot}
// CHECK-NEXT: call @f(%{{.*}}, %[[V1]])
// CHECK-NEXT: memref.copy %[[V1]], %[[V2]]
// CHECK-NEXT: return
func.func @two_slots(%a: memref<4xf32>, %arena: memref<64xi8>, %o: index, %p: index) {
  %v1 = memref.view %arena[%o][] {zb.out_slot} : memref<64xi8> to memref<4xf32>
  %v2 = memref.view %arena[%p][] {zb.out_slot} : memref<64xi8> to memref<4xf32>
  %r = memref.alloc() : memref<4xf32>
  call @f(%a, %r) : (memref<4xf32>, memref<4xf32>) -> ()
  memref.copy %r, %v1 : memref<4xf32> to memref<4xf32>
  memref.copy %r, %v2 : memref<4xf32> to memref<4xf32>
  return
}

// Left alone: an unmarked view, a view the call also reads, a view made
// after the call, a buffer the function reads again, a view used between
// the call and the copy.
// CHECK-LABEL: func.func @unchanged(
// CHECK-COUNT-5: memref.copy %{{.*}}, %{{.*}} : memref<4xf32> to memref<4xf32>
// CHECK: return
func.func @unchanged(%a: memref<4xf32>, %arena: memref<64xi8>, %o: index) -> f32 {
  %c0 = arith.constant 0 : index
  %plain = memref.view %arena[%o][] : memref<64xi8> to memref<4xf32>
  %r0 = memref.alloc() : memref<4xf32>
  call @f(%a, %r0) : (memref<4xf32>, memref<4xf32>) -> ()
  memref.copy %r0, %plain : memref<4xf32> to memref<4xf32>

  %read = memref.view %arena[%o][] {zb.out_slot} : memref<64xi8> to memref<4xf32>
  %r1 = memref.alloc() : memref<4xf32>
  call @f(%read, %r1) : (memref<4xf32>, memref<4xf32>) -> ()
  memref.copy %r1, %read : memref<4xf32> to memref<4xf32>

  %r2 = memref.alloc() : memref<4xf32>
  call @f(%a, %r2) : (memref<4xf32>, memref<4xf32>) -> ()
  %late = memref.view %arena[%o][] {zb.out_slot} : memref<64xi8> to memref<4xf32>
  memref.copy %r2, %late : memref<4xf32> to memref<4xf32>

  %v3 = memref.view %arena[%o][] {zb.out_slot} : memref<64xi8> to memref<4xf32>
  %r3 = memref.alloc() : memref<4xf32>
  call @f(%a, %r3) : (memref<4xf32>, memref<4xf32>) -> ()
  memref.copy %r3, %v3 : memref<4xf32> to memref<4xf32>
  %x = memref.load %r3[%c0] : memref<4xf32>

  %v4 = memref.view %arena[%o][] {zb.out_slot} : memref<64xi8> to memref<4xf32>
  %r4 = memref.alloc() : memref<4xf32>
  call @f(%a, %r4) : (memref<4xf32>, memref<4xf32>) -> ()
  call @f(%v4, %a) : (memref<4xf32>, memref<4xf32>) -> ()
  memref.copy %r4, %v4 : memref<4xf32> to memref<4xf32>
  return %x : f32
}

// A copy of a buffer onto itself goes.
// CHECK-LABEL: func.func @self_copy(
// CHECK-NEXT: return
func.func @self_copy(%a: memref<4xf32>) {
  memref.copy %a, %a : memref<4xf32> to memref<4xf32>
  return
}
