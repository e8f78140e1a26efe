// RUN: zb-opt %s -split-input-file --zb-vectorize-row-reductions | FileCheck %s
// RUN: zb-opt %s -split-input-file --zb-vectorize-row-reductions="width=4" | FileCheck %s --check-prefix=FOUR
// RUN: not zb-opt %s --zb-vectorize-row-reductions="width=12" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: --zb-vectorize-row-reductions: width must be a power of two, not 12

// A variance: the rows read 16 at a time, the mean broadcast, the lanes
// summed in order and then halved four times, the init folded in last.
// CHECK-LABEL: func.func @variance(
// CHECK-SAME: %[[X:.*]]: memref<4x64xf32>, %[[M:.*]]: memref<4xf32>, %[[OUT:.*]]: memref<4xf32>)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : index
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: %[[ACC:.*]] = scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %[[C16]] iter_args(%[[A:.*]] = %[[ZERO]]) -> (vector<16xf32>) {
// CHECK: %[[XV:.*]] = vector.load %[[X]][%[[I]], %[[J]]] : memref<4x64xf32>, vector<16xf32>
// CHECK: %[[MS:.*]] = memref.load %[[M]][%[[I]]] : memref<4xf32>
// CHECK: %[[MV:.*]] = vector.broadcast %[[MS]] : f32 to vector<16xf32>
// CHECK: %[[D:.*]] = arith.subf %[[XV]], %[[MV]] : vector<16xf32>
// CHECK: %[[SQ:.*]] = arith.mulf %[[D]], %[[D]] : vector<16xf32>
// CHECK: %[[SUM:.*]] = arith.addf %[[SQ]], %[[A]] : vector<16xf32>
// CHECK: scf.yield %[[SUM]] : vector<16xf32>
// CHECK: %[[L8:.*]] = vector.shuffle %[[ACC]], %[[ACC]] [0, 1, 2, 3, 4, 5, 6, 7]
// CHECK: %[[H8:.*]] = vector.shuffle %[[ACC]], %[[ACC]] [8, 9, 10, 11, 12, 13, 14, 15]
// CHECK: arith.addf %[[H8]], %[[L8]] : vector<8xf32>
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3] : vector<8xf32>, vector<8xf32>
// CHECK: arith.addf {{.*}} : vector<4xf32>
// CHECK: arith.addf {{.*}} : vector<2xf32>
// CHECK: %[[ONE:.*]] = arith.addf {{.*}} : vector<1xf32>
// CHECK: %[[S:.*]] = vector.extract %[[ONE]][0] : f32 from vector<1xf32>
// CHECK: %[[OLD:.*]] = memref.load %[[OUT]][%[[I]]] : memref<4xf32>
// CHECK: %[[NEW:.*]] = arith.addf %[[S]], %[[OLD]] : f32
// CHECK: memref.store %[[NEW]], %[[OUT]][%[[I]]] : memref<4xf32>
// CHECK-NOT: linalg.generic
// FOUR-LABEL: func.func @variance(
// FOUR: step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<4xf32>)
func.func @variance(%x: memref<4x64xf32>, %m: memref<4xf32>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x, %m : memref<4x64xf32>, memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%in: f32, %mu: f32, %acc: f32):
    %d = arith.subf %in, %mu : f32
    %sq = arith.mulf %d, %d : f32
    %sum = arith.addf %sq, %acc : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// A max starts from its neutral element; a value from outside the body is
// broadcast.
// CHECK-LABEL: func.func @row_max(
// CHECK: arith.constant dense<0xFF800000> : vector<16xf32>
// CHECK: vector.broadcast %{{.*}} : f32 to vector<16xf32>
// CHECK: arith.maximumf {{.*}} : vector<16xf32>
// CHECK: arith.maximumf {{.*}} : vector<8xf32>
// CHECK-NOT: linalg.generic
func.func @row_max(%x: memref<2x3x32xf32>, %out: memref<2x3xf32>, %scale: f32) {
  linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<2x3x32xf32>) outs(%out : memref<2x3xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.mulf %in, %scale : f32
    %m = arith.maximumf %s, %acc : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// Left to the loop lowering: a row length that is not a multiple of the
// width, a column reduction (the innermost loop is parallel), a body that
// reads its position, rows read with a stride, and an output the body reads
// other than to fold into.
// CHECK-LABEL: func.func @left_alone(
// CHECK-COUNT-5: linalg.generic
// CHECK-NOT: vector.
func.func @left_alone(%a: memref<4x24xf32>, %b: memref<64x4xf32>, %c: memref<4x64xf32>,
                      %d: memref<4x64xf32, strided<[1, 4]>>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<4x24xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%b : memref<64x4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%c : memref<4x64xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %j = linalg.index 1 : index
    %jf = arith.index_cast %j : index to i32
    %f = arith.sitofp %jf : i32 to f32
    %p = arith.mulf %in, %f : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%d : memref<4x64xf32, strided<[1, 4]>>) outs(%out : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%c : memref<4x64xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %p = arith.mulf %in, %acc : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  }
  return
}
