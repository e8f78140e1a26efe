// RUN: zb-opt %s --zb-split-backward -split-input-file | FileCheck %s
// RUN: zb-opt %s --zb-split-backward -split-input-file | zb-opt -split-input-file | FileCheck %s

// A hand-written backward (as a frontend may hand in): B keeps only the
// input gradient dy * w; the weight gradient's ops (mulf, addf) move to W.
// B hands W what W reads (dy and the stashed input); W's block arguments
// are exactly B's stash. Costs and stash bytes are set (the parameter %b is
// not counted in mem_b: 16 bytes = the input; mem_w = dy + input).
// CHECK-LABEL: func.func @hand_written
// CHECK: pipe.stage 1 on rank 1
// CHECK-SAME: attributes {cost_b = 4.000000e+00 : f64, cost_f = 4.000000e+00 : f64, cost_w = 8.000000e+00 : f64, mem_b = 16 : i64, mem_w = 32 : i64}
// CHECK: } backward_input {
// CHECK-NEXT: ^bb0(%[[A:[^:]*]]: tensor<4xf32>, %[[B:[^:]*]]: tensor<4xf32>, %[[DY:[^:]*]]: tensor<4xf32>):
// CHECK-NEXT: %[[DA:.*]] = arith.mulf %[[DY]], %[[B]] : tensor<4xf32>
// CHECK-NEXT: pipe.yield %[[DA]] : tensor<4xf32> stash(%[[DY]], %[[A]] : tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT: } backward_weight {
// CHECK-NEXT: ^bb0(%[[WDY:[^:]*]]: tensor<4xf32>, %[[WA:[^:]*]]: tensor<4xf32>):
// CHECK-NEXT: %[[T:.*]] = arith.mulf %[[WDY]], %[[WA]] : tensor<4xf32>
// CHECK-NEXT: %[[DB:.*]] = arith.addf %[[T]], %[[T]] : tensor<4xf32>
// CHECK-NEXT: pipe.yield %[[DB]] : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NOT: backward {
func.func @hand_written(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = pipe.stage 1 on rank 1 inputs(%x : tensor<4xf32>) params(%w : tensor<4xf32>) -> tensor<4xf32>
    forward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %r = arith.mulf %a, %b : tensor<4xf32>
      pipe.yield %r : tensor<4xf32> stash(%a, %b : tensor<4xf32>, tensor<4xf32>)
    } backward {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %dy: tensor<4xf32>):
      %da = arith.mulf %dy, %b : tensor<4xf32>
      %t = arith.mulf %dy, %a : tensor<4xf32>
      %db = arith.addf %t, %t : tensor<4xf32>
      pipe.yield %da, %db : tensor<4xf32>, tensor<4xf32>
    }
  return %y : tensor<4xf32>
}

// -----

// The backward --zb-autodiff derives for exp(x @ w): B holds the exp
// adjoint and the dX contraction; the dW contraction (a reduction over the
// rows into an 8x8 tensor) and its zero fill are W's alone. W reads only its
// block arguments, whose types are B's stash types.
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d2)>
#map3 = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-LABEL: func.func @matmul_stage
// CHECK: pipe.stage 1 on rank 1
// CHECK-SAME: attributes {cost_b = {{.*}} : f64, cost_f = {{.*}} : f64, cost_w = {{.*}} : f64, mem_b = 256 : i64, mem_w = 256 : i64}
// CHECK: } backward_input {
// CHECK-NEXT: ^bb0(%{{[^:]*}}: tensor<4x8xf32>, %[[X:[^:]*]]: tensor<4x8xf32>, %[[W:[^:]*]]: tensor<8x8xf32>, %[[DY:[^:]*]]: tensor<4x8xf32>):
// CHECK-NOT: tensor.empty() : tensor<8x8xf32>
// CHECK-NOT: outs({{.*}}tensor<8x8xf32>)
// CHECK-NOT: "reduction", "parallel", "parallel"
// CHECK: %[[DM:.*]] = linalg.generic {{.*}}ins(%[[DY]],
// CHECK: math.exp
// CHECK-NOT: tensor.empty() : tensor<8x8xf32>
// CHECK-NOT: outs({{.*}}tensor<8x8xf32>)
// CHECK-NOT: "reduction", "parallel", "parallel"
// CHECK: %[[DX:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[DM]], %[[X]], %[[W]] :
// CHECK-NOT: tensor.empty() : tensor<8x8xf32>
// CHECK-NOT: outs({{.*}}tensor<8x8xf32>)
// CHECK-NOT: "reduction", "parallel", "parallel"
// CHECK: pipe.yield %[[DX]] : tensor<4x8xf32> stash(%[[DM]], %[[X]], %[[W]] : [[S0:tensor<[^>]*>]], [[S1:tensor<[^>]*>]], [[S2:tensor<[^>]*>]])
// CHECK-NEXT: } backward_weight {
// CHECK-NEXT: ^bb0(%[[WDM:[^:]*]]: [[S0]], %[[WX:[^:]*]]: [[S1]], %[[WW:[^:]*]]: [[S2]]):
// CHECK: %[[ZERO:.*]] = linalg.fill {{.*}} -> tensor<8x8xf32>
// CHECK: %[[DW:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "parallel"]} ins(%[[WDM]], %[[WX]], %[[WW]] : {{.*}}) outs(%[[ZERO]] :
// CHECK: pipe.yield %[[DW]] : tensor<8x8xf32>
func.func @matmul_stage(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32> {zb.param}) -> tensor<4x8xf32> {
  %0 = pipe.stage 1 on rank 1 inputs(%arg0 : tensor<4x8xf32>) params(%arg1 : tensor<8x8xf32>) -> tensor<4x8xf32> forward {
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x8xf32>):
    %cst = arith.constant 0.000000e+00 : f32
    %1 = tensor.empty() : tensor<4x8xf32>
    %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<4x8xf32>) -> tensor<4x8xf32>
    %3 = linalg.matmul ins(%arg2, %arg3 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%2 : tensor<4x8xf32>) -> tensor<4x8xf32>
    %4 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%3 : tensor<4x8xf32>) outs(%1 : tensor<4x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %5 = math.exp %in : f32
      linalg.yield %5 : f32
    } -> tensor<4x8xf32>
    pipe.yield %4 : tensor<4x8xf32> stash(%3, %arg2, %arg3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>)
  } backward {
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<4x8xf32>, %arg4: tensor<8x8xf32>, %arg5: tensor<4x8xf32>):
    %1 = tensor.empty() : tensor<4x8xf32>
    %2 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg5, %arg2 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%1 : tensor<4x8xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %9 = math.exp %in_1 : f32
      %10 = arith.mulf %9, %in : f32
      linalg.yield %10 : f32
    } -> tensor<4x8xf32>
    %3 = tensor.empty() : tensor<4x8xf32>
    %cst = arith.constant 0.000000e+00 : f32
    %4 = linalg.fill ins(%cst : f32) outs(%3 : tensor<4x8xf32>) -> tensor<4x8xf32>
    %5 = linalg.generic {indexing_maps = [#map1, #map2, #map3, #map2], iterator_types = ["parallel", "reduction", "parallel"]} ins(%2, %arg3, %arg4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>) outs(%4 : tensor<4x8xf32>) {
    ^bb0(%in: f32, %in_1: f32, %in_2: f32, %out: f32):
      %11 = arith.mulf %in_2, %in : f32
      %12 = arith.addf %out, %11 : f32
      linalg.yield %12 : f32
    } -> tensor<4x8xf32>
    %6 = tensor.empty() : tensor<8x8xf32>
    %cst_0 = arith.constant 0.000000e+00 : f32
    %7 = linalg.fill ins(%cst_0 : f32) outs(%6 : tensor<8x8xf32>) -> tensor<8x8xf32>
    %8 = linalg.generic {indexing_maps = [#map1, #map2, #map3, #map3], iterator_types = ["reduction", "parallel", "parallel"]} ins(%2, %arg3, %arg4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>) outs(%7 : tensor<8x8xf32>) {
    ^bb0(%in: f32, %in_1: f32, %in_2: f32, %out: f32):
      %11 = arith.mulf %in_1, %in : f32
      %12 = arith.addf %out, %11 : f32
      linalg.yield %12 : f32
    } -> tensor<8x8xf32>
    pipe.yield %5, %8 : tensor<4x8xf32>, tensor<8x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// The first stage has no inputs, so no input gradient to send: B is empty
// and only hands the cotangent and the forward stash on to W (cost_b = 0).
#map = affine_map<(d0, d1, d2) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d2)>
#map2 = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-LABEL: func.func @first_stage
// CHECK: pipe.stage 0 on rank 0 data(
// CHECK-SAME: cost_b = 0.000000e+00 : f64
// CHECK-SAME: cost_w =
// CHECK-SAME: mem_w =
// CHECK: } backward_input {
// CHECK-NEXT: ^bb0(%[[X:[^:]*]]: tensor<4x8xf32>, %[[DY:[^:]*]]: tensor<4x8xf32>):
// CHECK-NEXT: pipe.yield stash(%[[DY]], %[[X]] : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT: } backward_weight {
// CHECK-NEXT: ^bb0(%[[WDY:[^:]*]]: tensor<4x8xf32>, %[[WX:[^:]*]]: tensor<4x8xf32>):
// CHECK: linalg.generic {{.*}} ins(%[[WDY]], %[[WX]] :
// CHECK: pipe.yield %{{.*}} : tensor<8x8xf32>
func.func @first_stage(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32> {zb.param}) -> tensor<4x8xf32> {
  %0 = pipe.stage 0 on rank 0 data(%arg0 : tensor<4x8xf32>) params(%arg1 : tensor<8x8xf32>) -> tensor<4x8xf32> forward {
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x8xf32>):
    %cst = arith.constant 0.000000e+00 : f32
    %1 = tensor.empty() : tensor<4x8xf32>
    %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<4x8xf32>) -> tensor<4x8xf32>
    %3 = linalg.matmul ins(%arg2, %arg3 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%2 : tensor<4x8xf32>) -> tensor<4x8xf32>
    pipe.yield %3 : tensor<4x8xf32> stash(%arg2 : tensor<4x8xf32>)
  } backward {
  ^bb0(%arg2: tensor<4x8xf32>, %arg4: tensor<4x8xf32>):
    %1 = tensor.empty() : tensor<8x8xf32>
    %cst = arith.constant 0.000000e+00 : f32
    %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<8x8xf32>) -> tensor<8x8xf32>
    %3 = linalg.generic {indexing_maps = [#map, #map1, #map2], iterator_types = ["reduction", "parallel", "parallel"]} ins(%arg4, %arg2 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%2 : tensor<8x8xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %6 = arith.mulf %in_0, %in : f32
      %7 = arith.addf %out, %6 : f32
      linalg.yield %7 : f32
    } -> tensor<8x8xf32>
    pipe.yield %3 : tensor<8x8xf32>
  }
  return %0 : tensor<4x8xf32>
}
