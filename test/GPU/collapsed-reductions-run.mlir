// REQUIRES: mlir-runner
// Reductions over several adjacent loops (a loss's mean over [batch,
// tokens], a bias gradient's sum over them) run as one loop in a row
// kernel (--zb-map-to-gpu collapses the loops), and compute what the ops
// say: the kernels run on the CPU (--zb-emulate-gpu). A total of 6 x 50
// elements into a scalar the caller set, and a sum of [4, 50, 5] over its
// first two dims. The values are integers, so every summation order gives
// them exactly.
// RUN: zb-opt %s --zb-map-to-gpu=block-size=16 --zb-emulate-gpu \
// RUN:   | mlir-opt --convert-linalg-to-loops --convert-scf-to-cf --expand-strided-metadata --lower-affine \
// RUN:       --finalize-memref-to-llvm --convert-arith-to-llvm --convert-func-to-llvm \
// RUN:       --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_lib_dir/libmlir_runner_utils%shlibext,%mlir_lib_dir/libmlir_c_runner_utils%shlibext \
// RUN:   | FileCheck %s
// RUN: zb-opt %s --zb-map-to-gpu=block-size=16 | FileCheck %s --check-prefix=MAP

// MAP-LABEL: func.func @total(
// MAP: memref.collapse_shape %{{.*}} {{\[}}[0, 1]] : memref<6x50xf32> into memref<300xf32>
// MAP: gpu.launch
// MAP: gpu.all_reduce
// MAP-LABEL: func.func @bias(
// MAP: memref.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : memref<4x50x5xf32> into memref<200x5xf32>
// MAP: gpu.launch
// MAP: gpu.all_reduce

// 7 + sum of 0 ... 299.
// CHECK: [44857]
// sum_b,t 250 b + 5 t + c = 99500 + 200 c.
// CHECK: [99500, 99700, 99900, 100100, 100300]

func.func private @printMemrefF32(memref<*xf32>)

func.func @total(%x: memref<6x50xf32>, %s: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                  iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<6x50xf32>) outs(%s : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  }
  return
}

func.func @bias(%dy: memref<4x50x5xf32>, %db: memref<5xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, b, t) -> (b, t, c)>, affine_map<(c, b, t) -> (c)>],
                  iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%dy : memref<4x50x5xf32>) outs(%db : memref<5xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// x[i][j] = 50 i + j; dy[b][t][c] = 250 b + 5 t + c.
func.func @fill(%x: memref<6x50xf32>, %dy: memref<4x50x5xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]} outs(%x : memref<6x50xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %c50 = arith.constant 50 : index
    %i50 = arith.muli %i, %c50 : index
    %v = arith.addi %i50, %j : index
    %n = arith.index_cast %v : index to i64
    %f = arith.sitofp %n : i64 to f32
    linalg.yield %f : f32
  }
  linalg.generic {indexing_maps = [affine_map<(b, t, c) -> (b, t, c)>],
                  iterator_types = ["parallel", "parallel", "parallel"]} outs(%dy : memref<4x50x5xf32>) {
  ^bb0(%out: f32):
    %b = linalg.index 0 : index
    %t = linalg.index 1 : index
    %c = linalg.index 2 : index
    %c250 = arith.constant 250 : index
    %c5 = arith.constant 5 : index
    %b250 = arith.muli %b, %c250 : index
    %t5 = arith.muli %t, %c5 : index
    %bt = arith.addi %b250, %t5 : index
    %v = arith.addi %bt, %c : index
    %n = arith.index_cast %v : index to i64
    %f = arith.sitofp %n : i64 to f32
    linalg.yield %f : f32
  }
  return
}

func.func @main() {
  %seven = arith.constant 7.0 : f32
  %zero = arith.constant 0.0 : f32
  %x = memref.alloc() : memref<6x50xf32>
  %dy = memref.alloc() : memref<4x50x5xf32>
  %s = memref.alloc() : memref<1xf32>
  %db = memref.alloc() : memref<5xf32>
  call @fill(%x, %dy) : (memref<6x50xf32>, memref<4x50x5xf32>) -> ()
  linalg.fill ins(%seven : f32) outs(%s : memref<1xf32>)
  linalg.fill ins(%zero : f32) outs(%db : memref<5xf32>)
  %scalar = memref.collapse_shape %s [] : memref<1xf32> into memref<f32>
  call @total(%x, %scalar) : (memref<6x50xf32>, memref<f32>) -> ()
  call @bias(%dy, %db) : (memref<4x50x5xf32>, memref<5xf32>) -> ()
  %su = memref.cast %s : memref<1xf32> to memref<*xf32>
  call @printMemrefF32(%su) : (memref<*xf32>) -> ()
  %du = memref.cast %db : memref<5xf32> to memref<*xf32>
  call @printMemrefF32(%du) : (memref<*xf32>) -> ()
  return
}
