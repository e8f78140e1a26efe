// An MLP with random draws as zerobubble.from_torch exports them (the
// Noisy module of test/python/test_dropout.py): input noise (randn_like:
// Box-Muller's log and cos), a drop path (floor of keep_prob + rand),
// uniform_ and normal_, all from the {zb.rng} key per microbatch.
func.func @m(%x: tensor<4x8xf32>,
             %y: tensor<4xi64> {zb.range = 4 : i64},
             %p_l1_weight: tensor<16x8xf32> {zb.param = "l1.weight"},
             %p_l1_bias: tensor<16xf32> {zb.param = "l1.bias"},
             %p_l2_weight: tensor<16x16xf32> {zb.param = "l2.weight"},
             %p_l2_bias: tensor<16xf32> {zb.param = "l2.bias"},
             %p_l3_weight: tensor<4x16xf32> {zb.param = "l3.weight"},
             %p_l3_bias: tensor<4xf32> {zb.param = "l3.bias"},
             %zb_rng: tensor<1xi64> {zb.data = "zb_rng", zb.rng}) -> tensor<f32> {
  %empty = tensor.empty() : tensor<4x8xf32>
  %random = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%zb_rng : tensor<1xi64>)
      outs(%empty : tensor<4x8xf32>) {
  ^bb0(%a: i64, %acc: f32):
    %i = linalg.index 0 : index
    %i_1 = arith.index_cast %i : index to i64
    %i_2 = linalg.index 1 : index
    %i_3 = arith.index_cast %i_2 : index to i64
    %c = arith.constant 8 : i64
    %t = arith.muli %i_1, %c : i64
    %t_4 = arith.addi %t, %i_3 : i64
    %c_5 = arith.constant 0 : i64
    %t_6 = arith.addi %a, %c_5 : i64
    %c_7 = arith.constant -7046029254386353131 : i64
    %t_8 = arith.muli %t_4, %c_7 : i64
    %t_9 = arith.addi %t_6, %t_8 : i64
    %c_10 = arith.constant 30 : i64
    %t_11 = arith.shrui %t_9, %c_10 : i64
    %t_12 = arith.xori %t_9, %t_11 : i64
    %c_13 = arith.constant -4658895280553007687 : i64
    %t_14 = arith.muli %t_12, %c_13 : i64
    %c_15 = arith.constant 27 : i64
    %t_16 = arith.shrui %t_14, %c_15 : i64
    %t_17 = arith.xori %t_14, %t_16 : i64
    %c_18 = arith.constant -7723592293110705685 : i64
    %t_19 = arith.muli %t_17, %c_18 : i64
    %c_20 = arith.constant 31 : i64
    %t_21 = arith.shrui %t_19, %c_20 : i64
    %t_22 = arith.xori %t_19, %t_21 : i64
    %c_23 = arith.constant 40 : i64
    %t_24 = arith.shrui %t_22, %c_23 : i64
    %cv = arith.sitofp %t_24 : i64 to f32
    %c_25 = arith.constant 5.960464478e-08 : f32
    %t_26 = arith.mulf %cv, %c_25 : f32
    %i_27 = linalg.index 0 : index
    %i_28 = arith.index_cast %i_27 : index to i64
    %i_29 = linalg.index 1 : index
    %i_30 = arith.index_cast %i_29 : index to i64
    %c_31 = arith.constant 8 : i64
    %t_32 = arith.muli %i_28, %c_31 : i64
    %t_33 = arith.addi %t_32, %i_30 : i64
    %c_34 = arith.constant -3335678366873096957 : i64
    %t_35 = arith.addi %a, %c_34 : i64
    %c_36 = arith.constant -7046029254386353131 : i64
    %t_37 = arith.muli %t_33, %c_36 : i64
    %t_38 = arith.addi %t_35, %t_37 : i64
    %c_39 = arith.constant 30 : i64
    %t_40 = arith.shrui %t_38, %c_39 : i64
    %t_41 = arith.xori %t_38, %t_40 : i64
    %c_42 = arith.constant -4658895280553007687 : i64
    %t_43 = arith.muli %t_41, %c_42 : i64
    %c_44 = arith.constant 27 : i64
    %t_45 = arith.shrui %t_43, %c_44 : i64
    %t_46 = arith.xori %t_43, %t_45 : i64
    %c_47 = arith.constant -7723592293110705685 : i64
    %t_48 = arith.muli %t_46, %c_47 : i64
    %c_49 = arith.constant 31 : i64
    %t_50 = arith.shrui %t_48, %c_49 : i64
    %t_51 = arith.xori %t_48, %t_50 : i64
    %c_52 = arith.constant 40 : i64
    %t_53 = arith.shrui %t_51, %c_52 : i64
    %cv_54 = arith.sitofp %t_53 : i64 to f32
    %c_55 = arith.constant 5.960464478e-08 : f32
    %t_56 = arith.mulf %cv_54, %c_55 : f32
    %c_57 = arith.constant 1.000000000e+00 : f32
    %t_58 = arith.subf %c_57, %t_26 : f32
    %c_59 = arith.constant -2.000000000e+00 : f32
    %t_60 = math.log %t_58 : f32
    %t_61 = arith.mulf %c_59, %t_60 : f32
    %t_62 = math.sqrt %t_61 : f32
    %c_63 = arith.constant 6.283185482e+00 : f32
    %t_64 = arith.mulf %t_56, %c_63 : f32
    %t_65 = math.cos %t_64 : f32
    %t_66 = arith.mulf %t_62, %t_65 : f32
    linalg.yield %t_66 : f32
  } -> tensor<4x8xf32>
  %empty_67 = tensor.empty() : tensor<4x1xf32>
  %random_68 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%zb_rng : tensor<1xi64>)
      outs(%empty_67 : tensor<4x1xf32>) {
  ^bb0(%a_69: i64, %acc_70: f32):
    %i_71 = linalg.index 0 : index
    %i_72 = arith.index_cast %i_71 : index to i64
    %i_73 = linalg.index 1 : index
    %i_74 = arith.index_cast %i_73 : index to i64
    %c_75 = arith.constant 1 : i64
    %t_76 = arith.muli %i_72, %c_75 : i64
    %t_77 = arith.addi %t_76, %i_74 : i64
    %c_78 = arith.constant -6671356733746193914 : i64
    %t_79 = arith.addi %a_69, %c_78 : i64
    %c_80 = arith.constant -7046029254386353131 : i64
    %t_81 = arith.muli %t_77, %c_80 : i64
    %t_82 = arith.addi %t_79, %t_81 : i64
    %c_83 = arith.constant 30 : i64
    %t_84 = arith.shrui %t_82, %c_83 : i64
    %t_85 = arith.xori %t_82, %t_84 : i64
    %c_86 = arith.constant -4658895280553007687 : i64
    %t_87 = arith.muli %t_85, %c_86 : i64
    %c_88 = arith.constant 27 : i64
    %t_89 = arith.shrui %t_87, %c_88 : i64
    %t_90 = arith.xori %t_87, %t_89 : i64
    %c_91 = arith.constant -7723592293110705685 : i64
    %t_92 = arith.muli %t_90, %c_91 : i64
    %c_93 = arith.constant 31 : i64
    %t_94 = arith.shrui %t_92, %c_93 : i64
    %t_95 = arith.xori %t_92, %t_94 : i64
    %c_96 = arith.constant 40 : i64
    %t_97 = arith.shrui %t_95, %c_96 : i64
    %cv_98 = arith.sitofp %t_97 : i64 to f32
    %c_99 = arith.constant 5.960464478e-08 : f32
    %t_100 = arith.mulf %cv_98, %c_99 : f32
    linalg.yield %t_100 : f32
  } -> tensor<4x1xf32>
  %empty_101 = tensor.empty() : tensor<4x16xf32>
  %random_102 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%zb_rng : tensor<1xi64>)
      outs(%empty_101 : tensor<4x16xf32>) {
  ^bb0(%a_103: i64, %acc_104: f32):
    %i_105 = linalg.index 0 : index
    %i_106 = arith.index_cast %i_105 : index to i64
    %i_107 = linalg.index 1 : index
    %i_108 = arith.index_cast %i_107 : index to i64
    %c_109 = arith.constant 16 : i64
    %t_110 = arith.muli %i_106, %c_109 : i64
    %t_111 = arith.addi %t_110, %i_108 : i64
    %c_112 = arith.constant 8439708973090260745 : i64
    %t_113 = arith.addi %a_103, %c_112 : i64
    %c_114 = arith.constant -7046029254386353131 : i64
    %t_115 = arith.muli %t_111, %c_114 : i64
    %t_116 = arith.addi %t_113, %t_115 : i64
    %c_117 = arith.constant 30 : i64
    %t_118 = arith.shrui %t_116, %c_117 : i64
    %t_119 = arith.xori %t_116, %t_118 : i64
    %c_120 = arith.constant -4658895280553007687 : i64
    %t_121 = arith.muli %t_119, %c_120 : i64
    %c_122 = arith.constant 27 : i64
    %t_123 = arith.shrui %t_121, %c_122 : i64
    %t_124 = arith.xori %t_121, %t_123 : i64
    %c_125 = arith.constant -7723592293110705685 : i64
    %t_126 = arith.muli %t_124, %c_125 : i64
    %c_127 = arith.constant 31 : i64
    %t_128 = arith.shrui %t_126, %c_127 : i64
    %t_129 = arith.xori %t_126, %t_128 : i64
    %c_130 = arith.constant 40 : i64
    %t_131 = arith.shrui %t_129, %c_130 : i64
    %cv_132 = arith.sitofp %t_131 : i64 to f32
    %c_133 = arith.constant 5.960464478e-08 : f32
    %t_134 = arith.mulf %cv_132, %c_133 : f32
    %c_135 = arith.constant -5.000000000e-01 : f32
    %c_136 = arith.constant 1.000000000e+00 : f32
    %t_137 = arith.mulf %t_134, %c_136 : f32
    %t_138 = arith.addf %c_135, %t_137 : f32
    linalg.yield %t_138 : f32
  } -> tensor<4x16xf32>
  %empty_139 = tensor.empty() : tensor<4x16xf32>
  %random_140 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%zb_rng : tensor<1xi64>)
      outs(%empty_139 : tensor<4x16xf32>) {
  ^bb0(%a_141: i64, %acc_142: f32):
    %i_143 = linalg.index 0 : index
    %i_144 = arith.index_cast %i_143 : index to i64
    %i_145 = linalg.index 1 : index
    %i_146 = arith.index_cast %i_145 : index to i64
    %c_147 = arith.constant 16 : i64
    %t_148 = arith.muli %i_144, %c_147 : i64
    %t_149 = arith.addi %t_148, %i_146 : i64
    %c_150 = arith.constant 5104030606217163788 : i64
    %t_151 = arith.addi %a_141, %c_150 : i64
    %c_152 = arith.constant -7046029254386353131 : i64
    %t_153 = arith.muli %t_149, %c_152 : i64
    %t_154 = arith.addi %t_151, %t_153 : i64
    %c_155 = arith.constant 30 : i64
    %t_156 = arith.shrui %t_154, %c_155 : i64
    %t_157 = arith.xori %t_154, %t_156 : i64
    %c_158 = arith.constant -4658895280553007687 : i64
    %t_159 = arith.muli %t_157, %c_158 : i64
    %c_160 = arith.constant 27 : i64
    %t_161 = arith.shrui %t_159, %c_160 : i64
    %t_162 = arith.xori %t_159, %t_161 : i64
    %c_163 = arith.constant -7723592293110705685 : i64
    %t_164 = arith.muli %t_162, %c_163 : i64
    %c_165 = arith.constant 31 : i64
    %t_166 = arith.shrui %t_164, %c_165 : i64
    %t_167 = arith.xori %t_164, %t_166 : i64
    %c_168 = arith.constant 40 : i64
    %t_169 = arith.shrui %t_167, %c_168 : i64
    %cv_170 = arith.sitofp %t_169 : i64 to f32
    %c_171 = arith.constant 5.960464478e-08 : f32
    %t_172 = arith.mulf %cv_170, %c_171 : f32
    %i_173 = linalg.index 0 : index
    %i_174 = arith.index_cast %i_173 : index to i64
    %i_175 = linalg.index 1 : index
    %i_176 = arith.index_cast %i_175 : index to i64
    %c_177 = arith.constant 16 : i64
    %t_178 = arith.muli %i_174, %c_177 : i64
    %t_179 = arith.addi %t_178, %i_176 : i64
    %c_180 = arith.constant 1768352239344066831 : i64
    %t_181 = arith.addi %a_141, %c_180 : i64
    %c_182 = arith.constant -7046029254386353131 : i64
    %t_183 = arith.muli %t_179, %c_182 : i64
    %t_184 = arith.addi %t_181, %t_183 : i64
    %c_185 = arith.constant 30 : i64
    %t_186 = arith.shrui %t_184, %c_185 : i64
    %t_187 = arith.xori %t_184, %t_186 : i64
    %c_188 = arith.constant -4658895280553007687 : i64
    %t_189 = arith.muli %t_187, %c_188 : i64
    %c_190 = arith.constant 27 : i64
    %t_191 = arith.shrui %t_189, %c_190 : i64
    %t_192 = arith.xori %t_189, %t_191 : i64
    %c_193 = arith.constant -7723592293110705685 : i64
    %t_194 = arith.muli %t_192, %c_193 : i64
    %c_195 = arith.constant 31 : i64
    %t_196 = arith.shrui %t_194, %c_195 : i64
    %t_197 = arith.xori %t_194, %t_196 : i64
    %c_198 = arith.constant 40 : i64
    %t_199 = arith.shrui %t_197, %c_198 : i64
    %cv_200 = arith.sitofp %t_199 : i64 to f32
    %c_201 = arith.constant 5.960464478e-08 : f32
    %t_202 = arith.mulf %cv_200, %c_201 : f32
    %c_203 = arith.constant 1.000000000e+00 : f32
    %t_204 = arith.subf %c_203, %t_172 : f32
    %c_205 = arith.constant -2.000000000e+00 : f32
    %t_206 = math.log %t_204 : f32
    %t_207 = arith.mulf %c_205, %t_206 : f32
    %t_208 = math.sqrt %t_207 : f32
    %c_209 = arith.constant 6.283185482e+00 : f32
    %t_210 = arith.mulf %t_202, %c_209 : f32
    %t_211 = math.cos %t_210 : f32
    %t_212 = arith.mulf %t_208, %t_211 : f32
    %c_213 = arith.constant 1.000000000e+00 : f32
    %c_214 = arith.constant 2.000000030e-01 : f32
    %t_215 = arith.mulf %t_212, %c_214 : f32
    %t_216 = arith.addf %c_213, %t_215 : f32
    linalg.yield %t_216 : f32
  } -> tensor<4x16xf32>
  %empty_217 = tensor.empty() : tensor<4x8xf32>
  %mul = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%random : tensor<4x8xf32>)
      outs(%empty_217 : tensor<4x8xf32>) {
  ^bb0(%a_218: f32, %acc_219: f32):
    %c_220 = arith.constant 1.000000015e-01 : f32
    %t_221 = arith.mulf %a_218, %c_220 : f32
    linalg.yield %t_221 : f32
  } -> tensor<4x8xf32>
  %empty_222 = tensor.empty() : tensor<4x8xf32>
  %add = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mul : tensor<4x8xf32>, tensor<4x8xf32>)
      outs(%empty_222 : tensor<4x8xf32>) {
  ^bb0(%a_223: f32, %a_224: f32, %acc_225: f32):
    %t_226 = arith.addf %a_223, %a_224 : f32
    linalg.yield %t_226 : f32
  } -> tensor<4x8xf32>
  %empty_227 = tensor.empty() : tensor<4x16xf32>
  %c_228 = arith.constant 0.000000000e+00 : f32
  %init = linalg.fill ins(%c_228 : f32) outs(%empty_227 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] ins(%add, %p_l1_weight : tensor<4x8xf32>, tensor<16x8xf32>) outs(%init : tensor<4x16xf32>) -> tensor<4x16xf32>
  %empty_229 = tensor.empty() : tensor<4x16xf32>
  %linear = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %p_l1_bias : tensor<4x16xf32>, tensor<16xf32>)
      outs(%empty_229 : tensor<4x16xf32>) {
  ^bb0(%a_230: f32, %a_231: f32, %acc_232: f32):
    %t_233 = arith.addf %a_230, %a_231 : f32
    linalg.yield %t_233 : f32
  } -> tensor<4x16xf32>
  %empty_234 = tensor.empty() : tensor<4x16xf32>
  %relu = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%linear : tensor<4x16xf32>)
      outs(%empty_234 : tensor<4x16xf32>) {
  ^bb0(%a_235: f32, %acc_236: f32):
    %c_237 = arith.constant 0.000000000e+00 : f32
    %t_238 = arith.maximumf %a_235, %c_237 : f32
    linalg.yield %t_238 : f32
  } -> tensor<4x16xf32>
  %mm_239 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] ins(%relu, %p_l2_weight : tensor<4x16xf32>, tensor<16x16xf32>) outs(%init : tensor<4x16xf32>) -> tensor<4x16xf32>
  %empty_240 = tensor.empty() : tensor<4x16xf32>
  %linear_1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm_239, %p_l2_bias : tensor<4x16xf32>, tensor<16xf32>)
      outs(%empty_240 : tensor<4x16xf32>) {
  ^bb0(%a_241: f32, %a_242: f32, %acc_243: f32):
    %t_244 = arith.addf %a_241, %a_242 : f32
    linalg.yield %t_244 : f32
  } -> tensor<4x16xf32>
  %empty_245 = tensor.empty() : tensor<4x16xf32>
  %div = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%linear_1 : tensor<4x16xf32>)
      outs(%empty_245 : tensor<4x16xf32>) {
  ^bb0(%a_246: f32, %acc_247: f32):
    %c_248 = arith.constant 6.999999881e-01 : f32
    %t_249 = arith.divf %a_246, %c_248 : f32
    linalg.yield %t_249 : f32
  } -> tensor<4x16xf32>
  %empty_250 = tensor.empty() : tensor<4x1xf32>
  %add_1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%random_68 : tensor<4x1xf32>)
      outs(%empty_250 : tensor<4x1xf32>) {
  ^bb0(%a_251: f32, %acc_252: f32):
    %c_253 = arith.constant 6.999999881e-01 : f32
    %t_254 = arith.addf %a_251, %c_253 : f32
    linalg.yield %t_254 : f32
  } -> tensor<4x1xf32>
  %empty_255 = tensor.empty() : tensor<4x1xf32>
  %floor = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%add_1 : tensor<4x1xf32>)
      outs(%empty_255 : tensor<4x1xf32>) {
  ^bb0(%a_256: f32, %acc_257: f32):
    %t_258 = math.floor %a_256 : f32
    linalg.yield %t_258 : f32
  } -> tensor<4x1xf32>
  %rs = tensor.collapse_shape %floor [[0, 1]] : tensor<4x1xf32> into tensor<4xf32>
  %empty_259 = tensor.empty() : tensor<4x16xf32>
  %mul_1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%div, %rs : tensor<4x16xf32>, tensor<4xf32>)
      outs(%empty_259 : tensor<4x16xf32>) {
  ^bb0(%a_260: f32, %a_261: f32, %acc_262: f32):
    %t_263 = arith.mulf %a_260, %a_261 : f32
    linalg.yield %t_263 : f32
  } -> tensor<4x16xf32>
  %empty_264 = tensor.empty() : tensor<4x16xf32>
  %add_2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%relu, %mul_1 : tensor<4x16xf32>, tensor<4x16xf32>)
      outs(%empty_264 : tensor<4x16xf32>) {
  ^bb0(%a_265: f32, %a_266: f32, %acc_267: f32):
    %t_268 = arith.addf %a_265, %a_266 : f32
    linalg.yield %t_268 : f32
  } -> tensor<4x16xf32>
  %empty_269 = tensor.empty() : tensor<4x16xf32>
  %mul_2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%add_2, %random_140 : tensor<4x16xf32>, tensor<4x16xf32>)
      outs(%empty_269 : tensor<4x16xf32>) {
  ^bb0(%a_270: f32, %a_271: f32, %acc_272: f32):
    %t_273 = arith.mulf %a_270, %a_271 : f32
    linalg.yield %t_273 : f32
  } -> tensor<4x16xf32>
  %empty_274 = tensor.empty() : tensor<4x16xf32>
  %add_3 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mul_2, %random_102 : tensor<4x16xf32>, tensor<4x16xf32>)
      outs(%empty_274 : tensor<4x16xf32>) {
  ^bb0(%a_275: f32, %a_276: f32, %acc_277: f32):
    %t_278 = arith.addf %a_275, %a_276 : f32
    linalg.yield %t_278 : f32
  } -> tensor<4x16xf32>
  %empty_279 = tensor.empty() : tensor<4x4xf32>
  %c_280 = arith.constant 0.000000000e+00 : f32
  %init_281 = linalg.fill ins(%c_280 : f32) outs(%empty_279 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %mm_282 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] ins(%add_3, %p_l3_weight : tensor<4x16xf32>, tensor<4x16xf32>) outs(%init_281 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %empty_283 = tensor.empty() : tensor<4x4xf32>
  %linear_2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm_282, %p_l3_bias : tensor<4x4xf32>, tensor<4xf32>)
      outs(%empty_283 : tensor<4x4xf32>) {
  ^bb0(%a_284: f32, %a_285: f32, %acc_286: f32):
    %t_287 = arith.addf %a_284, %a_285 : f32
    linalg.yield %t_287 : f32
  } -> tensor<4x4xf32>
  %empty_288 = tensor.empty() : tensor<4xf32>
  %c_289 = arith.constant 0.000000000e+00 : f32
  %init_290 = linalg.fill ins(%c_289 : f32) outs(%empty_288 : tensor<4xf32>) -> tensor<4xf32>
  %picked = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%linear_2, %y : tensor<4x4xf32>, tensor<4xi64>)
      outs(%init_290 : tensor<4xf32>) {
  ^bb0(%a_291: f32, %a_292: i64, %acc_293: f32):
    %i_294 = linalg.index 1 : index
    %t_295 = arith.index_cast %i_294 : index to i64
    %t_296 = arith.cmpi eq, %t_295, %a_292 : i64
    %c_297 = arith.constant 0.000000000e+00 : f32
    %t_298 = arith.select %t_296, %a_291, %c_297 : f32
    %t_299 = arith.addf %acc_293, %t_298 : f32
    linalg.yield %t_299 : f32
  } -> tensor<4xf32>
  %empty_300 = tensor.empty() : tensor<4xf32>
  %c_301 = arith.constant 0xFF800000 : f32
  %init_302 = linalg.fill ins(%c_301 : f32) outs(%empty_300 : tensor<4xf32>) -> tensor<4xf32>
  %ce_max = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%linear_2 : tensor<4x4xf32>)
      outs(%init_302 : tensor<4xf32>) {
  ^bb0(%a_303: f32, %acc_304: f32):
    %t_305 = arith.maximumf %a_303, %acc_304 : f32
    linalg.yield %t_305 : f32
  } -> tensor<4xf32>
  %empty_306 = tensor.empty() : tensor<4xf32>
  %no_grad = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%ce_max : tensor<4xf32>)
      outs(%empty_306 : tensor<4xf32>) {
  ^bb0(%a_307: f32, %acc_308: f32):
    %bits = arith.bitcast %a_307 : f32 to i32
    %nograd = arith.bitcast %bits : i32 to f32
    linalg.yield %nograd : f32
  } -> tensor<4xf32>
  %ce_sumexp = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%linear_2, %no_grad : tensor<4x4xf32>, tensor<4xf32>)
      outs(%init_290 : tensor<4xf32>) {
  ^bb0(%a_309: f32, %a_310: f32, %acc_311: f32):
    %t_312 = arith.subf %a_309, %a_310 : f32
    %t_313 = math.exp %t_312 : f32
    %t_314 = arith.addf %acc_311, %t_313 : f32
    linalg.yield %t_314 : f32
  } -> tensor<4xf32>
  %empty_315 = tensor.empty() : tensor<f32>
  %c_316 = arith.constant 0.000000000e+00 : f32
  %init_317 = linalg.fill ins(%c_316 : f32) outs(%empty_315 : tensor<f32>) -> tensor<f32>
  %loss_sum = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%picked, %y, %ce_sumexp, %no_grad : tensor<4xf32>, tensor<4xi64>, tensor<4xf32>, tensor<4xf32>)
      outs(%init_317 : tensor<f32>) {
  ^bb0(%a_318: f32, %a_319: i64, %a_320: f32, %a_321: f32, %acc_322: f32):
    %t_323 = math.log %a_320 : f32
    %t_324 = arith.addf %t_323, %a_321 : f32
    %t_325 = arith.subf %t_324, %a_318 : f32
    %c_326 = arith.constant -100 : i64
    %t_327 = arith.cmpi eq, %a_319, %c_326 : i64
    %c_328 = arith.constant 0.000000000e+00 : f32
    %t_329 = arith.select %t_327, %c_328, %t_325 : f32
    %t_330 = arith.addf %acc_322, %t_329 : f32
    linalg.yield %t_330 : f32
  } -> tensor<f32>
  %count = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%y : tensor<4xi64>)
      outs(%init_317 : tensor<f32>) {
  ^bb0(%a_331: i64, %acc_332: f32):
    %c_333 = arith.constant -100 : i64
    %t_334 = arith.cmpi eq, %a_331, %c_333 : i64
    %c_335 = arith.constant 0.000000000e+00 : f32
    %c_336 = arith.constant 1.000000000e+00 : f32
    %t_337 = arith.select %t_334, %c_335, %c_336 : f32
    %t_338 = arith.addf %acc_332, %t_337 : f32
    linalg.yield %t_338 : f32
  } -> tensor<f32>
  %empty_339 = tensor.empty() : tensor<f32>
  %cross_entropy_loss = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%loss_sum, %count : tensor<f32>, tensor<f32>)
      outs(%empty_339 : tensor<f32>) {
  ^bb0(%a_340: f32, %a_341: f32, %acc_342: f32):
    %t_343 = arith.divf %a_340, %a_341 : f32
    linalg.yield %t_343 : f32
  } -> tensor<f32>
  return %cross_entropy_loss : tensor<f32>
}
