// RUN: zb-opt %s --zb-split-long-sums="chain=16" -split-input-file | FileCheck %s
// RUN: not zb-opt %s --zb-split-long-sums="chain=1" 2>&1 | FileCheck %s --check-prefix=CHAIN

// CHAIN: error: --zb-split-long-sums: chain must be at least 2, not 1

// A sum of 256 x 8 = 2048 squares into one f32, in chains of at most 16:
// dim 0 (256) in 128 blocks of 2 (2 x 8 = 16 terms each) into a buffer of
// 128 partial sums, which are added in 8 blocks of 16, and those 8 into the
// output (its init, the value already there, first).
// CHECK-LABEL: func.func @full(
// CHECK-SAME: %[[X:[^:]*]]: memref<256x8xf32>, %[[OUT:[^:]*]]: memref<f32>)
// CHECK: %[[XB:.*]] = memref.expand_shape %[[X]] {{\[}}[0, 1], [2]] output_shape [128, 2, 8] : memref<256x8xf32> into memref<128x2x8xf32>
// CHECK: %[[P:.*]] = memref.alloc() : memref<128xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[P]] : memref<128xf32>)
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "reduction"]} ins(%[[XB]] : memref<128x2x8xf32>) outs(%[[P]] : memref<128xf32>)
// CHECK: arith.mulf
// CHECK: %[[PB:.*]] = memref.expand_shape %[[P]] {{\[}}[0, 1]] output_shape [8, 16]
// CHECK: %[[Q:.*]] = memref.alloc() : memref<8xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[PB]] : memref<8x16xf32>) outs(%[[Q]] : memref<8xf32>)
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction"]} ins(%[[Q]] : memref<8xf32>) outs(%[[OUT]] : memref<f32>)
// CHECK-NEXT: ^bb0(%[[E:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[ACC]], %[[E]] : f32
// CHECK-NEXT: linalg.yield %[[S]]
// CHECK: memref.dealloc %[[Q]]
// CHECK: memref.dealloc %[[P]]
#all = affine_map<(m, k) -> (m, k)>
#none = affine_map<(m, k) -> ()>
func.func @full(%x: memref<256x8xf32>, %out: memref<f32>) {
  linalg.generic {indexing_maps = [#all, #none], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<256x8xf32>) outs(%out : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A column sum (a bias gradient: over 100 rows per column) whose body reads
// the row index: 10 blocks of 10 rows, the index rebuilt as block * 10 +
// row in the block.
// CHECK-LABEL: func.func @columns(
// CHECK: memref.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [10, 10, 4] : memref<100x4xf32> into memref<10x10x4xf32>
// CHECK: memref.alloc() : memref<4x10xf32>
// CHECK: linalg.generic {indexing_maps = [#[[IN:.*]], #[[PART:.*]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK: %[[J:.*]] = linalg.index 1 : index
// CHECK-NEXT: %[[I:.*]] = linalg.index 2 : index
// CHECK-NEXT: %[[TEN:.*]] = arith.constant 10 : index
// CHECK-NEXT: %[[START:.*]] = arith.muli %[[J]], %[[TEN]] : index
// CHECK-NEXT: %[[ROW:.*]] = arith.addi %[[START]], %[[I]] : index
// CHECK-NEXT: arith.index_cast %[[ROW]]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : memref<4x10xf32>) outs(%{{.*}} : memref<4xf32>)
#cols = affine_map<(n, m) -> (m, n)>
#col = affine_map<(n, m) -> (n)>
func.func @columns(%x: memref<100x4xf32>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [#cols, #col], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<100x4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %m = linalg.index 1 : index
    %mi = arith.index_cast %m : index to i64
    %mf = arith.sitofp %mi : i64 to f32
    %t = arith.mulf %a, %mf : f32
    %s = arith.addf %t, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A row sum along a loop of a prime length (67), whose body reads the
// column index: no divisor gives blocks of 16 or fewer, so 4 blocks of
// ceil(67 / 5) = 14 columns (the first 56, viewed as [4, 14]) and a last
// block of the 11 left, summed by a copy of the op over a view of those
// columns into the fifth partial sum, its index counted from 56.
// CHECK-LABEL: func.func @prime(
// CHECK-SAME: %[[X:[^:]*]]: memref<4x67xf32>, %[[OUT:[^:]*]]: memref<4xf32>)
// CHECK: %[[HEAD:.*]] = memref.subview %[[X]][0, 0] [4, 56] [1, 1] : memref<4x67xf32> to memref<4x56xf32, strided<[67, 1]>>
// CHECK: %[[XB:.*]] = memref.expand_shape %[[HEAD]] {{\[}}[0], [1, 2]] output_shape [4, 4, 14] : memref<4x56xf32, strided<[67, 1]>> into memref<4x4x14xf32, strided<[67, 14, 1]>>
// CHECK: %[[REST:.*]] = memref.subview %[[X]][0, 56] [4, 11] [1, 1] : memref<4x67xf32> to memref<4x11xf32, strided<[67, 1], offset: 56>>
// CHECK: %[[P:.*]] = memref.alloc() : memref<4x5xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[P]] : memref<4x5xf32>)
// CHECK: %[[FULL:.*]] = memref.subview %[[P]][0, 0] [4, 4] [1, 1]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[XB]] : {{.*}}) outs(%[[FULL]] : memref<4x4xf32, strided<[5, 1]>>)
// CHECK: arith.constant 14 : index
// CHECK: %[[LAST:.*]] = memref.subview %[[P]][0, 4] [4, 1] [1, 1] : memref<4x5xf32> to memref<4xf32, strided<[5], offset: 4>>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[REST]] : {{.*}}) outs(%[[LAST]] : {{.*}})
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[K:.*]] = linalg.index 1 : index
// CHECK-NEXT: %[[START:.*]] = arith.constant 56 : index
// CHECK-NEXT: %[[COL:.*]] = arith.addi %[[START]], %[[K]] : index
// CHECK-NEXT: arith.index_cast %[[COL]]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[P]] : memref<4x5xf32>) outs(%[[OUT]] : memref<4xf32>)
// CHECK: memref.dealloc %[[P]]
#prow = affine_map<(m, k) -> (m, k)>
#pone = affine_map<(m, k) -> (m)>
func.func @prime(%x: memref<4x67xf32>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [#prow, #pone], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x67xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%e: f32, %acc: f32):
    %k = linalg.index 1 : index
    %ki = arith.index_cast %k : index to i64
    %kf = arith.sitofp %ki : i64 to f32
    %t = arith.mulf %e, %kf : f32
    %s = arith.addf %acc, %t : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Left as they are: a sum of 16 terms (the chain), a maximum (exact), an
// f64 sum, a sum on tensors (before bufferization).
// CHECK-LABEL: func.func @kept(
// CHECK-NOT: memref.alloc
// CHECK-NOT: expand_shape
// CHECK: return
#row = affine_map<(m, k) -> (m, k)>
#one = affine_map<(m, k) -> (m)>
func.func @kept(%x: memref<4x16xf32>, %y: memref<4x64xf32>, %z: memref<4x64xf64>, %t: tensor<4x64xf32>,
                %a: memref<4xf32>, %b: memref<4xf32>, %c: memref<4xf64>,
                %d: tensor<4xf32>) -> tensor<4xf32> {
  linalg.generic {indexing_maps = [#row, #one], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x16xf32>) outs(%a : memref<4xf32>) {
  ^bb0(%e: f32, %acc: f32):
    %s = arith.addf %acc, %e : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#row, #one], iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<4x64xf32>) outs(%b : memref<4xf32>) {
  ^bb0(%e: f32, %acc: f32):
    %s = arith.maximumf %acc, %e : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#row, #one], iterator_types = ["parallel", "reduction"]}
      ins(%z : memref<4x64xf64>) outs(%c : memref<4xf64>) {
  ^bb0(%e: f64, %acc: f64):
    %s = arith.addf %acc, %e : f64
    linalg.yield %s : f64
  }
  %r = linalg.generic {indexing_maps = [#row, #one], iterator_types = ["parallel", "reduction"]}
      ins(%t : tensor<4x64xf32>) outs(%d : tensor<4xf32>) {
  ^bb0(%e: f32, %acc: f32):
    %s = arith.addf %acc, %e : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A dynamic buffer is left as it is (the blocks are static views).
// CHECK-LABEL: func.func @dynamic_rows
// CHECK-NOT: expand_shape
// CHECK: linalg.generic
// CHECK-NOT: expand_shape
// CHECK: return
#dyn_row = affine_map<(m, k) -> (m, k)>
#dyn_one = affine_map<(m, k) -> (m)>
func.func @dynamic_rows(%x: memref<?x67xf32>, %out: memref<?xf32>) {
  linalg.generic {indexing_maps = [#dyn_row, #dyn_one], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x67xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%e: f32, %acc: f32):
    %s = arith.addf %acc, %e : f32
    linalg.yield %s : f32
  }
  return
}
