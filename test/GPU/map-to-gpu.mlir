// RUN: zb-opt %s --zb-map-to-gpu -split-input-file | FileCheck %s

// Buffers move to the device; a copy becomes a loop nest like any other op.
// CHECK-LABEL: func.func @buffers(
// CHECK-SAME: %[[IN:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4x8xf32>
// CHECK: %[[T:.*]] = gpu.alloc () : memref<4x8xf32>
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: %[[V:.*]] = memref.load %[[IN]]
// CHECK: memref.store %[[V]], %[[T]]
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: %[[W:.*]] = memref.load %[[T]]
// CHECK: memref.store %[[W]], %[[OUT]]
// CHECK: gpu.dealloc %[[T]] : memref<4x8xf32>
// CHECK-NOT: memref.copy
// CHECK-NOT: memref.dealloc
func.func @buffers(%in: memref<4x8xf32>, %out: memref<4x8xf32>) {
  %t = memref.alloc() : memref<4x8xf32>
  memref.copy %in, %t : memref<4x8xf32> to memref<4x8xf32>
  memref.copy %t, %out : memref<4x8xf32> to memref<4x8xf32>
  memref.dealloc %t : memref<4x8xf32>
  return
}

// -----

// A 2-D elementwise op: one loop, collapsed to 1-D, tiled by 256 and mapped
// to blocks and threads; the tile's tail is guarded.
// CHECK-LABEL: func.func @elementwise(
// CHECK: scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%[[N:.*]]) step (%[[STEP:.*]]) {
// CHECK: scf.parallel (%[[T:.*]]) = (%{{.*}}) to (%[[STEP]]) step
// CHECK: %[[I:.*]] = arith.addi %[[T]], %[[B]] : index
// CHECK: arith.cmpi ult, %{{.*}}, %[[N]] : index
// CHECK: scf.if
// CHECK: arith.remsi %[[I]], %c300
// CHECK: arith.divsi %[[I]], %c300
// CHECK: math.exp
// CHECK: {mapping = [#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
// CHECK: {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
#id = affine_map<(i, j) -> (i, j)>
func.func @elementwise(%x: memref<64x300xf32>, %y: memref<64x300xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x300xf32>) outs(%y : memref<64x300xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A reduction over several adjacent loops is one loop over the buffer
// collapsed along them: a total is a row kernel of one row (the strided
// shares of a block's threads, then their tree), not one thread.
// CHECK-LABEL: func.func @total(
// CHECK: %[[X:.*]] = memref.collapse_shape %{{.*}} {{\[}}[0, 1]] : memref<64x300xf32> into memref<19200xf32>
// CHECK: gpu.launch blocks(%{{.*}}) in (%{{.*}} = %c1{{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c256
// CHECK: scf.for %[[I:.*]] = %[[T]] to %c19200 step %c256
// CHECK: memref.load %[[X]][%[[I]]]
// CHECK: gpu.all_reduce
// CHECK-NOT: scf.parallel
func.func @total(%x: memref<64x300xf32>, %s: memref<f32>) {
  linalg.reduce ins(%x : memref<64x300xf32>) outs(%s : memref<f32>) dimensions = [0, 1]
    (%a: f32, %acc: f32) {
      %r = arith.addf %a, %acc : f32
      linalg.yield %r : f32
    }
  return
}

// -----

// A bias gradient's sum over [batch, tokens]: the two loops are one of 200
// iterations, a row kernel of a block per output element. Where an operand
// reads the loops apart (@apart: [b, c, t]) they stay two, in one thread
// per output element.
// CHECK-LABEL: func.func @bias(
// CHECK: memref.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : memref<4x50x5xf32> into memref<200x5xf32>
// CHECK: gpu.launch blocks(%{{.*}}) in (%{{.*}} = %c5
// CHECK: gpu.all_reduce
// CHECK-LABEL: func.func @apart(
// CHECK-NOT: collapse_shape
// CHECK: scf.parallel
// CHECK: scf.for
// CHECK: scf.for
func.func @bias(%dy: memref<4x50x5xf32>, %db: memref<5xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, b, t) -> (b, t, c)>, affine_map<(c, b, t) -> (c)>],
                  iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%dy : memref<4x50x5xf32>) outs(%db : memref<5xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}
func.func @apart(%x: memref<4x5x50xf32>, %out: memref<5xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, b, t) -> (b, c, t)>, affine_map<(c, b, t) -> (c)>],
                  iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : memref<4x5x50xf32>) outs(%out : memref<5xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A constant global is copied to a device buffer for its uses.
memref.global "private" constant @cst : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
// CHECK-LABEL: func.func @global(
// CHECK: %[[G:.*]] = memref.get_global @cst : memref<4xf32>
// CHECK: %[[D:.*]] = gpu.alloc () : memref<4xf32>
// CHECK: gpu.memcpy %[[D]], %[[G]] : memref<4xf32>, memref<4xf32>
// CHECK: memref.load %[[D]]
// CHECK: gpu.dealloc %[[D]]
func.func @global(%out: memref<4xf32>) {
  %g = memref.get_global @cst : memref<4xf32>
  memref.copy %g, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// A host loop nest that loads and stores buffers (a gather's gradient
// scattered back: indices may repeat, so it stays sequential) runs in one
// GPU thread: a one-iteration scf.parallel mapped to a block and a thread.
// CHECK-LABEL: func.func @scatter_add(
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c1{{(_[0-9]+)?}}) step
// CHECK: scf.parallel
// CHECK: scf.if
// CHECK: scf.for
// CHECK: memref.load
// CHECK: memref.store
// CHECK: {mapping = [#gpu.loop_dim_map<processor = thread_x
// CHECK: {mapping = [#gpu.loop_dim_map<processor = block_x
func.func @scatter_add(%idx: memref<8xi64>, %grad: memref<8xf32>,
                       %table: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %t = memref.load %idx[%i] : memref<8xi64>
    %row = arith.index_cast %t : i64 to index
    %g = memref.load %grad[%i] : memref<8xf32>
    %old = memref.load %table[%row] : memref<16xf32>
    %new = arith.addf %old, %g : f32
    memref.store %new, %table[%row] : memref<16xf32>
  }
  return
}

// -----

// An embedding's gradient, table[idx[t], d] += grad[t, d]: the stores are
// indexed by d itself, so the nest runs one thread per d (an scf.parallel
// over d, mapped to blocks and threads), each adding over t in order.
// CHECK-LABEL: func.func @scatter_rows(
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c1024{{(_[0-9]+)?}}) step
// CHECK: scf.parallel
// CHECK: scf.for %{{.*}} = %{{.*}} to %c8{{(_[0-9]+)?}} step
// CHECK-NOT: scf.for
// CHECK: memref.store
// CHECK: {mapping = [#gpu.loop_dim_map<processor = thread_x
// CHECK: {mapping = [#gpu.loop_dim_map<processor = block_x
func.func @scatter_rows(%idx: memref<8xi64>, %grad: memref<8x1024xf32>,
                        %table: memref<16x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c1024 = arith.constant 1024 : index
  scf.for %t = %c0 to %c8 step %c1 {
    scf.for %d = %c0 to %c1024 step %c1 {
      %i = memref.load %idx[%t] : memref<8xi64>
      %row = arith.index_cast %i : i64 to index
      %g = memref.load %grad[%t, %d] : memref<8x1024xf32>
      %old = memref.load %table[%row, %d] : memref<16x1024xf32>
      %new = arith.addf %old, %g : f32
      memref.store %new, %table[%row, %d] : memref<16x1024xf32>
    }
  }
  return
}

// -----

// A step function's loop over its action table (calls: it stays host code)
// reads the table in host memory: that global is not copied to the device,
// while a global a kernel reads (a copy here) is.
memref.global "private" constant @actions : memref<2x2xi64> = dense<[[0, 1], [1, 0]]>
memref.global "private" constant @bias : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
func.func private @stage(i64)
// CHECK-LABEL: func.func @action_loop(
// CHECK: %[[T:.*]] = memref.get_global @actions : memref<2x2xi64>
// CHECK-NOT: gpu.memcpy %{{.*}}, %[[T]]
// CHECK: scf.for
// CHECK: %[[A:.*]] = memref.load %[[T]]
// CHECK: call @stage(%[[A]])
// CHECK: %[[B:.*]] = memref.get_global @bias : memref<4xf32>
// CHECK: %[[D:.*]] = gpu.alloc () : memref<4xf32>
// CHECK: gpu.memcpy %[[D]], %[[B]]
func.func @action_loop(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %t = memref.get_global @actions : memref<2x2xi64>
  scf.for %i = %c0 to %c2 step %c1 {
    %a = memref.load %t[%i, %c0] : memref<2x2xi64>
    func.call @stage(%a) : (i64) -> ()
  }
  %b = memref.get_global @bias : memref<4xf32>
  memref.copy %b, %out : memref<4xf32> to memref<4xf32>
  return
}
