// RUN: zb-opt %s --zb-map-to-gpu -split-input-file | FileCheck %s
// RUN: zb-opt %s --zb-map-to-gpu -split-input-file | FileCheck %s --check-prefix=NOLOAD

// LayerNorm's forward as the model lowers it: the mean and the variance
// (fills and row reductions) and the normalisation (an elementwise op that
// broadcasts the weight and bias over the rows). One kernel, a block per
// row: thread 0 fills, the threads share each reduction (a block-wide tree),
// with a barrier between two steps. Each thread takes the same positions
// of the row in every step (here one, its own index), so it reads its
// element of the input once and keeps it in a register from step to step.
// The buffer freed between two of the ops is freed after the kernel.
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME: %[[X:[^:]*]]: memref<64x96xf32>, %[[G:[^:]*]]: memref<96xf32>, %[[B:[^:]*]]: memref<96xf32>, %[[Y:[^:]*]]: memref<64x96xf32>
// CHECK: %[[MEAN:.*]] = gpu.alloc () : memref<64xf32>
// CHECK: %[[VAR:.*]] = gpu.alloc () : memref<64xf32>
// CHECK-NOT: scf.parallel
// CHECK: gpu.launch blocks(%[[ROW:[^,]*]], {{.*}} in (%{{.*}} = %c64{{.*}}, {{.*}} threads(%[[T:[^,]*]], {{.*}} in (%{{.*}} = %c96{{.*}},
// CHECK-NOT: scf.for
// CHECK: scf.if
// CHECK-NEXT: memref.store %{{.*}}, %[[MEAN]][%[[ROW]]]
// CHECK: gpu.barrier
// CHECK: %[[XV:.*]] = memref.load %[[X]][%[[ROW]], %[[T]]]
// CHECK: %[[SUM:.*]] = gpu.all_reduce
// CHECK: memref.store %[[SUM]], %[[MEAN]][%[[ROW]]]
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK-NEXT: memref.store %{{.*}}, %[[VAR]][%[[ROW]]]
// CHECK: gpu.barrier
// CHECK-NOT: memref.load %[[X]]
// CHECK: %[[M:.*]] = memref.load %[[MEAN]][%[[ROW]]]
// CHECK: arith.subf %[[XV]], %[[M]]
// CHECK: %[[SQ:.*]] = gpu.all_reduce
// CHECK: memref.store %[[SQ]], %[[VAR]][%[[ROW]]]
// CHECK: gpu.barrier
// CHECK-NOT: memref.load %[[X]]
// CHECK-DAG: memref.load %[[G]][%[[T]]]
// CHECK-DAG: memref.load %[[B]][%[[T]]]
// CHECK-DAG: memref.load %[[VAR]][%[[ROW]]]
// CHECK: math.rsqrt
// CHECK: memref.store %{{.*}}, %[[Y]][%[[ROW]], %[[T]]]
// CHECK-NOT: gpu.barrier
// CHECK-NOT: scf.for
// CHECK: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: gpu.dealloc %[[MEAN]]
// CHECK-NOT: scf.parallel
// CHECK: return
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @layer_norm(%x: memref<64x96xf32>, %g: memref<96xf32>,
                      %b: memref<96xf32>, %y: memref<64x96xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 96.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %mean = memref.alloc() : memref<64xf32>
  linalg.fill ins(%zero : f32) outs(%mean : memref<64xf32>)
  linalg.generic {indexing_maps = [#rows, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x96xf32>) outs(%mean : memref<64xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.divf %v, %n : f32
    %a = arith.addf %s, %acc : f32
    linalg.yield %a : f32
  }
  %var = memref.alloc() : memref<64xf32>
  linalg.fill ins(%zero : f32) outs(%var : memref<64xf32>)
  linalg.generic {indexing_maps = [#rows, #row, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x, %mean : memref<64x96xf32>, memref<64xf32>)
      outs(%var : memref<64xf32>) {
  ^bb0(%v: f32, %m: f32, %acc: f32):
    %c = arith.subf %v, %m : f32
    %c2 = arith.mulf %c, %c : f32
    %s = arith.divf %c2, %n : f32
    %a = arith.addf %s, %acc : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#rows, #row, #row, #col, #col, #rows],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean, %var, %g, %b : memref<64x96xf32>, memref<64xf32>,
          memref<64xf32>, memref<96xf32>, memref<96xf32>)
      outs(%y : memref<64x96xf32>) {
  ^bb0(%v: f32, %m: f32, %s: f32, %w: f32, %c: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %e = arith.addf %s, %eps : f32
    %r = math.rsqrt %e : f32
    %t = arith.mulf %d, %r : f32
    %u = arith.mulf %t, %w : f32
    %z = arith.addf %u, %c : f32
    linalg.yield %z : f32
  }
  memref.dealloc %mean : memref<64xf32>
  memref.dealloc %var : memref<64xf32>
  return
}

// -----

// Where a row kernel stops: an op that reads a buffer the kernel writes
// other than row by row (a transpose), a call (host code between), an op
// over longer rows than the reduction's. Each such op stays a kernel of
// its own; the ops after a call may start another row kernel.
// CHECK-LABEL: func.func @boundaries(
// CHECK-SAME: %[[X:[^:]*]]: memref<64x64xf32>, %[[S:[^:]*]]: memref<64xf32>, %[[E:[^:]*]]: memref<64x64xf32>, %[[T:[^:]*]]: memref<64x64xf32>, %[[L:[^:]*]]: memref<64x128xf32>
// CHECK: gpu.launch
// CHECK: gpu.all_reduce
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[E]]
// CHECK: gpu.terminator
// The transpose reads %e across rows: a kernel of its own.
// CHECK: scf.parallel
// CHECK: memref.load %[[E]]
// CHECK: memref.store %{{.*}}, %[[T]]
// CHECK: call @host()
// After the call, a kernel again; the op over 128-long rows is not in it.
// CHECK: gpu.launch
// CHECK: gpu.all_reduce
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
// CHECK: scf.parallel
// CHECK: memref.store %{{.*}}, %[[L]]
// CHECK: return
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
func.func private @host()
func.func @boundaries(%x: memref<64x64xf32>, %s: memref<64xf32>,
                      %e: memref<64x64xf32>, %t: memref<64x64xf32>,
                      %l: memref<64x128xf32>) {
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#rows, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x64xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#rows, #row, #rows],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : memref<64x64xf32>, memref<64xf32>)
      outs(%e : memref<64x64xf32>) {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %d = arith.divf %v, %m : f32
    linalg.yield %d : f32
  }
  linalg.generic {indexing_maps = [#tr, #rows],
                  iterator_types = ["parallel", "parallel"]}
      ins(%e : memref<64x64xf32>) outs(%t : memref<64x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  func.call @host() : () -> ()
  linalg.generic {indexing_maps = [#rows, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%t : memref<64x64xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.maximumf %v, %acc : f32
    linalg.yield %a : f32
  }
  linalg.fill ins(%one : f32) outs(%l : memref<64x128xf32>)
  return
}

// -----

// A buffer reached other than through a view (memref.transpose is not
// one) may alias one the kernel writes: the ops stay apart. Here %t is %e
// transposed, so a fused copy of %t by rows would read what other blocks
// write.
// CHECK-LABEL: func.func @unknown_alias(
// CHECK: gpu.launch
// CHECK: gpu.all_reduce
// CHECK: gpu.barrier
// CHECK: gpu.terminator
// CHECK: memref.transpose
// CHECK: scf.parallel
// CHECK: return
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @unknown_alias(%x: memref<64x64xf32>, %s: memref<64xf32>,
                         %e: memref<64x64xf32>, %y: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#rows, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x64xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#rows, #row, #rows],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : memref<64x64xf32>, memref<64xf32>)
      outs(%e : memref<64x64xf32>) {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %d = arith.divf %v, %m : f32
    linalg.yield %d : f32
  }
  %t = memref.transpose %e (i, j) -> (j, i)
      : memref<64x64xf32> to memref<64x64xf32, strided<[1, 64]>>
  linalg.generic {indexing_maps = [#rows, #rows],
                  iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<64x64xf32, strided<[1, 64]>>)
      outs(%y : memref<64x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  return
}

// -----

// Few long rows: the reduction runs alone (a block per row) and the
// elementwise op before it keeps its own kernel, which fills the device.
// CHECK-LABEL: func.func @few_long_rows(
// CHECK: scf.parallel
// CHECK: math.exp
// CHECK: gpu.launch blocks({{.*}} in (%{{.*}} = %c4{{.*}}, {{.*}} threads({{.*}} in (%{{.*}} = %c256{{.*}},
// CHECK-NOT: gpu.barrier
// CHECK: gpu.all_reduce
// CHECK: gpu.terminator
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @few_long_rows(%x: memref<4x65536xf32>, %e: memref<4x65536xf32>,
                         %s: memref<4xf32>) {
  linalg.generic {indexing_maps = [#rows, #rows],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x65536xf32>) outs(%e : memref<4x65536xf32>) {
  ^bb0(%v: f32, %o: f32):
    %d = math.exp %v : f32
    linalg.yield %d : f32
  }
  linalg.generic {indexing_maps = [#rows, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%e : memref<4x65536xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  }
  return
}

// -----

// A reduction in a host loop (which may then run in one thread) is no row
// kernel.
// CHECK-LABEL: func.func @in_a_loop(
// CHECK-NOT: gpu.launch
// CHECK: return
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @in_a_loop(%x: memref<64x64xf32>, %s: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    linalg.generic {indexing_maps = [#rows, #row],
                    iterator_types = ["parallel", "reduction"]}
        ins(%x : memref<64x64xf32>) outs(%s : memref<64xf32>) {
    ^bb0(%v: f32, %acc: f32):
      %a = arith.addf %v, %acc : f32
      linalg.yield %a : f32
    }
  }
  return
}

// -----

// The loss's pick of the target class's logit, a reduction whose body
// reads the class index (linalg.index): a block per row, the index bound to
// each thread's position in the row.
// CHECK-LABEL: func.func @pick_target(
// CHECK-SAME: %[[X:[^:]*]]: memref<64x128xf32>, %[[T:[^:]*]]: memref<64xi64>, %[[P:[^:]*]]: memref<64xf32>
// CHECK: gpu.launch blocks(%[[ROW:[^,]*]], {{.*}} in (%{{.*}} = %c64{{.*}}, {{.*}} threads(%[[TH:[^,]*]], {{.*}} in (%{{.*}} = %c128{{.*}},
// CHECK-DAG: memref.load %[[X]][%[[ROW]], %[[TH]]]
// CHECK-DAG: memref.load %[[T]][%[[ROW]]]
// CHECK-DAG: arith.index_cast %[[TH]] : index to i64
// CHECK: gpu.all_reduce
// CHECK: memref.store %{{.*}}, %[[P]][%[[ROW]]]
// CHECK: gpu.terminator
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @pick_target(%x: memref<64x128xf32>, %t: memref<64xi64>,
                       %p: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#rows, #row, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x, %t : memref<64x128xf32>, memref<64xi64>)
      outs(%p : memref<64xf32>) {
  ^bb0(%v: f32, %label: i64, %acc: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %hit = arith.cmpi eq, %ji, %label : i64
    %s = arith.select %hit, %v, %zero : f32
    %a = arith.addf %acc, %s : f32
    linalg.yield %a : f32
  }
  return
}

// -----

// Softmax on rows of 512 with 256 threads: each thread takes positions t
// and t + 256 in every step. The scaled scores go to E, the exponentials
// overwrite them there, the result goes to Y: each thread reads its two
// scores once, stores each E element once (the scaled value, overwritten
// in the kernel, is never stored) and never reads E back.
// CHECK-LABEL: func.func @softmax_in_place(
// CHECK-SAME: %[[X:[^:]*]]: memref<64x512xf32>, %[[E:[^:]*]]: memref<64x512xf32>, %[[Y:[^:]*]]: memref<64x512xf32>
// CHECK: gpu.launch blocks(%[[ROW:[^,]*]], {{.*}} threads(%[[T:[^,]*]], {{.*}} in (%{{.*}} = %c256{{.*}},
// CHECK-NOT: scf.for
// CHECK: %[[T2:.*]] = arith.addi %[[T]], %c256
// CHECK-NOT: memref.store %{{.*}}, %[[E]]
// CHECK-DAG: memref.load %[[X]][%[[ROW]], %[[T]]]
// CHECK-DAG: memref.load %[[X]][%[[ROW]], %[[T2]]]
// CHECK: gpu.all_reduce
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[E]][%[[ROW]], %[[T]]]
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[E]][%[[ROW]], %[[T2]]]
// CHECK: gpu.all_reduce
// CHECK: memref.store %{{.*}}, %[[Y]][%[[ROW]], %[[T]]]
// CHECK: memref.store %{{.*}}, %[[Y]][%[[ROW]], %[[T2]]]
// CHECK: gpu.terminator
// NOLOAD-LABEL: func.func @softmax_in_place(
// NOLOAD-NOT: memref.load %arg1
// NOLOAD: return
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @softmax_in_place(%x: memref<64x512xf32>, %e: memref<64x512xf32>,
                            %y: memref<64x512xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.125 : f32
  %m = memref.alloc() : memref<64xf32>
  %s = memref.alloc() : memref<64xf32>
  linalg.generic {indexing_maps = [#rows, #rows],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x512xf32>) outs(%e : memref<64x512xf32>) {
  ^bb0(%v: f32, %o: f32):
    %d = arith.mulf %v, %scale : f32
    linalg.yield %d : f32
  }
  linalg.fill ins(%ninf : f32) outs(%m : memref<64xf32>)
  linalg.generic {indexing_maps = [#rows, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%e : memref<64x512xf32>) outs(%m : memref<64xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.maxnumf %v, %acc : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#row, #rows],
                  iterator_types = ["parallel", "parallel"]}
      ins(%m : memref<64xf32>) outs(%e : memref<64x512xf32>) {
  ^bb0(%mx: f32, %o: f32):
    %d = arith.subf %o, %mx : f32
    %x2 = math.exp %d : f32
    linalg.yield %x2 : f32
  }
  linalg.fill ins(%zero : f32) outs(%s : memref<64xf32>)
  linalg.generic {indexing_maps = [#rows, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%e : memref<64x512xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#rows, #row, #rows],
                  iterator_types = ["parallel", "parallel"]}
      ins(%e, %s : memref<64x512xf32>, memref<64xf32>)
      outs(%y : memref<64x512xf32>) {
  ^bb0(%v: f32, %sum: f32, %o: f32):
    %d = arith.divf %v, %sum : f32
    linalg.yield %d : f32
  }
  memref.dealloc %m : memref<64xf32>
  memref.dealloc %s : memref<64xf32>
  return
}

// -----

// Rows whose length is not a multiple of the block's threads keep each
// step a loop over the thread's strided share.
// CHECK-LABEL: func.func @uneven_rows(
// CHECK: gpu.launch
// CHECK: scf.for %{{.*}} = %{{.*}} to %c600{{.*}} step %c256{{.*}} iter_args
// CHECK: gpu.all_reduce
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @uneven_rows(%x: memref<64x600xf32>, %s: memref<64xf32>) {
  linalg.generic {indexing_maps = [#rows, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x600xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  }
  return
}
