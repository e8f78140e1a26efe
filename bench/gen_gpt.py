#!/usr/bin/env python3
"""Write a GPT-style model with L transformer blocks as one MLIR function.

The model is examples/gpt.mlir with a configurable depth: the same shapes
per block (B=2 sequences, T=16 tokens, width d=32, H=2 heads of 16, vocabulary
64, a 128-wide GELU MLP), the same ops in the same order, the same argument
names and zb.param names (wte, wpe, h{i}.*, lnf.*, lm_head.weight). Since
zb-run initialises each parameter from the seed, its name and shape, the
4-layer model with 3 cuts is examples/gpt.mlir byte for byte:

    python3 bench/gen_gpt.py --layers 4 --cuts 3 examples/gpt.mlir

    python3 bench/gen_gpt.py --layers L [--cuts N] OUT.mlir

--cuts N (default 0) puts N pipe.cut markers on the residual stream, evenly
spaced between the blocks: the k-th (k = 1..N) after block
floor(k * L / (N + 1)) - 1. Without markers a pipeline partition cuts the
model by its cost model.

Naming of the residual stream: %x{i} is block i's input and %x{L} the last
block's output. A block followed by a cut writes %h{i}_out, and
%x{i+1} = pipe.cut %h{i}_out.
"""

import argparse
import sys
import textwrap

# Header comment: {blocks}, {block_word} and {cuts_sentence} are filled in;
# the paragraph is wrapped to 78 columns like the example.
INTRO = (
    "A small GPT-style decoder language model: vocabulary 64, context 16 "
    "tokens, width 32, 2 attention heads of 16, {blocks} pre-LayerNorm "
    "transformer {block_word} with a 128-wide GELU MLP, a final LayerNorm and "
    "an untied LM head; the loss is the mean next-token softmax cross-entropy "
    "over all positions. Written for one microbatch of 2 sequences; "
    "{cuts_sentence}")

HEADER_REST = r'''//
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
'''

# Per-block parameters: (SSA suffix, zb.param suffix, type).
LAYER_PARAMS = [
    ("ln1_w", "ln1.weight", "32xf32"),
    ("ln1_b", "ln1.bias", "32xf32"),
    ("wq", "attn.q.weight", "32x32xf32"),
    ("wk", "attn.k.weight", "32x32xf32"),
    ("wv", "attn.v.weight", "32x32xf32"),
    ("wo", "attn.proj.weight", "32x32xf32"),
    ("bo", "attn.proj.bias", "32xf32"),
    ("ln2_w", "ln2.weight", "32xf32"),
    ("ln2_b", "ln2.bias", "32xf32"),
    ("wfc", "mlp.fc.weight", "32x128xf32"),
    ("bfc", "mlp.fc.bias", "128xf32"),
    ("wpr", "mlp.proj.weight", "128x32xf32"),
    ("bpr", "mlp.proj.bias", "32xf32"),
]

NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven",
                "eight", "nine", "ten", "eleven", "twelve"]


def number(n):
    return NUMBER_WORDS[n] if n < len(NUMBER_WORDS) else str(n)


def join_and(items):
    items = [str(i) for i in items]
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def header(layers, cut_after):
    if cut_after:
        n = len(cut_after)
        cuts = (f"the {number(n)} pipe.cut {'marker' if n == 1 else 'markers'} "
                f"on the residual stream (after {'block' if n == 1 else 'blocks'} "
                f"{join_and(cut_after)}) split it into {number(n + 1)} "
                f"pipeline stages.")
    else:
        cuts = ("it has no pipe.cut markers, so a pipeline partition cuts it "
                "by its cost model.")
    intro = INTRO.format(blocks=layers,
                         block_word="block" if layers == 1 else "blocks",
                         cuts_sentence=cuts)
    return (textwrap.fill(intro, width=78, initial_indent="// ",
                          subsequent_indent="// ")
            + "\n" + HEADER_REST)


def signature(layers):
    args = [
        '%tokens: tensor<2x16xi64> {zb.data = "tokens", zb.range = 64 : i64}',
        '%targets: tensor<2x16xi64> {zb.data = "targets", zb.range = 64 : i64}',
        '%wte: tensor<64x32xf32> {zb.param = "wte"}',
        '%wpe: tensor<16x32xf32> {zb.param = "wpe"}',
    ]
    for i in range(layers):
        for ssa, name, ty in LAYER_PARAMS:
            args.append(f'%h{i}_{ssa}: tensor<{ty}> {{zb.param = "h{i}.{name}"}}')
    args += [
        '%lnf_w: tensor<32xf32> {zb.param = "lnf.weight"}',
        '%lnf_b: tensor<32xf32> {zb.param = "lnf.bias"}',
        '%lm_head: tensor<32x64xf32> {zb.param = "lm_head.weight"}',
    ]
    pad = " " * len("func.func @gpt(")
    return "func.func @gpt(" + (",\n" + pad).join(args) + ") -> tensor<f32> {\n"


PRELUDE = r'''  %zero = arith.constant 0.0 : f32
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
'''


def layernorm(p, x, w, b, out):
    """LayerNorm of %x ([32, 32]) over the last dim, result %out."""
    return f'''  %{p}_sum = linalg.reduce ins(%{x} : tensor<32x32xf32>) outs(%z_n : tensor<32xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {{
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }}
  %{p}_var = linalg.generic {{indexing_maps = [#id, #row, #row],
                           iterator_types = ["parallel", "reduction"]}}
      ins(%{x}, %{p}_sum : tensor<32x32xf32>, tensor<32xf32>) outs(%z_n : tensor<32xf32>) {{
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %sq = arith.mulf %dv, %dv : f32
    %t = arith.mulf %sq, %inv_d : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  }} -> tensor<32xf32>
  %{out} = linalg.generic {{indexing_maps = [#id, #row, #row, #col, #col, #id],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%{x}, %{p}_sum, %{p}_var, %{w}, %{b} : tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {{
  ^bb0(%v: f32, %s: f32, %var: f32, %g: f32, %bb: f32, %o: f32):
    %m = arith.mulf %s, %inv_d : f32
    %dv = arith.subf %v, %m : f32
    %ve = arith.addf %var, %eps : f32
    %sd = math.sqrt %ve : f32
    %nv = arith.divf %dv, %sd : f32
    %sc = arith.mulf %nv, %g : f32
    %r = arith.addf %sc, %bb : f32
    linalg.yield %r : f32
  }} -> tensor<32x32xf32>
'''


def heads(p, name):
    """[B*T, d] -> [B*H, T, dh] for projection %{p}_{name}."""
    return f'''  %{p}_{name}4 = tensor.expand_shape %{p}_{name} [[0, 1], [2, 3]] output_shape [2, 16, 2, 16]
      : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %{p}_{name}e = tensor.empty() : tensor<2x2x16x16xf32>
  %{p}_{name}t = linalg.transpose ins(%{p}_{name}4 : tensor<2x16x2x16xf32>)
      outs(%{p}_{name}e : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  %{p}_{name}h = tensor.collapse_shape %{p}_{name}t [[0, 1], [2], [3]]
      : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
'''


def matmul(out, a, b, m, k, n, init):
    return f'''  %{out} = linalg.matmul ins(%{a}, %{b} : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
      outs(%{init} : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
'''


def residual_add(out, proj, bias, res):
    """%out = %proj + %bias (per column) + %res, all [32, 32]."""
    return f'''  %{out} = linalg.generic {{indexing_maps = [#id, #col, #id, #id],
                        iterator_types = ["parallel", "parallel"]}}
      ins(%{proj}, %{bias}, %{res} : tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>)
      outs(%e_nd : tensor<32x32xf32>) {{
  ^bb0(%m: f32, %b: f32, %res: f32, %o: f32):
    %s = arith.addf %m, %b : f32
    %r = arith.addf %res, %s : f32
    linalg.yield %r : f32
  }} -> tensor<32x32xf32>
'''


def block(i, x, out):
    """Transformer block i: residual stream %x in, %out out."""
    p = f"h{i}"
    s = f"\n  // ---- Block {i} ----\n"
    s += f"  // Attention: {x} + proj(causal_attention(ln1({x}))).\n"
    s += layernorm(f"{p}_ln1", x, f"{p}_ln1_w", f"{p}_ln1_b", f"{p}_a")
    for n in ("q", "k", "v"):
        s += matmul(f"{p}_{n}", f"{p}_a", f"{p}_w{n}", 32, 32, 32, "z_nd")
    for n in ("q", "k", "v"):
        s += heads(p, n)
    s += f'''  // scores[h, i, j] = q[h, i, :] . k[h, j, :]: k^T explicitly, then batch_matmul.
  %{p}_kT = linalg.transpose ins(%{p}_kh : tensor<4x16x16xf32>)
      outs(%e_att : tensor<4x16x16xf32>) permutation = [0, 2, 1]
  %{p}_sc = linalg.batch_matmul ins(%{p}_qh, %{p}_kT : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
      outs(%z_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  // Scale by 1/sqrt(dh); causal mask: key j > query i gets -inf.
  %{p}_msk = linalg.generic {{indexing_maps = [#id3, #id3],
                         iterator_types = ["parallel", "parallel", "parallel"]}}
      ins(%{p}_sc : tensor<4x16x16xf32>) outs(%e_att : tensor<4x16x16xf32>) {{
  ^bb0(%v: f32, %o: f32):
    %qi = linalg.index 1 : index
    %kj = linalg.index 2 : index
    %sv = arith.mulf %v, %att_scale : f32
    %fut = arith.cmpi ugt, %kj, %qi : index
    %r = arith.select %fut, %ninf, %sv : f32
    linalg.yield %r : f32
  }} -> tensor<4x16x16xf32>
  %{p}_pr = linalg.softmax dimension(2) ins(%{p}_msk : tensor<4x16x16xf32>)
      outs(%e_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %{p}_oh = linalg.batch_matmul ins(%{p}_pr, %{p}_vh : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
      outs(%z_att : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  // Heads back: [B*H, T, dh] -> [B, H, T, dh] -> [B, T, H, dh] -> [B*T, d].
  %{p}_o4 = tensor.expand_shape %{p}_oh [[0, 1], [2], [3]] output_shape [2, 2, 16, 16]
      : tensor<4x16x16xf32> into tensor<2x2x16x16xf32>
  %{p}_oe = tensor.empty() : tensor<2x16x2x16xf32>
  %{p}_ot = linalg.transpose ins(%{p}_o4 : tensor<2x2x16x16xf32>)
      outs(%{p}_oe : tensor<2x16x2x16xf32>) permutation = [0, 2, 1, 3]
  %{p}_o = tensor.collapse_shape %{p}_ot [[0, 1], [2, 3]]
      : tensor<2x16x2x16xf32> into tensor<32x32xf32>
'''
    s += matmul(f"{p}_po", f"{p}_o", f"{p}_wo", 32, 32, 32, "z_nd")
    s += residual_add(f"{p}_mid", f"{p}_po", f"{p}_bo", x)
    s += "\n  // MLP: mid + proj(gelu(fc(ln2(mid)))).\n"
    s += layernorm(f"{p}_ln2", f"{p}_mid", f"{p}_ln2_w", f"{p}_ln2_b", f"{p}_c")
    s += matmul(f"{p}_fc", f"{p}_c", f"{p}_wfc", 32, 32, 128, "z_nf")
    s += f'''  %{p}_g = linalg.generic {{indexing_maps = [#id, #col, #id],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%{p}_fc, %{p}_bfc : tensor<32x128xf32>, tensor<128xf32>) outs(%e_nf : tensor<32x128xf32>) {{
  ^bb0(%m: f32, %b: f32, %o: f32):
    %u = arith.addf %m, %b : f32
    %us = arith.mulf %u, %inv_sqrt2 : f32
    %er = math.erf %us : f32
    %e1 = arith.addf %er, %one : f32
    %hu = arith.mulf %u, %half : f32
    %r = arith.mulf %hu, %e1 : f32
    linalg.yield %r : f32
  }} -> tensor<32x128xf32>
'''
    s += matmul(f"{p}_pm", f"{p}_g", f"{p}_wpr", 32, 128, 32, "z_nd")
    s += residual_add(out, f"{p}_pm", f"{p}_bpr", f"{p}_mid")
    return s


def tail(x):
    """Final LayerNorm, LM head and the mean cross-entropy of %x."""
    return r'''
  // Final LayerNorm and LM head: logits = lnf(x) @ lm_head ([B*T, V]).
''' + layernorm("lnf", x, "lnf_w", "lnf_b", "xf") + r'''  %e_nv = tensor.empty() : tensor<32x64xf32>
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
'''


def cut_positions(layers, cuts):
    """Blocks followed by a pipe.cut: N cuts evenly spaced between L blocks."""
    return [(k * layers) // (cuts + 1) - 1 for k in range(1, cuts + 1)]


def generate(layers, cuts=0):
    """The model's MLIR text."""
    if layers < 1:
        raise ValueError("--layers must be at least 1")
    if not 0 <= cuts <= layers - 1:
        raise ValueError(f"--cuts must be in [0, {layers - 1}] for {layers} "
                         f"layers (one cut at most between two blocks)")
    cut_after = cut_positions(layers, cuts)
    out = header(layers, cut_after) + "\n" + signature(layers) + PRELUDE
    for i in range(layers):
        x = f"x{i}"
        if i in cut_after:
            y = f"h{i}_out"
            out += block(i, x, y)
            out += (f"  // Stage boundary after block {i}.\n"
                    f"  %x{i + 1} = pipe.cut %{y} : tensor<32x32xf32>\n")
        else:
            out += block(i, x, f"x{i + 1}")
    out += tail(f"x{layers}")
    # Align each op's continuation line ("iterator_types = ...") under the
    # "indexing_maps" it continues.
    lines = out.split("\n")
    for n in range(1, len(lines)):
        prev, cur = lines[n - 1], lines[n]
        if "{indexing_maps" in prev and cur.lstrip().startswith("iterator_types"):
            lines[n] = " " * prev.index("indexing_maps") + cur.lstrip()
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, required=True,
                   help="transformer blocks L")
    p.add_argument("--cuts", type=int, default=0,
                   help="pipe.cut markers, evenly spaced (default 0)")
    p.add_argument("output", help="output .mlir path ('-' for stdout)")
    args = p.parse_args(argv)
    try:
        text = generate(args.layers, args.cuts)
    except ValueError as e:
        p.error(str(e))
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
