// REQUIRES: mlir-runner
// The two-kernel column reductions of --zb-map-to-gpu compute what the op
// says: their loops run on the CPU (device buffers turned into host ones).
// 300 rows: four chunks of 64 and one of 44; the output's initial value
// folds in; a sum of an elementwise function of the input, a max, and a sum
// over the middle loop of three into a transposed output. The values are
// integers, so every summation order gives them exactly.
// RUN: zb-opt %s --one-shot-bufferize="bufferize-function-boundaries" --zb-map-to-gpu \
// RUN:   | sed -e 's/gpu\.alloc  *()/memref.alloc()/' -e 's/gpu\.dealloc/memref.dealloc/' \
// RUN:   | mlir-opt --convert-scf-to-cf --expand-strided-metadata --lower-affine \
// RUN:       --finalize-memref-to-llvm --convert-arith-to-llvm --convert-func-to-llvm \
// RUN:       --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_lib_dir/libmlir_runner_utils%shlibext,%mlir_lib_dir/libmlir_c_runner_utils%shlibext \
// RUN:   | FileCheck %s
// RUN: zb-opt %s --one-shot-bufferize="bufferize-function-boundaries" --zb-map-to-gpu \
// RUN:   | FileCheck %s --check-prefix=MAP

// Every reduction takes the two-kernel form.
// MAP-COUNT-2: gpu.alloc () : memref<5x3xf32>
// MAP: gpu.alloc () : memref<5x12xf32>

func.func private @printMemrefF32(memref<*xf32>)

// x[i][j] = 3 i + j.
func.func @input() -> tensor<300x3xf32> {
  %e = tensor.empty() : tensor<300x3xf32>
  %x = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]} outs(%e : tensor<300x3xf32>) {
    ^bb0(%out: f32):
      %i = linalg.index 0 : index
      %j = linalg.index 1 : index
      %c3 = arith.constant 3 : index
      %i3 = arith.muli %i, %c3 : index
      %v = arith.addi %i3, %j : index
      %n = arith.index_cast %v : index to i64
      %f = arith.sitofp %n : i64 to f32
      linalg.yield %f : f32
  } -> tensor<300x3xf32>
  return %x : tensor<300x3xf32>
}

// 64 + sum_i 2 x[i][j] = 269164 + 600 j.
func.func @twice_sum(%x: tensor<300x3xf32>) -> tensor<3xf32> {
  %init64 = arith.constant 64.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<3xf32>
  %init = linalg.fill ins(%init64 : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %sum = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>],
      iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<300x3xf32>) outs(%init : tensor<3xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %d = arith.mulf %a, %two : f32
      %s = arith.addf %d, %acc : f32
      linalg.yield %s : f32
  } -> tensor<3xf32>
  return %sum : tensor<3xf32>
}

// max(-1, max_i x[i][j]) = 897 + j.
func.func @column_max(%x: tensor<300x3xf32>) -> tensor<3xf32> {
  %low = arith.constant -1.0 : f32
  %e = tensor.empty() : tensor<3xf32>
  %init = linalg.fill ins(%low : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %max = linalg.reduce ins(%x : tensor<300x3xf32>) outs(%init : tensor<3xf32>)
      dimensions = [0]
    (%a: f32, %acc: f32) {
      %m = arith.maximumf %a, %acc : f32
      linalg.yield %m : f32
    }
  return %max : tensor<3xf32>
}

// y[i][k][j] = 3 k + j + 1000 i; out[j][i] = sum_k y[i][k][j]
// = 134550 + 300 j + 300000 i.
func.func @middle_sum(%x: tensor<300x3xf32>) -> tensor<3x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e3 = tensor.empty() : tensor<4x300x3xf32>
  %y = linalg.generic {
      indexing_maps = [affine_map<(i, k, j) -> (k, j)>, affine_map<(i, k, j) -> (i, k, j)>],
      iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<300x3xf32>) outs(%e3 : tensor<4x300x3xf32>) {
    ^bb0(%a: f32, %out: f32):
      %i = linalg.index 0 : index
      %n = arith.index_cast %i : index to i64
      %f = arith.sitofp %n : i64 to f32
      %thousand = arith.constant 1000.0 : f32
      %t = arith.mulf %f, %thousand : f32
      %v = arith.addf %a, %t : f32
      linalg.yield %v : f32
  } -> tensor<4x300x3xf32>
  %e = tensor.empty() : tensor<3x4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %sum = linalg.generic {
      indexing_maps = [affine_map<(i, k, j) -> (i, k, j)>, affine_map<(i, k, j) -> (j, i)>],
      iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%y : tensor<4x300x3xf32>) outs(%init : tensor<3x4xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
  } -> tensor<3x4xf32>
  return %sum : tensor<3x4xf32>
}

func.func @main() {
  %x = call @input() : () -> tensor<300x3xf32>
  %sum = call @twice_sum(%x) : (tensor<300x3xf32>) -> tensor<3xf32>
  %max = call @column_max(%x) : (tensor<300x3xf32>) -> tensor<3xf32>
  %s = bufferization.to_buffer %sum : tensor<3xf32> to memref<3xf32>
  %su = memref.cast %s : memref<3xf32> to memref<*xf32>
  call @printMemrefF32(%su) : (memref<*xf32>) -> ()
  %m = bufferization.to_buffer %max : tensor<3xf32> to memref<3xf32>
  %mu = memref.cast %m : memref<3xf32> to memref<*xf32>
  call @printMemrefF32(%mu) : (memref<*xf32>) -> ()
  %mid = call @middle_sum(%x) : (tensor<300x3xf32>) -> tensor<3x4xf32>
  %d = bufferization.to_buffer %mid : tensor<3x4xf32> to memref<3x4xf32>
  %du = memref.cast %d : memref<3x4xf32> to memref<*xf32>
  call @printMemrefF32(%du) : (memref<*xf32>) -> ()
  return
}

// CHECK: [269164, 269764, 270364]
// CHECK: [897, 898, 899]
// CHECK: {{\[}}[134550, 434550, 734550, 1.03455e+06],
// CHECK-NEXT: [134850, 434850, 734850, 1.03485e+06],
// CHECK-NEXT: [135150, 435150, 735150, 1.03515e+06]]
