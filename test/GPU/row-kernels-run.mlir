// REQUIRES: mlir-runner
// A row kernel of --zb-map-to-gpu computes what its ops say: the kernel
// runs on the CPU (--zb-emulate-gpu: blocks and threads as loops, the body
// in phases between its barriers and reductions, device buffers as host
// ones) against plain loops
// over the same data. Rows of 3 x 5 (delinearised), 40 long, with 16
// threads (a strided share of 2 or 3 elements each) and with 64 (capped at
// 40); a fill and a max, an elementwise op, a fill and a sum of squares,
// an op that reads linalg.index, an in-place update, and a sum into an
// output the caller set (thread 0 folds the initial value). The values are
// integers, so every summation order gives them exactly: the difference
// from the loops is 0.
// RUN: zb-opt %s --zb-map-to-gpu=block-size=16 --zb-emulate-gpu \
// RUN:   | mlir-opt --convert-linalg-to-loops --convert-scf-to-cf --expand-strided-metadata --lower-affine \
// RUN:       --finalize-memref-to-llvm --convert-arith-to-llvm --convert-func-to-llvm \
// RUN:       --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_lib_dir/libmlir_runner_utils%shlibext,%mlir_lib_dir/libmlir_c_runner_utils%shlibext \
// RUN:   | FileCheck %s
// RUN: zb-opt %s --zb-map-to-gpu=block-size=64 --zb-emulate-gpu \
// RUN:   | mlir-opt --convert-linalg-to-loops --convert-scf-to-cf --expand-strided-metadata --lower-affine \
// RUN:       --finalize-memref-to-llvm --convert-arith-to-llvm --convert-func-to-llvm \
// RUN:       --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_lib_dir/libmlir_runner_utils%shlibext,%mlir_lib_dir/libmlir_c_runner_utils%shlibext \
// RUN:   | FileCheck %s
// The ops of @rows are one kernel.
// RUN: zb-opt %s --zb-map-to-gpu=block-size=16 | FileCheck %s --check-prefix=MAP
// MAP-LABEL: func.func @rows(
// MAP: gpu.launch
// MAP-COUNT-7: gpu.barrier
// MAP-NOT: gpu.barrier
// MAP: gpu.terminator
// MAP-NOT: gpu.launch
// MAP: return

// sum of y over every element (a check that the kernel wrote something),
// then the total absolute difference from the loops, over y, e and s2.
// CHECK: [-4.209e+06]
// CHECK: [0]{{$}}

func.func private @printMemrefF32(memref<*xf32>)

#x3 = affine_map<(a, b, j) -> (a, b, j)>
#r3 = affine_map<(a, b, j) -> (a, b)>

// m = max_j x; e = x - m; s = sum_j e^2; y = e s + j; e += 1;
// s2 (set by the caller) += sum_j x.
func.func @rows(%x: memref<3x5x40xf32>, %m: memref<3x5xf32>,
                %e: memref<3x5x40xf32>, %s: memref<3x5xf32>,
                %y: memref<3x5x40xf32>, %s2: memref<3x5xf32>) {
  %low = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%low : f32) outs(%m : memref<3x5xf32>)
  linalg.generic {indexing_maps = [#x3, #r3],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<3x5x40xf32>) outs(%m : memref<3x5xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.maximumf %v, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#x3, #r3, #x3],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m : memref<3x5x40xf32>, memref<3x5xf32>)
      outs(%e : memref<3x5x40xf32>) {
  ^bb0(%v: f32, %mx: f32, %o: f32):
    %d = arith.subf %v, %mx : f32
    linalg.yield %d : f32
  }
  linalg.fill ins(%zero : f32) outs(%s : memref<3x5xf32>)
  linalg.generic {indexing_maps = [#x3, #r3],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%e : memref<3x5x40xf32>) outs(%s : memref<3x5xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %r = arith.addf %sq, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#x3, #r3, #x3],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %s : memref<3x5x40xf32>, memref<3x5xf32>)
      outs(%y : memref<3x5x40xf32>) {
  ^bb0(%v: f32, %sum: f32, %o: f32):
    %j = linalg.index 2 : index
    %ji = arith.index_cast %j : index to i64
    %jf = arith.sitofp %ji : i64 to f32
    %p = arith.mulf %v, %sum : f32
    %r = arith.addf %p, %jf : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#x3, #x3],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e : memref<3x5x40xf32>) outs(%e : memref<3x5x40xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %one : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#x3, #r3],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<3x5x40xf32>) outs(%s2 : memref<3x5xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %v, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// The same, as plain loops.
func.func @reference(%x: memref<3x5x40xf32>, %e: memref<3x5x40xf32>,
                     %y: memref<3x5x40xf32>, %s2: memref<3x5xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c40 = arith.constant 40 : index
  %low = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  scf.for %a = %c0 to %c3 step %c1 {
    scf.for %b = %c0 to %c5 step %c1 {
      %m = scf.for %j = %c0 to %c40 step %c1 iter_args(%acc = %low) -> f32 {
        %v = memref.load %x[%a, %b, %j] : memref<3x5x40xf32>
        %r = arith.maximumf %acc, %v : f32
        scf.yield %r : f32
      }
      %s = scf.for %j = %c0 to %c40 step %c1 iter_args(%acc = %zero) -> f32 {
        %v = memref.load %x[%a, %b, %j] : memref<3x5x40xf32>
        %d = arith.subf %v, %m : f32
        %sq = arith.mulf %d, %d : f32
        %r = arith.addf %acc, %sq : f32
        scf.yield %r : f32
      }
      %t0 = memref.load %s2[%a, %b] : memref<3x5xf32>
      %t = scf.for %j = %c0 to %c40 step %c1 iter_args(%acc = %t0) -> f32 {
        %v = memref.load %x[%a, %b, %j] : memref<3x5x40xf32>
        %d = arith.subf %v, %m : f32
        %ji = arith.index_cast %j : index to i64
        %jf = arith.sitofp %ji : i64 to f32
        %p = arith.mulf %d, %s : f32
        %yv = arith.addf %p, %jf : f32
        memref.store %yv, %y[%a, %b, %j] : memref<3x5x40xf32>
        %ev = arith.addf %d, %one : f32
        memref.store %ev, %e[%a, %b, %j] : memref<3x5x40xf32>
        %r = arith.addf %acc, %v : f32
        scf.yield %r : f32
      }
      memref.store %t, %s2[%a, %b] : memref<3x5xf32>
    }
  }
  return
}

// x[a][b][j] = (7 a + 3 b + 5 j) mod 11; s2[a][b] = 100 + a + b.
func.func @fill(%x: memref<3x5x40xf32>, %s2: memref<3x5xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c7 = arith.constant 7 : index
  %c11 = arith.constant 11 : index
  %c40 = arith.constant 40 : index
  %c100 = arith.constant 100 : index
  scf.for %a = %c0 to %c3 step %c1 {
    scf.for %b = %c0 to %c5 step %c1 {
      %ab = arith.addi %a, %b : index
      %sv = arith.addi %ab, %c100 : index
      %si = arith.index_cast %sv : index to i64
      %sf = arith.sitofp %si : i64 to f32
      memref.store %sf, %s2[%a, %b] : memref<3x5xf32>
      scf.for %j = %c0 to %c40 step %c1 {
        %a7 = arith.muli %a, %c7 : index
        %b3 = arith.muli %b, %c3 : index
        %j5 = arith.muli %j, %c5 : index
        %t = arith.addi %a7, %b3 : index
        %u = arith.addi %t, %j5 : index
        %v = arith.remui %u, %c11 : index
        %vi = arith.index_cast %v : index to i64
        %vf = arith.sitofp %vi : i64 to f32
        memref.store %vf, %x[%a, %b, %j] : memref<3x5x40xf32>
      }
    }
  }
  return
}

// out[0] = sum |p - q| over 600 elements, plus the same over 15 for u, w.
func.func @difference(%p: memref<3x5x40xf32>, %q: memref<3x5x40xf32>,
                      %u: memref<3x5xf32>, %w: memref<3x5xf32>,
                      %out: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c40 = arith.constant 40 : index
  scf.for %a = %c0 to %c3 step %c1 {
    scf.for %b = %c0 to %c5 step %c1 {
      %u0 = memref.load %u[%a, %b] : memref<3x5xf32>
      %w0 = memref.load %w[%a, %b] : memref<3x5xf32>
      %d0 = arith.subf %u0, %w0 : f32
      %n0d = arith.negf %d0 : f32
      %a0 = arith.maximumf %d0, %n0d : f32
      %o0 = memref.load %out[%c0] : memref<1xf32>
      %n0 = arith.addf %o0, %a0 : f32
      memref.store %n0, %out[%c0] : memref<1xf32>
      scf.for %j = %c0 to %c40 step %c1 {
        %pv = memref.load %p[%a, %b, %j] : memref<3x5x40xf32>
        %qv = memref.load %q[%a, %b, %j] : memref<3x5x40xf32>
        %d = arith.subf %pv, %qv : f32
        %nd = arith.negf %d : f32
        %ad = arith.maximumf %d, %nd : f32
        %o = memref.load %out[%c0] : memref<1xf32>
        %n = arith.addf %o, %ad : f32
        memref.store %n, %out[%c0] : memref<1xf32>
      }
    }
  }
  return
}

// out[0] = sum of p.
func.func @total(%p: memref<3x5x40xf32>, %out: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c40 = arith.constant 40 : index
  scf.for %a = %c0 to %c3 step %c1 {
    scf.for %b = %c0 to %c5 step %c1 {
      scf.for %j = %c0 to %c40 step %c1 {
        %pv = memref.load %p[%a, %b, %j] : memref<3x5x40xf32>
        %o = memref.load %out[%c0] : memref<1xf32>
        %n = arith.addf %o, %pv : f32
        memref.store %n, %out[%c0] : memref<1xf32>
      }
    }
  }
  return
}

func.func @main() {
  %zero = arith.constant 0.0 : f32
  %x = memref.alloc() : memref<3x5x40xf32>
  %m = memref.alloc() : memref<3x5xf32>
  %e = memref.alloc() : memref<3x5x40xf32>
  %s = memref.alloc() : memref<3x5xf32>
  %y = memref.alloc() : memref<3x5x40xf32>
  %s2 = memref.alloc() : memref<3x5xf32>
  %er = memref.alloc() : memref<3x5x40xf32>
  %yr = memref.alloc() : memref<3x5x40xf32>
  %s2r = memref.alloc() : memref<3x5xf32>
  %sum = memref.alloc() : memref<1xf32>
  %diff = memref.alloc() : memref<1xf32>
  call @fill(%x, %s2) : (memref<3x5x40xf32>, memref<3x5xf32>) -> ()
  call @fill(%x, %s2r) : (memref<3x5x40xf32>, memref<3x5xf32>) -> ()
  call @rows(%x, %m, %e, %s, %y, %s2)
      : (memref<3x5x40xf32>, memref<3x5xf32>, memref<3x5x40xf32>,
         memref<3x5xf32>, memref<3x5x40xf32>, memref<3x5xf32>) -> ()
  call @reference(%x, %er, %yr, %s2r)
      : (memref<3x5x40xf32>, memref<3x5x40xf32>, memref<3x5x40xf32>,
         memref<3x5xf32>) -> ()
  linalg.fill ins(%zero : f32) outs(%sum : memref<1xf32>)
  linalg.fill ins(%zero : f32) outs(%diff : memref<1xf32>)
  call @total(%y, %sum) : (memref<3x5x40xf32>, memref<1xf32>) -> ()
  call @difference(%y, %yr, %s2, %s2r, %diff)
      : (memref<3x5x40xf32>, memref<3x5x40xf32>, memref<3x5xf32>,
         memref<3x5xf32>, memref<1xf32>) -> ()
  call @difference(%e, %er, %s2, %s2r, %diff)
      : (memref<3x5x40xf32>, memref<3x5x40xf32>, memref<3x5xf32>,
         memref<3x5xf32>, memref<1xf32>) -> ()
  %su = memref.cast %sum : memref<1xf32> to memref<*xf32>
  call @printMemrefF32(%su) : (memref<*xf32>) -> ()
  %du = memref.cast %diff : memref<1xf32> to memref<*xf32>
  call @printMemrefF32(%du) : (memref<*xf32>) -> ()
  return
}
