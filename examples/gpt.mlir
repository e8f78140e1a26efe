// A small GPT-style decoder language model: vocabulary 64, context 16 tokens,
// width 32, 2 attention heads of 16, 4 pre-LayerNorm transformer blocks with
// a 128-wide GELU MLP, a final LayerNorm and an untied LM head; the loss is
// the mean next-token softmax cross-entropy over all positions. Written for
// one microbatch of 2 sequences; the three pipe.cut markers on the residual
// stream (after blocks 0, 1 and 2) split it into four pipeline stages.
//
// Arguments: %tokens and %targets are data (token ids in [0, 64)); the others
// are parameters, named by their zb.param attribute. Weights are [in, out]
// (y = x @ W + b).
//
// Layout: the residual stream is kept as [B*T, d] = [32, 32] so that every
// projection is one linalg.matmul. Attention reshapes q, k, v to
// [B, T, H, dh], transposes to [B, H, T, dh] and collapses to
// [B*H, T, dh] = [4, 16, 16] for linalg.batch_matmul.
//
// Per block (x the residual stream):
//   x = x + (softmax(mask(q k^T / sqrt(dh))) v) @ Wproj + bproj,
//       with q, k, v = ln1(x) @ Wq, Wk, Wv
//   x = x + gelu(ln2(x) @ Wfc + bfc) @ Wproj2 + bproj2
// LayerNorm: (x - mean) / sqrt(var + 1e-5) * w + b over the last dim (biased
// variance); GELU is the exact 0.5 x (1 + erf(x / sqrt(2))); the causal mask
// sets scores with key j > query i to -inf before linalg.softmax.

#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#row = affine_map<(i, j) -> (i)>
#id3 = affine_map<(b, i, j) -> (b, i, j)>
#tok = affine_map<(b, t, c) -> (b, t)>
#pos = affine_map<(b, t, c) -> (t, c)>
#vec = affine_map<(i) -> (i)>
#scalar = affine_map<(i) -> ()>

func.func @gpt(%tokens: tensor<2x16xi64> {zb.data = "tokens", zb.range = 64 : i64},
               %targets: tensor<2x16xi64> {zb.data = "targets", zb.range = 64 : i64},
               %wte: tensor<64x32xf32> {zb.param = "wte"},
               %wpe: tensor<16x32xf32> {zb.param = "wpe"},
               %h0_ln1_w: tensor<32xf32> {zb.param = "h0.ln1.weight"},
               %h0_ln1_b: tensor<32xf32> {zb.param = "h0.ln1.bias"},
               %h0_wq: tensor<32x32xf32> {zb.param = "h0.attn.q.weight"},
               %h0_wk: tensor<32x32xf32> {zb.param = "h0.attn.k.weight"},
               %h0_wv: tensor<32x32xf32> {zb.param = "h0.attn.v.weight"},
               %h0_wo: tensor<32x32xf32> {zb.param = "h0.attn.proj.weight"},
               %h0_bo: tensor<32xf32> {zb.param = "h0.attn.proj.bias"},
               %h0_ln2_w: tensor<32xf32> {zb.param = "h0.ln2.weight"},
               %h0_ln2_b: tensor<32xf32> {zb.param = "h0.ln2.bias"},
               %h0_wfc: tensor<32x128xf32> {zb.param = "h0.mlp.fc.weight"},
               %h0_bfc: tensor<128xf32> {zb.param = "h0.mlp.fc.bias"},
               %h0_wpr: tensor<128x32xf32> {zb.param = "h0.mlp.proj.weight"},
               %h0_bpr: tensor<32xf32> {zb.param = "h0.mlp.proj.bias"},
               %h1_ln1_w: tensor<32xf32> {zb.param = "h1.ln1.weight"},
               %h1_ln1_b: tensor<32xf32> {zb.param = "h1.ln1.bias"},
               %h1_wq: tensor<32x32xf32> {zb.param = "h1.attn.q.weight"},
               %h1_wk: tensor<32x32xf32> {zb.param = "h1.attn.k.weight"},
               %h1_wv: tensor<32x32xf32> {zb.param = "h1.attn.v.weight"},
               %h1_wo: tensor<32x32xf32> {zb.param = "h1.attn.proj.weight"},
               %h1_bo: tensor<32xf32> {zb.param = "h1.attn.proj.bias"},
               %h1_ln2_w: tensor<32xf32> {zb.param = "h1.ln2.weight"},
               %h1_ln2_b: tensor<32xf32> {zb.param = "h1.ln2.bias"},
               %h1_wfc: tensor<32x128xf32> {zb.param = "h1.mlp.fc.weight"},
               %h1_bfc: tensor<128xf32> {zb.param = "h1.mlp.fc.bias"},
               %h1_wpr: tensor<128x32xf32> {zb.param = "h1.mlp.proj.weight"},
               %h1_bpr: tensor<32xf32> {zb.param = "h1.mlp.proj.bias"},
               %h2_ln1_w: tensor<32xf32> {zb.param = "h2.ln1.weight"},
               %h2_ln1_b: tensor<32xf32> {zb.param = "h2.ln1.bias"},
               %h2_wq: tensor<32x32xf32> {zb.param = "h2.attn.q.weight"},
               %h2_wk: tensor<32x32xf32> {zb.param = "h2.attn.k.weight"},
               %h2_wv: tensor<32x32xf32> {zb.param = "h2.attn.v.weight"},
               %h2_wo: tensor<32x32xf32> {zb.param = "h2.attn.proj.weight"},
               %h2_bo: tensor<32xf32> {zb.param = "h2.attn.proj.bias"},
               %h2_ln2_w: tensor<32xf32> {zb.param = "h2.ln2.weight"},
               %h2_ln2_b: tensor<32xf32> {zb.param = "h2.ln2.bias"},
               %h2_wfc: tensor<32x128xf32> {zb.param = "h2.mlp.fc.weight"},
               %h2_bfc: tensor<128xf32> {zb.param = "h2.mlp.fc.bias"},
               %h2_wpr: tensor<128x32xf32> {zb.param = "h2.mlp.proj.weight"},
               %h2_bpr: tensor<32xf32> {zb.param = "h2.mlp.proj.bias"},
               %h3_ln1_w: tensor<32xf32> {zb.param = "h3.ln1.weight"},
               %h3_ln1_b: tensor<32xf32> {zb.param = "h3.ln1.bias"},
               %h3_wq: tensor<32x32xf32> {zb.param = "h3.attn.q.weight"},
               %h3_wk: tensor<32x32xf32> {zb.param = "h3.attn.k.weight"},
               %h3_wv: tensor<32x32xf32> {zb.param = "h3.attn.v.weight"},
               %h3_wo: tensor<32x32xf32> {zb.param = "h3.attn.proj.weight"},
               %h3_bo: tensor<32xf32> {zb.param = "h3.attn.proj.bias"},
               %h3_ln2_w: tensor<32xf32> {zb.param = "h3.ln2.weight"},
               %h3_ln2_b: tensor<32xf32> {zb.param = "h3.ln2.bias"},
               %h3_wfc: tensor<32x128xf32> {zb.param = "h3.mlp.fc.weight"},
               %h3_bfc: tensor<128xf32> {zb.param = "h3.mlp.fc.bias"},
               %h3_wpr: tensor<128x32xf32> {zb.param = "h3.mlp.proj.weight"},
               %h3_bpr: tensor<32xf32> {zb.param = "h3.mlp.proj.bias"},
               %lnf_w: tensor<32xf32> {zb.param = "lnf.weight"},
               %lnf_b: tensor<32xf32> {zb.param = "lnf.bias"},
               %lm_head: tensor<32x64xf32> {zb.param = "lm_head.weight"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %half = arith.constant 0.5 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %eps = arith.constant 1.0e-05 : f32
  %inv_d = arith.constant 0.03125 : f32            // 1 / d = 1 / 32
  %att_scale = arith.constant 0.25 : f32           // 1 / sqrt(dh) = 1 / sqrt(16)
  %inv_sqrt2 = arith.constant 0.707106769 : f32    // 1 / sqrt(2)
  %inv_tokens = arith.constant 0.03125 : f32       // 1 / (B * T) = 1 / 32

  // Zero-filled accumulators, one per result shape.
  %e_nd = tensor.empty() : tensor<32x32xf32>
  %z_nd = linalg.fill ins(%zero : f32) outs(%e_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %e_nf = tensor.empty() : tensor<32x128xf32>
  %z_nf = linalg.fill ins(%zero : f32) outs(%e_nf : tensor<32x128xf32>) -> tensor<32x128xf32>
  %e_n = tensor.empty() : tensor<32xf32>
  %z_n = linalg.fill ins(%zero : f32) outs(%e_n : tensor<32xf32>) -> tensor<32xf32>
  %e_att = tensor.empty() : tensor<4x16x16xf32>
  %z_att = linalg.fill ins(%zero : f32) outs(%e_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>

  // Embedding: x[b, t, :] = wte[tokens[b, t], :] + wpe[t, :], flattened to
  // [B*T, d].
  %e_btd = tensor.empty() : tensor<2x16x32xf32>
  %emb = linalg.generic {indexing_maps = [#tok, #pos, #id3],
                         iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%tokens, %wpe : tensor<2x16xi64>, tensor<16x32xf32>) outs(%e_btd : tensor<2x16x32xf32>) {
  ^bb0(%tk: i64, %p: f32, %o: f32):
    %c = linalg.index 2 : index
    %row = arith.index_cast %tk : i64 to index
    %w = tensor.extract %wte[%row, %c] : tensor<64x32xf32>
    %s = arith.addf %w, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x16x32xf32>
  %x0 = tensor.collapse_shape %emb [[0, 1], [2]] : tensor<2x16x32xf32> into tensor<32x32xf32>

  // ---- Block 0 ----
  // Attention: x0 + proj(causal_attention(ln1(x0))).
  %h0_ln1_sum = linalg.reduce ins(%x0 : tensor<32x32xf32>) outs(%z_n : tensor<32xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %h0_ln1_var = linalg.generic {indexing_maps = [#id, #row, #row],
                                iterator_types = ["parallel", "reduction"]}
      ins(%x0, %h0_ln1_sum : tensor<32x32xf32>, tensor<32xf32>) outs(%z_n : tensor<32xf32>) {
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %sq = arith.mulf %dv, %dv : f32
    %t = arith.mulf %sq, %inv_d : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %h0_a = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%x0, %h0_ln1_sum, %h0_ln1_var, %h0_ln1_w, %h0_ln1_b : tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%v: f32, %s: f32, %var: f32, %g: f32, %bb: f32, %o: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %ve = arith.addf %var, %eps : f32
    %sd = math.sqrt %ve : f32
    %nv = arith.divf %dv, %sd : f32
    %sc = arith.mulf %nv, %g : f32
    %r = arith.addf %sc, %bb : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  %h0_q = linalg.matmul ins(%h0_a, %h0_wq : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h0_k = linalg.matmul ins(%h0_a, %h0_wk : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h0_v = linalg.matmul ins(%h0_a, %h0_wv : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h0_q4 = tensor.expand_shape %h0_q [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %h0_qe = tensor.empty() : tensor<2x2x16x16xf32>
  %h0_qt = linalg.transpose ins(%h0_q4 : tensor<2x16x2x16xf32>)
      outs(%h0_qe : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %h0_qh = tensor.collapse_shape %h0_qt [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  %h0_k4 = tensor.expand_shape %h0_k [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %h0_ke = tensor.empty() : tensor<2x2x16x16xf32>
  %h0_kt = linalg.transpose ins(%h0_k4 : tensor<2x16x2x16xf32>)
      outs(%h0_ke : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %h0_kh = tensor.collapse_shape %h0_kt [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  %h0_v4 = tensor.expand_shape %h0_v [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %h0_ve = tensor.empty() : tensor<2x2x16x16xf32>
  %h0_vt = linalg.transpose ins(%h0_v4 : tensor<2x16x2x16xf32>)
      outs(%h0_ve : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %h0_vh = tensor.collapse_shape %h0_vt [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  // scores[h, i, j] = q[h, i, :] . k[h, j, :]: k^T explicitly, then batch_matmul.
  %h0_kT = linalg.transpose ins(%h0_kh : tensor<4x16x16xf32>)
      outs(%e_att : tensor<4x16x16xf32>) permutation = [0, 2, 1]
  %h0_sc = linalg.batch_matmul ins(%h0_qh, %h0_kT : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
      outs(%z_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  // Scale by 1/sqrt(dh); causal mask: key j > query i gets -inf.
  %h0_msk = linalg.generic {indexing_maps = [#id3, #id3],
                            iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%h0_sc : tensor<4x16x16xf32>) outs(%e_att : tensor<4x16x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %qi = linalg.index 1 : index
    %kj = linalg.index 2 : index
    %sv = arith.mulf %v, %att_scale : f32
    %fut = arith.cmpi ugt, %kj, %qi : index
    %r = arith.select %fut, %ninf, %sv : f32
    linalg.yield %r : f32
  } -> tensor<4x16x16xf32>
  %h0_pr = linalg.softmax dimension(2) ins(%h0_msk : tensor<4x16x16xf32>)
      outs(%e_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %h0_oh = linalg.batch_matmul ins(%h0_pr, %h0_vh : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
      outs(%z_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  // Heads back: [B*H, T, dh] -> [B, H, T, dh] -> [B, T, H, dh] -> [B*T, d].
  %h0_o4 = tensor.expand_shape %h0_oh [[0, 1], [2], [3]] output_shape [2, 2, 16, 16]
      : tensor<4x16x16xf32> into tensor<2x2x16x16xf32>
  %h0_oe = tensor.empty() : tensor<2x16x2x16xf32>
  %h0_ot = linalg.transpose ins(%h0_o4 : tensor<2x2x16x16xf32>)
      outs(%h0_oe : tensor<2x16x2x16xf32>) permutation = [0, 2, 1, 3]
  %h0_o = tensor.collapse_shape %h0_ot [[0, 1], [2, 3]]
      : tensor<2x16x2x16xf32> into tensor<32x32xf32>
  %h0_po = linalg.matmul ins(%h0_o, %h0_wo : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h0_mid = linalg.generic {indexing_maps = [#id, #col, #id, #id],
                            iterator_types = ["parallel", "parallel"]}
      ins(%h0_po, %h0_bo, %x0 : tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%m: f32, %b: f32, %res: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    %r = arith.addf %res, %s : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>

  // MLP: mid + proj(gelu(fc(ln2(mid)))).
  %h0_ln2_sum = linalg.reduce ins(%h0_mid : tensor<32x32xf32>) outs(%z_n : tensor<32xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %h0_ln2_var = linalg.generic {indexing_maps = [#id, #row, #row],
                                iterator_types = ["parallel", "reduction"]}
      ins(%h0_mid, %h0_ln2_sum : tensor<32x32xf32>, tensor<32xf32>) outs(%z_n : tensor<32xf32>) {
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %sq = arith.mulf %dv, %dv : f32
    %t = arith.mulf %sq, %inv_d : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %h0_c = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%h0_mid, %h0_ln2_sum, %h0_ln2_var, %h0_ln2_w, %h0_ln2_b : tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%v: f32, %s: f32, %var: f32, %g: f32, %bb: f32, %o: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %ve = arith.addf %var, %eps : f32
    %sd = math.sqrt %ve : f32
    %nv = arith.divf %dv, %sd : f32
    %sc = arith.mulf %nv, %g : f32
    %r = arith.addf %sc, %bb : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  %h0_fc = linalg.matmul ins(%h0_c, %h0_wfc : tensor<32x32xf32>, tensor<32x128xf32>)
      outs(%z_nf : tensor<32x128xf32>) -> tensor<32x128xf32>
  %h0_g = linalg.generic {indexing_maps = [#id, #col, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%h0_fc, %h0_bfc : tensor<32x128xf32>, tensor<128xf32>) outs(%e_nf : tensor<32x128xf32>) {
  ^bb0(%m: f32, %b: f32, %o: f32):
    %u = arith.addf %m, %b : f32
    %us = arith.mulf %u, %inv_sqrt2 : f32
    %er = math.erf %us : f32
    %e1 = arith.addf %er, %one : f32
    %hu = arith.mulf %u, %half : f32
    %r = arith.mulf %hu, %e1 : f32
    linalg.yield %r : f32
  } -> tensor<32x128xf32>
  %h0_pm = linalg.matmul ins(%h0_g, %h0_wpr : tensor<32x128xf32>, tensor<128x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h0_out = linalg.generic {indexing_maps = [#id, #col, #id, #id],
                            iterator_types = ["parallel", "parallel"]}
      ins(%h0_pm, %h0_bpr, %h0_mid : tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%m: f32, %b: f32, %res: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    %r = arith.addf %res, %s : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  // Stage boundary after block 0.
  %x1 = pipe.cut %h0_out : tensor<32x32xf32>

  // ---- Block 1 ----
  // Attention: x1 + proj(causal_attention(ln1(x1))).
  %h1_ln1_sum = linalg.reduce ins(%x1 : tensor<32x32xf32>) outs(%z_n : tensor<32xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %h1_ln1_var = linalg.generic {indexing_maps = [#id, #row, #row],
                                iterator_types = ["parallel", "reduction"]}
      ins(%x1, %h1_ln1_sum : tensor<32x32xf32>, tensor<32xf32>) outs(%z_n : tensor<32xf32>) {
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %sq = arith.mulf %dv, %dv : f32
    %t = arith.mulf %sq, %inv_d : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %h1_a = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%x1, %h1_ln1_sum, %h1_ln1_var, %h1_ln1_w, %h1_ln1_b : tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%v: f32, %s: f32, %var: f32, %g: f32, %bb: f32, %o: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %ve = arith.addf %var, %eps : f32
    %sd = math.sqrt %ve : f32
    %nv = arith.divf %dv, %sd : f32
    %sc = arith.mulf %nv, %g : f32
    %r = arith.addf %sc, %bb : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  %h1_q = linalg.matmul ins(%h1_a, %h1_wq : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h1_k = linalg.matmul ins(%h1_a, %h1_wk : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h1_v = linalg.matmul ins(%h1_a, %h1_wv : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h1_q4 = tensor.expand_shape %h1_q [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %h1_qe = tensor.empty() : tensor<2x2x16x16xf32>
  %h1_qt = linalg.transpose ins(%h1_q4 : tensor<2x16x2x16xf32>)
      outs(%h1_qe : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %h1_qh = tensor.collapse_shape %h1_qt [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  %h1_k4 = tensor.expand_shape %h1_k [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %h1_ke = tensor.empty() : tensor<2x2x16x16xf32>
  %h1_kt = linalg.transpose ins(%h1_k4 : tensor<2x16x2x16xf32>)
      outs(%h1_ke : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %h1_kh = tensor.collapse_shape %h1_kt [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  %h1_v4 = tensor.expand_shape %h1_v [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %h1_ve = tensor.empty() : tensor<2x2x16x16xf32>
  %h1_vt = linalg.transpose ins(%h1_v4 : tensor<2x16x2x16xf32>)
      outs(%h1_ve : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %h1_vh = tensor.collapse_shape %h1_vt [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  // scores[h, i, j] = q[h, i, :] . k[h, j, :]: k^T explicitly, then batch_matmul.
  %h1_kT = linalg.transpose ins(%h1_kh : tensor<4x16x16xf32>)
      outs(%e_att : tensor<4x16x16xf32>) permutation = [0, 2, 1]
  %h1_sc = linalg.batch_matmul ins(%h1_qh, %h1_kT : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
      outs(%z_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  // Scale by 1/sqrt(dh); causal mask: key j > query i gets -inf.
  %h1_msk = linalg.generic {indexing_maps = [#id3, #id3],
                            iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%h1_sc : tensor<4x16x16xf32>) outs(%e_att : tensor<4x16x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %qi = linalg.index 1 : index
    %kj = linalg.index 2 : index
    %sv = arith.mulf %v, %att_scale : f32
    %fut = arith.cmpi ugt, %kj, %qi : index
    %r = arith.select %fut, %ninf, %sv : f32
    linalg.yield %r : f32
  } -> tensor<4x16x16xf32>
  %h1_pr = linalg.softmax dimension(2) ins(%h1_msk : tensor<4x16x16xf32>)
      outs(%e_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %h1_oh = linalg.batch_matmul ins(%h1_pr, %h1_vh : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
      outs(%z_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  // Heads back: [B*H, T, dh] -> [B, H, T, dh] -> [B, T, H, dh] -> [B*T, d].
  %h1_o4 = tensor.expand_shape %h1_oh [[0, 1], [2], [3]] output_shape [2, 2, 16, 16]
      : tensor<4x16x16xf32> into tensor<2x2x16x16xf32>
  %h1_oe = tensor.empty() : tensor<2x16x2x16xf32>
  %h1_ot = linalg.transpose ins(%h1_o4 : tensor<2x2x16x16xf32>)
      outs(%h1_oe : tensor<2x16x2x16xf32>) permutation = [0, 2, 1, 3]
  %h1_o = tensor.collapse_shape %h1_ot [[0, 1], [2, 3]]
      : tensor<2x16x2x16xf32> into tensor<32x32xf32>
  %h1_po = linalg.matmul ins(%h1_o, %h1_wo : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h1_mid = linalg.generic {indexing_maps = [#id, #col, #id, #id],
                            iterator_types = ["parallel", "parallel"]}
      ins(%h1_po, %h1_bo, %x1 : tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%m: f32, %b: f32, %res: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    %r = arith.addf %res, %s : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>

  // MLP: mid + proj(gelu(fc(ln2(mid)))).
  %h1_ln2_sum = linalg.reduce ins(%h1_mid : tensor<32x32xf32>) outs(%z_n : tensor<32xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %h1_ln2_var = linalg.generic {indexing_maps = [#id, #row, #row],
                                iterator_types = ["parallel", "reduction"]}
      ins(%h1_mid, %h1_ln2_sum : tensor<32x32xf32>, tensor<32xf32>) outs(%z_n : tensor<32xf32>) {
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %sq = arith.mulf %dv, %dv : f32
    %t = arith.mulf %sq, %inv_d : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %h1_c = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%h1_mid, %h1_ln2_sum, %h1_ln2_var, %h1_ln2_w, %h1_ln2_b : tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%v: f32, %s: f32, %var: f32, %g: f32, %bb: f32, %o: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %ve = arith.addf %var, %eps : f32
    %sd = math.sqrt %ve : f32
    %nv = arith.divf %dv, %sd : f32
    %sc = arith.mulf %nv, %g : f32
    %r = arith.addf %sc, %bb : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  %h1_fc = linalg.matmul ins(%h1_c, %h1_wfc : tensor<32x32xf32>, tensor<32x128xf32>)
      outs(%z_nf : tensor<32x128xf32>) -> tensor<32x128xf32>
  %h1_g = linalg.generic {indexing_maps = [#id, #col, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%h1_fc, %h1_bfc : tensor<32x128xf32>, tensor<128xf32>) outs(%e_nf : tensor<32x128xf32>) {
  ^bb0(%m: f32, %b: f32, %o: f32):
    %u = arith.addf %m, %b : f32
    %us = arith.mulf %u, %inv_sqrt2 : f32
    %er = math.erf %us : f32
    %e1 = arith.addf %er, %one : f32
    %hu = arith.mulf %u, %half : f32
    %r = arith.mulf %hu, %e1 : f32
    linalg.yield %r : f32
  } -> tensor<32x128xf32>
  %h1_pm = linalg.matmul ins(%h1_g, %h1_wpr : tensor<32x128xf32>, tensor<128x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h1_out = linalg.generic {indexing_maps = [#id, #col, #id, #id],
                            iterator_types = ["parallel", "parallel"]}
      ins(%h1_pm, %h1_bpr, %h1_mid : tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%m: f32, %b: f32, %res: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    %r = arith.addf %res, %s : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  // Stage boundary after block 1.
  %x2 = pipe.cut %h1_out : tensor<32x32xf32>

  // ---- Block 2 ----
  // Attention: x2 + proj(causal_attention(ln1(x2))).
  %h2_ln1_sum = linalg.reduce ins(%x2 : tensor<32x32xf32>) outs(%z_n : tensor<32xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %h2_ln1_var = linalg.generic {indexing_maps = [#id, #row, #row],
                                iterator_types = ["parallel", "reduction"]}
      ins(%x2, %h2_ln1_sum : tensor<32x32xf32>, tensor<32xf32>) outs(%z_n : tensor<32xf32>) {
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %sq = arith.mulf %dv, %dv : f32
    %t = arith.mulf %sq, %inv_d : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %h2_a = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%x2, %h2_ln1_sum, %h2_ln1_var, %h2_ln1_w, %h2_ln1_b : tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%v: f32, %s: f32, %var: f32, %g: f32, %bb: f32, %o: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %ve = arith.addf %var, %eps : f32
    %sd = math.sqrt %ve : f32
    %nv = arith.divf %dv, %sd : f32
    %sc = arith.mulf %nv, %g : f32
    %r = arith.addf %sc, %bb : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  %h2_q = linalg.matmul ins(%h2_a, %h2_wq : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h2_k = linalg.matmul ins(%h2_a, %h2_wk : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h2_v = linalg.matmul ins(%h2_a, %h2_wv : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h2_q4 = tensor.expand_shape %h2_q [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %h2_qe = tensor.empty() : tensor<2x2x16x16xf32>
  %h2_qt = linalg.transpose ins(%h2_q4 : tensor<2x16x2x16xf32>)
      outs(%h2_qe : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %h2_qh = tensor.collapse_shape %h2_qt [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  %h2_k4 = tensor.expand_shape %h2_k [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %h2_ke = tensor.empty() : tensor<2x2x16x16xf32>
  %h2_kt = linalg.transpose ins(%h2_k4 : tensor<2x16x2x16xf32>)
      outs(%h2_ke : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %h2_kh = tensor.collapse_shape %h2_kt [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  %h2_v4 = tensor.expand_shape %h2_v [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %h2_ve = tensor.empty() : tensor<2x2x16x16xf32>
  %h2_vt = linalg.transpose ins(%h2_v4 : tensor<2x16x2x16xf32>)
      outs(%h2_ve : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %h2_vh = tensor.collapse_shape %h2_vt [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  // scores[h, i, j] = q[h, i, :] . k[h, j, :]: k^T explicitly, then batch_matmul.
  %h2_kT = linalg.transpose ins(%h2_kh : tensor<4x16x16xf32>)
      outs(%e_att : tensor<4x16x16xf32>) permutation = [0, 2, 1]
  %h2_sc = linalg.batch_matmul ins(%h2_qh, %h2_kT : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
      outs(%z_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  // Scale by 1/sqrt(dh); causal mask: key j > query i gets -inf.
  %h2_msk = linalg.generic {indexing_maps = [#id3, #id3],
                            iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%h2_sc : tensor<4x16x16xf32>) outs(%e_att : tensor<4x16x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %qi = linalg.index 1 : index
    %kj = linalg.index 2 : index
    %sv = arith.mulf %v, %att_scale : f32
    %fut = arith.cmpi ugt, %kj, %qi : index
    %r = arith.select %fut, %ninf, %sv : f32
    linalg.yield %r : f32
  } -> tensor<4x16x16xf32>
  %h2_pr = linalg.softmax dimension(2) ins(%h2_msk : tensor<4x16x16xf32>)
      outs(%e_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %h2_oh = linalg.batch_matmul ins(%h2_pr, %h2_vh : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
      outs(%z_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  // Heads back: [B*H, T, dh] -> [B, H, T, dh] -> [B, T, H, dh] -> [B*T, d].
  %h2_o4 = tensor.expand_shape %h2_oh [[0, 1], [2], [3]] output_shape [2, 2, 16, 16]
      : tensor<4x16x16xf32> into tensor<2x2x16x16xf32>
  %h2_oe = tensor.empty() : tensor<2x16x2x16xf32>
  %h2_ot = linalg.transpose ins(%h2_o4 : tensor<2x2x16x16xf32>)
      outs(%h2_oe : tensor<2x16x2x16xf32>) permutation = [0, 2, 1, 3]
  %h2_o = tensor.collapse_shape %h2_ot [[0, 1], [2, 3]]
      : tensor<2x16x2x16xf32> into tensor<32x32xf32>
  %h2_po = linalg.matmul ins(%h2_o, %h2_wo : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h2_mid = linalg.generic {indexing_maps = [#id, #col, #id, #id],
                            iterator_types = ["parallel", "parallel"]}
      ins(%h2_po, %h2_bo, %x2 : tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%m: f32, %b: f32, %res: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    %r = arith.addf %res, %s : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>

  // MLP: mid + proj(gelu(fc(ln2(mid)))).
  %h2_ln2_sum = linalg.reduce ins(%h2_mid : tensor<32x32xf32>) outs(%z_n : tensor<32xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %h2_ln2_var = linalg.generic {indexing_maps = [#id, #row, #row],
                                iterator_types = ["parallel", "reduction"]}
      ins(%h2_mid, %h2_ln2_sum : tensor<32x32xf32>, tensor<32xf32>) outs(%z_n : tensor<32xf32>) {
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %sq = arith.mulf %dv, %dv : f32
    %t = arith.mulf %sq, %inv_d : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %h2_c = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%h2_mid, %h2_ln2_sum, %h2_ln2_var, %h2_ln2_w, %h2_ln2_b : tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%v: f32, %s: f32, %var: f32, %g: f32, %bb: f32, %o: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %ve = arith.addf %var, %eps : f32
    %sd = math.sqrt %ve : f32
    %nv = arith.divf %dv, %sd : f32
    %sc = arith.mulf %nv, %g : f32
    %r = arith.addf %sc, %bb : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  %h2_fc = linalg.matmul ins(%h2_c, %h2_wfc : tensor<32x32xf32>, tensor<32x128xf32>)
      outs(%z_nf : tensor<32x128xf32>) -> tensor<32x128xf32>
  %h2_g = linalg.generic {indexing_maps = [#id, #col, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%h2_fc, %h2_bfc : tensor<32x128xf32>, tensor<128xf32>) outs(%e_nf : tensor<32x128xf32>) {
  ^bb0(%m: f32, %b: f32, %o: f32):
    %u = arith.addf %m, %b : f32
    %us = arith.mulf %u, %inv_sqrt2 : f32
    %er = math.erf %us : f32
    %e1 = arith.addf %er, %one : f32
    %hu = arith.mulf %u, %half : f32
    %r = arith.mulf %hu, %e1 : f32
    linalg.yield %r : f32
  } -> tensor<32x128xf32>
  %h2_pm = linalg.matmul ins(%h2_g, %h2_wpr : tensor<32x128xf32>, tensor<128x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h2_out = linalg.generic {indexing_maps = [#id, #col, #id, #id],
                            iterator_types = ["parallel", "parallel"]}
      ins(%h2_pm, %h2_bpr, %h2_mid : tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%m: f32, %b: f32, %res: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    %r = arith.addf %res, %s : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  // Stage boundary after block 2.
  %x3 = pipe.cut %h2_out : tensor<32x32xf32>

  // ---- Block 3 ----
  // Attention: x3 + proj(causal_attention(ln1(x3))).
  %h3_ln1_sum = linalg.reduce ins(%x3 : tensor<32x32xf32>) outs(%z_n : tensor<32xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %h3_ln1_var = linalg.generic {indexing_maps = [#id, #row, #row],
                                iterator_types = ["parallel", "reduction"]}
      ins(%x3, %h3_ln1_sum : tensor<32x32xf32>, tensor<32xf32>) outs(%z_n : tensor<32xf32>) {
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %sq = arith.mulf %dv, %dv : f32
    %t = arith.mulf %sq, %inv_d : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %h3_a = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%x3, %h3_ln1_sum, %h3_ln1_var, %h3_ln1_w, %h3_ln1_b : tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%v: f32, %s: f32, %var: f32, %g: f32, %bb: f32, %o: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %ve = arith.addf %var, %eps : f32
    %sd = math.sqrt %ve : f32
    %nv = arith.divf %dv, %sd : f32
    %sc = arith.mulf %nv, %g : f32
    %r = arith.addf %sc, %bb : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  %h3_q = linalg.matmul ins(%h3_a, %h3_wq : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h3_k = linalg.matmul ins(%h3_a, %h3_wk : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h3_v = linalg.matmul ins(%h3_a, %h3_wv : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h3_q4 = tensor.expand_shape %h3_q [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %h3_qe = tensor.empty() : tensor<2x2x16x16xf32>
  %h3_qt = linalg.transpose ins(%h3_q4 : tensor<2x16x2x16xf32>)
      outs(%h3_qe : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %h3_qh = tensor.collapse_shape %h3_qt [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  %h3_k4 = tensor.expand_shape %h3_k [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %h3_ke = tensor.empty() : tensor<2x2x16x16xf32>
  %h3_kt = linalg.transpose ins(%h3_k4 : tensor<2x16x2x16xf32>)
      outs(%h3_ke : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %h3_kh = tensor.collapse_shape %h3_kt [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  %h3_v4 = tensor.expand_shape %h3_v [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %h3_ve = tensor.empty() : tensor<2x2x16x16xf32>
  %h3_vt = linalg.transpose ins(%h3_v4 : tensor<2x16x2x16xf32>)
      outs(%h3_ve : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %h3_vh = tensor.collapse_shape %h3_vt [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  // scores[h, i, j] = q[h, i, :] . k[h, j, :]: k^T explicitly, then batch_matmul.
  %h3_kT = linalg.transpose ins(%h3_kh : tensor<4x16x16xf32>)
      outs(%e_att : tensor<4x16x16xf32>) permutation = [0, 2, 1]
  %h3_sc = linalg.batch_matmul ins(%h3_qh, %h3_kT : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
      outs(%z_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  // Scale by 1/sqrt(dh); causal mask: key j > query i gets -inf.
  %h3_msk = linalg.generic {indexing_maps = [#id3, #id3],
                            iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%h3_sc : tensor<4x16x16xf32>) outs(%e_att : tensor<4x16x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %qi = linalg.index 1 : index
    %kj = linalg.index 2 : index
    %sv = arith.mulf %v, %att_scale : f32
    %fut = arith.cmpi ugt, %kj, %qi : index
    %r = arith.select %fut, %ninf, %sv : f32
    linalg.yield %r : f32
  } -> tensor<4x16x16xf32>
  %h3_pr = linalg.softmax dimension(2) ins(%h3_msk : tensor<4x16x16xf32>)
      outs(%e_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %h3_oh = linalg.batch_matmul ins(%h3_pr, %h3_vh : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
      outs(%z_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  // Heads back: [B*H, T, dh] -> [B, H, T, dh] -> [B, T, H, dh] -> [B*T, d].
  %h3_o4 = tensor.expand_shape %h3_oh [[0, 1], [2], [3]] output_shape [2, 2, 16, 16]
      : tensor<4x16x16xf32> into tensor<2x2x16x16xf32>
  %h3_oe = tensor.empty() : tensor<2x16x2x16xf32>
  %h3_ot = linalg.transpose ins(%h3_o4 : tensor<2x2x16x16xf32>)
      outs(%h3_oe : tensor<2x16x2x16xf32>) permutation = [0, 2, 1, 3]
  %h3_o = tensor.collapse_shape %h3_ot [[0, 1], [2, 3]]
      : tensor<2x16x2x16xf32> into tensor<32x32xf32>
  %h3_po = linalg.matmul ins(%h3_o, %h3_wo : tensor<32x32xf32>, tensor<32x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h3_mid = linalg.generic {indexing_maps = [#id, #col, #id, #id],
                            iterator_types = ["parallel", "parallel"]}
      ins(%h3_po, %h3_bo, %x3 : tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%m: f32, %b: f32, %res: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    %r = arith.addf %res, %s : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>

  // MLP: mid + proj(gelu(fc(ln2(mid)))).
  %h3_ln2_sum = linalg.reduce ins(%h3_mid : tensor<32x32xf32>) outs(%z_n : tensor<32xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %h3_ln2_var = linalg.generic {indexing_maps = [#id, #row, #row],
                                iterator_types = ["parallel", "reduction"]}
      ins(%h3_mid, %h3_ln2_sum : tensor<32x32xf32>, tensor<32xf32>) outs(%z_n : tensor<32xf32>) {
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %sq = arith.mulf %dv, %dv : f32
    %t = arith.mulf %sq, %inv_d : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %h3_c = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%h3_mid, %h3_ln2_sum, %h3_ln2_var, %h3_ln2_w, %h3_ln2_b : tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%v: f32, %s: f32, %var: f32, %g: f32, %bb: f32, %o: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %ve = arith.addf %var, %eps : f32
    %sd = math.sqrt %ve : f32
    %nv = arith.divf %dv, %sd : f32
    %sc = arith.mulf %nv, %g : f32
    %r = arith.addf %sc, %bb : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  %h3_fc = linalg.matmul ins(%h3_c, %h3_wfc : tensor<32x32xf32>, tensor<32x128xf32>)
      outs(%z_nf : tensor<32x128xf32>) -> tensor<32x128xf32>
  %h3_g = linalg.generic {indexing_maps = [#id, #col, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%h3_fc, %h3_bfc : tensor<32x128xf32>, tensor<128xf32>) outs(%e_nf : tensor<32x128xf32>) {
  ^bb0(%m: f32, %b: f32, %o: f32):
    %u = arith.addf %m, %b : f32
    %us = arith.mulf %u, %inv_sqrt2 : f32
    %er = math.erf %us : f32
    %e1 = arith.addf %er, %one : f32
    %hu = arith.mulf %u, %half : f32
    %r = arith.mulf %hu, %e1 : f32
    linalg.yield %r : f32
  } -> tensor<32x128xf32>
  %h3_pm = linalg.matmul ins(%h3_g, %h3_wpr : tensor<32x128xf32>, tensor<128x32xf32>)
      outs(%z_nd : tensor<32x32xf32>) -> tensor<32x32xf32>
  %x4 = linalg.generic {indexing_maps = [#id, #col, #id, #id],
                        iterator_types = ["parallel", "parallel"]}
      ins(%h3_pm, %h3_bpr, %h3_mid : tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%m: f32, %b: f32, %res: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    %r = arith.addf %res, %s : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>

  // Final LayerNorm and LM head: logits = lnf(x) @ lm_head ([B*T, V]).
  %lnf_sum = linalg.reduce ins(%x4 : tensor<32x32xf32>) outs(%z_n : tensor<32xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %lnf_var = linalg.generic {indexing_maps = [#id, #row, #row],
                             iterator_types = ["parallel", "reduction"]}
      ins(%x4, %lnf_sum : tensor<32x32xf32>, tensor<32xf32>) outs(%z_n : tensor<32xf32>) {
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %sq = arith.mulf %dv, %dv : f32
    %t = arith.mulf %sq, %inv_d : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %xf = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id],
                        iterator_types = ["parallel", "parallel"]}
      ins(%x4, %lnf_sum, %lnf_var, %lnf_w, %lnf_b : tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {
  ^bb0(%v: f32, %s: f32, %var: f32, %g: f32, %bb: f32, %o: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %ve = arith.addf %var, %eps : f32
    %sd = math.sqrt %ve : f32
    %nv = arith.divf %dv, %sd : f32
    %sc = arith.mulf %nv, %g : f32
    %r = arith.addf %sc, %bb : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  %e_nv = tensor.empty() : tensor<32x64xf32>
  %z_nv = linalg.fill ins(%zero : f32) outs(%e_nv : tensor<32x64xf32>) -> tensor<32x64xf32>
  %logits = linalg.matmul ins(%xf, %lm_head : tensor<32x32xf32>, tensor<32x64xf32>)
      outs(%z_nv : tensor<32x64xf32>) -> tensor<32x64xf32>
  %tgt = tensor.collapse_shape %targets [[0, 1]] : tensor<2x16xi64> into tensor<32xi64>

  // Cross-entropy per position: log(sum(exp(l - max))) + max - l[target].
  %mx0 = linalg.fill ins(%ninf : f32) outs(%e_n : tensor<32xf32>) -> tensor<32xf32>
  %mx = linalg.reduce ins(%logits : tensor<32x64xf32>) outs(%mx0 : tensor<32xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %m = arith.maximumf %in, %acc : f32
      linalg.yield %m : f32
    }
  %se = linalg.generic {indexing_maps = [#id, #row, #row],
                        iterator_types = ["parallel", "reduction"]}
      ins(%logits, %mx : tensor<32x64xf32>, tensor<32xf32>) outs(%z_n : tensor<32xf32>) {
  ^bb0(%l: f32, %m: f32, %acc: f32):
    %d = arith.subf %l, %m : f32
    %e = math.exp %d : f32
    %s = arith.addf %acc, %e : f32
    linalg.yield %s : f32
  } -> tensor<32xf32>
  %picked = linalg.generic {indexing_maps = [#id, #row, #row],
                            iterator_types = ["parallel", "reduction"]}
      ins(%logits, %tgt : tensor<32x64xf32>, tensor<32xi64>) outs(%z_n : tensor<32xf32>) {
  ^bb0(%l: f32, %t: i64, %acc: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %hit = arith.cmpi eq, %ji, %t : i64
    %v = arith.select %hit, %l, %zero : f32
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<32xf32>

  // Mean over the microbatch's B * T positions.
  %el = tensor.empty() : tensor<f32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#vec, #vec, #vec, #scalar],
                          iterator_types = ["reduction"]}
      ins(%se, %mx, %picked : tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) outs(%l0 : tensor<f32>) {
  ^bb0(%s: f32, %m: f32, %p: f32, %acc: f32):
    %lg = math.log %s : f32
    %t = arith.addf %lg, %m : f32
    %u = arith.subf %t, %p : f32
    %w = arith.mulf %u, %inv_tokens : f32
    %r = arith.addf %acc, %w : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}
