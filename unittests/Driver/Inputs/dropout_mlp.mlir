// An MLP with training-mode dropout (p = 0.3), as zerobubble.from_torch
// exports it: the dropout mask comes from the {zb.rng} key per microbatch.
func.func @m(%x: tensor<4x8xf32>,
             %y: tensor<4xi64> {zb.range = 4 : i64},
             %p_l1_weight: tensor<16x8xf32> {zb.param = "l1.weight"},
             %p_l1_bias: tensor<16xf32> {zb.param = "l1.bias"},
             %p_l2_weight: tensor<4x16xf32> {zb.param = "l2.weight"},
             %p_l2_bias: tensor<4xf32> {zb.param = "l2.bias"},
             %zb_rng: tensor<1xi64> {zb.data = "zb_rng", zb.rng}) -> tensor<f32> {
  %empty = tensor.empty() : tensor<4x16xf32>
  %c = arith.constant 0.000000000e+00 : f32
  %init = linalg.fill ins(%c : f32) outs(%empty : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] ins(%x, %p_l1_weight : tensor<4x8xf32>, tensor<16x8xf32>) outs(%init : tensor<4x16xf32>) -> tensor<4x16xf32>
  %empty_1 = tensor.empty() : tensor<4x16xf32>
  %linear = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %p_l1_bias : tensor<4x16xf32>, tensor<16xf32>)
      outs(%empty_1 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %a_2: f32, %acc: f32):
    %t = arith.addf %a, %a_2 : f32
    linalg.yield %t : f32
  } -> tensor<4x16xf32>
  %empty_3 = tensor.empty() : tensor<4x16xf32>
  %relu = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%linear : tensor<4x16xf32>)
      outs(%empty_3 : tensor<4x16xf32>) {
  ^bb0(%a_4: f32, %acc_5: f32):
    %c_6 = arith.constant 0.000000000e+00 : f32
    %t_7 = arith.maximumf %a_4, %c_6 : f32
    linalg.yield %t_7 : f32
  } -> tensor<4x16xf32>
  %empty_8 = tensor.empty() : tensor<4x16xf32>
  %dropout = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%relu, %zb_rng : tensor<4x16xf32>, tensor<1xi64>)
      outs(%empty_8 : tensor<4x16xf32>) {
  ^bb0(%a_9: f32, %a_10: i64, %acc_11: f32):
    %i = linalg.index 0 : index
    %i_12 = arith.index_cast %i : index to i64
    %i_13 = linalg.index 1 : index
    %i_14 = arith.index_cast %i_13 : index to i64
    %c_15 = arith.constant 16 : i64
    %t_16 = arith.muli %i_12, %c_15 : i64
    %t_17 = arith.addi %t_16, %i_14 : i64
    %c_18 = arith.constant 0 : i64
    %t_19 = arith.addi %a_10, %c_18 : i64
    %c_20 = arith.constant -7046029254386353131 : i64
    %t_21 = arith.muli %t_17, %c_20 : i64
    %t_22 = arith.addi %t_19, %t_21 : i64
    %c_23 = arith.constant 30 : i64
    %t_24 = arith.shrui %t_22, %c_23 : i64
    %t_25 = arith.xori %t_22, %t_24 : i64
    %c_26 = arith.constant -4658895280553007687 : i64
    %t_27 = arith.muli %t_25, %c_26 : i64
    %c_28 = arith.constant 27 : i64
    %t_29 = arith.shrui %t_27, %c_28 : i64
    %t_30 = arith.xori %t_27, %t_29 : i64
    %c_31 = arith.constant -7723592293110705685 : i64
    %t_32 = arith.muli %t_30, %c_31 : i64
    %c_33 = arith.constant 31 : i64
    %t_34 = arith.shrui %t_32, %c_33 : i64
    %t_35 = arith.xori %t_32, %t_34 : i64
    %c_36 = arith.constant 40 : i64
    %t_37 = arith.shrui %t_35, %c_36 : i64
    %c_38 = arith.constant 5033165 : i64
    %keep = arith.cmpi uge, %t_37, %c_38 : i64
    %c_39 = arith.constant 1.428571463e+00 : f32
    %t_40 = arith.mulf %a_9, %c_39 : f32
    %c_41 = arith.constant 0.000000000e+00 : f32
    %t_42 = arith.select %keep, %t_40, %c_41 : f32
    linalg.yield %t_42 : f32
  } -> tensor<4x16xf32>
  %empty_43 = tensor.empty() : tensor<4x4xf32>
  %c_44 = arith.constant 0.000000000e+00 : f32
  %init_45 = linalg.fill ins(%c_44 : f32) outs(%empty_43 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %mm_46 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] ins(%dropout, %p_l2_weight : tensor<4x16xf32>, tensor<4x16xf32>) outs(%init_45 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %empty_47 = tensor.empty() : tensor<4x4xf32>
  %linear_1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm_46, %p_l2_bias : tensor<4x4xf32>, tensor<4xf32>)
      outs(%empty_47 : tensor<4x4xf32>) {
  ^bb0(%a_48: f32, %a_49: f32, %acc_50: f32):
    %t_51 = arith.addf %a_48, %a_49 : f32
    linalg.yield %t_51 : f32
  } -> tensor<4x4xf32>
  %empty_52 = tensor.empty() : tensor<4xf32>
  %c_53 = arith.constant 0.000000000e+00 : f32
  %init_54 = linalg.fill ins(%c_53 : f32) outs(%empty_52 : tensor<4xf32>) -> tensor<4xf32>
  %picked = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%linear_1, %y : tensor<4x4xf32>, tensor<4xi64>)
      outs(%init_54 : tensor<4xf32>) {
  ^bb0(%a_55: f32, %a_56: i64, %acc_57: f32):
    %i_58 = linalg.index 1 : index
    %t_59 = arith.index_cast %i_58 : index to i64
    %t_60 = arith.cmpi eq, %t_59, %a_56 : i64
    %c_61 = arith.constant 0.000000000e+00 : f32
    %t_62 = arith.select %t_60, %a_55, %c_61 : f32
    %t_63 = arith.addf %acc_57, %t_62 : f32
    linalg.yield %t_63 : f32
  } -> tensor<4xf32>
  %empty_64 = tensor.empty() : tensor<4xf32>
  %c_65 = arith.constant 0xFF800000 : f32
  %init_66 = linalg.fill ins(%c_65 : f32) outs(%empty_64 : tensor<4xf32>) -> tensor<4xf32>
  %ce_max = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%linear_1 : tensor<4x4xf32>)
      outs(%init_66 : tensor<4xf32>) {
  ^bb0(%a_67: f32, %acc_68: f32):
    %t_69 = arith.maximumf %a_67, %acc_68 : f32
    linalg.yield %t_69 : f32
  } -> tensor<4xf32>
  %empty_70 = tensor.empty() : tensor<4xf32>
  %no_grad = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%ce_max : tensor<4xf32>)
      outs(%empty_70 : tensor<4xf32>) {
  ^bb0(%a_71: f32, %acc_72: f32):
    %bits = arith.bitcast %a_71 : f32 to i32
    %nograd = arith.bitcast %bits : i32 to f32
    linalg.yield %nograd : f32
  } -> tensor<4xf32>
  %ce_sumexp = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%linear_1, %no_grad : tensor<4x4xf32>, tensor<4xf32>)
      outs(%init_54 : tensor<4xf32>) {
  ^bb0(%a_73: f32, %a_74: f32, %acc_75: f32):
    %t_76 = arith.subf %a_73, %a_74 : f32
    %t_77 = math.exp %t_76 : f32
    %t_78 = arith.addf %acc_75, %t_77 : f32
    linalg.yield %t_78 : f32
  } -> tensor<4xf32>
  %empty_79 = tensor.empty() : tensor<f32>
  %c_80 = arith.constant 0.000000000e+00 : f32
  %init_81 = linalg.fill ins(%c_80 : f32) outs(%empty_79 : tensor<f32>) -> tensor<f32>
  %loss_sum = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%picked, %y, %ce_sumexp, %no_grad : tensor<4xf32>, tensor<4xi64>, tensor<4xf32>, tensor<4xf32>)
      outs(%init_81 : tensor<f32>) {
  ^bb0(%a_82: f32, %a_83: i64, %a_84: f32, %a_85: f32, %acc_86: f32):
    %t_87 = math.log %a_84 : f32
    %t_88 = arith.addf %t_87, %a_85 : f32
    %t_89 = arith.subf %t_88, %a_82 : f32
    %c_90 = arith.constant -100 : i64
    %t_91 = arith.cmpi eq, %a_83, %c_90 : i64
    %c_92 = arith.constant 0.000000000e+00 : f32
    %t_93 = arith.select %t_91, %c_92, %t_89 : f32
    %t_94 = arith.addf %acc_86, %t_93 : f32
    linalg.yield %t_94 : f32
  } -> tensor<f32>
  %count = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%y : tensor<4xi64>)
      outs(%init_81 : tensor<f32>) {
  ^bb0(%a_95: i64, %acc_96: f32):
    %c_97 = arith.constant -100 : i64
    %t_98 = arith.cmpi eq, %a_95, %c_97 : i64
    %c_99 = arith.constant 0.000000000e+00 : f32
    %c_100 = arith.constant 1.000000000e+00 : f32
    %t_101 = arith.select %t_98, %c_99, %c_100 : f32
    %t_102 = arith.addf %acc_96, %t_101 : f32
    linalg.yield %t_102 : f32
  } -> tensor<f32>
  %empty_103 = tensor.empty() : tensor<f32>
  %cross_entropy_loss = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%loss_sum, %count : tensor<f32>, tensor<f32>)
      outs(%empty_103 : tensor<f32>) {
  ^bb0(%a_104: f32, %a_105: f32, %acc_106: f32):
    %t_107 = arith.divf %a_104, %a_105 : f32
    linalg.yield %t_107 : f32
  } -> tensor<f32>
  return %cross_entropy_loss : tensor<f32>
}
