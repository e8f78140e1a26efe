"""The real models of the frontend tests: Hugging Face GPT-2, Llama (grouped
and full key/value heads), BERT, BLOOM (ALiBi attention through
``baddbmm``), T5 (encoder-decoder) and Mixtral (mixture of experts),
torchvision's vision transformer
and ResNet-18 (and DeBERTa, ONE_PROCESS_MODELS), tiny and randomly
initialised (nothing is downloaded), each wrapped so that ``model(*data)``
returns the model's own training loss for one microbatch."""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from zb_testing import require


class LossOf(nn.Module):
    """``model(*data)`` with the model's own loss: a transformers model
    called with labels (its ``.loss``), or ``loss_fn(model(x), y)``."""

    def __init__(self, model, loss_fn=None):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, *data):
        if self.loss_fn is not None:
            x, y = data
            return self.loss_fn(self.model(x), y)
        if len(data) == 1:
            return self.model(input_ids=data[0], labels=data[0]).loss
        return self.model(input_ids=data[0], labels=data[1]).loss


def _ids(count, shape=(2, 16), vocab=64, seed=7):
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, vocab, shape, generator=gen),)
            for _ in range(count)]


def gpt2(count=2, seed=7, layers=2):
    transformers = require("transformers")
    config = transformers.GPT2Config(
        n_layer=layers, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
        eos_token_id=0)
    return (LossOf(transformers.GPT2LMHeadModel(config)).eval(),
            _ids(count, seed=seed))


def llama(kv_heads, count=2, seed=7):
    transformers = require("transformers")
    config = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=kv_heads, vocab_size=64,
        max_position_embeddings=32, bos_token_id=0, eos_token_id=0)
    return (LossOf(transformers.LlamaForCausalLM(config)).eval(),
            _ids(count, seed=seed))


def _classifier(kind, count, seed):
    """A transformers ``<kind>ForSequenceClassification`` encoder (two
    blocks, three classes) and ``count`` microbatches of (ids, labels)."""
    transformers = require("transformers")
    config = getattr(transformers, f"{kind}Config")(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, vocab_size=64, max_position_embeddings=32,
        num_labels=3, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)
    gen = torch.Generator().manual_seed(seed)
    batches = [(torch.randint(0, 64, (2, 16), generator=gen),
                torch.randint(0, 3, (2,), generator=gen))
               for _ in range(count)]
    model = getattr(transformers, f"{kind}ForSequenceClassification")(config)
    return model, batches


def bert(count=2, seed=7):
    model, batches = _classifier("Bert", count, seed)
    return LossOf(model).eval(), batches


def deberta(count=2, seed=7, own_loss=False):
    """DeBERTa (v1) sequence classification, its loss applied to the
    logits by the wrapper: the model's own loss keeps only the labels that
    are not negative, a value-dependent shape that torch.export cannot
    trace (``own_loss=True`` builds that form)."""
    model, batches = _classifier("Deberta", count, seed)
    if own_loss:
        return LossOf(model).eval(), batches
    return LossOf(model, lambda out, y: F.cross_entropy(out.logits, y)) \
        .eval(), batches


class InputLoss(nn.Module):
    """A transformers model's own loss for inputs that are not token ids:
    ``model(**{keys[0]: x, keys[1]: y...}).loss``, the data arguments
    passed by those names (``"pixel_values", "labels"``)."""

    def __init__(self, model, *keys):
        super().__init__()
        self.model = model
        self.keys = keys

    def forward(self, *data):
        return self.model(**dict(zip(self.keys, data))).loss


def mamba(count=2, seed=7):
    """Mamba: the selective scan's sequential form (the slow path without
    its CUDA kernels), a causal depthwise conv1d, softplus."""
    transformers = require("transformers")
    config = transformers.MambaConfig(vocab_size=64, hidden_size=32,
                                      num_hidden_layers=2, state_size=4)
    return (LossOf(transformers.MambaForCausalLM(config)).eval(),
            _ids(count, seed=seed))


def deepseek_v3(count=2, seed=7):
    """DeepSeek-V3: multi-head latent attention (low-rank q and kv with a
    rotary part) and group-routed experts with a shared one."""
    transformers = require("transformers")
    config = transformers.DeepseekV3Config(
        vocab_size=64, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, intermediate_size=64,
        moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2,
        n_shared_experts=1, first_k_dense_replace=1, n_group=1,
        topk_group=1, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=4,
        qk_nope_head_dim=4, v_head_dim=8, max_position_embeddings=64)
    return (LossOf(transformers.DeepseekV3ForCausalLM(config)).eval(),
            _ids(count, seed=seed))


def whisper(count=2, seed=7):
    """Whisper's encoder with a classification head on log-mel features:
    conv1d stem, sinusoidal positions (frozen)."""
    transformers = require("transformers")
    config = transformers.WhisperConfig(
        num_mel_bins=8, d_model=32, encoder_layers=2,
        encoder_attention_heads=4, decoder_layers=1,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_source_positions=16, num_labels=10, vocab_size=64)
    model = transformers.WhisperForAudioClassification(config)
    return (InputLoss(model, "input_features", "labels").eval(),
            _images(count, (2, 8, 32), seed=seed))


# Wav2Vec2's tiny encoder, shared by the models built on it (WavLM).
_WAV2VEC2_ENCODER = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=64, conv_dim=(8, 8), conv_stride=(5, 2),
    conv_kernel=(10, 3), num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=2, num_labels=10, vocab_size=32)


def wav2vec2(count=2, seed=7):
    """Wav2Vec2 on raw audio: the conv feature encoder with group norm, the
    weight-normed positional convolution, mean pooling."""
    transformers = require("transformers")
    config = transformers.Wav2Vec2Config(**_WAV2VEC2_ENCODER)
    model = transformers.Wav2Vec2ForSequenceClassification(config)
    return (InputLoss(model, "input_values", "labels").eval(),
            _images(count, (2, 400), seed=seed))


def wavlm(count=2, seed=7):
    """WavLM on raw audio: Wav2Vec2's encoder with gated relative position
    buckets."""
    transformers = require("transformers")
    config = transformers.WavLMConfig(**_WAV2VEC2_ENCODER, num_buckets=8,
                                      max_bucket_distance=16)
    model = transformers.WavLMForSequenceClassification(config)
    return (InputLoss(model, "input_values", "labels").eval(),
            _images(count, (2, 400), seed=seed))


def mbart(count=2, seed=7):
    """MBart: the decoder's input is the labels rotated to start at the
    last token that is not padding (a count of booleans, then a gather)."""
    transformers = require("transformers")
    config = transformers.MBartConfig(
        vocab_size=64, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
        pad_token_id=0)
    model = transformers.MBartForConditionalGeneration(config)
    return LossOf(model).eval(), _ids(count, seed=seed)


def llama4(count=2, seed=7):
    """Llama 4's text model: rotary embeddings through complex numbers
    (view_as_complex, polar), routed and shared experts."""
    transformers = require("transformers")
    config = transformers.Llama4TextConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        intermediate_size=64, intermediate_size_mlp=64,
        max_position_embeddings=64, num_local_experts=2,
        num_experts_per_tok=1, interleave_moe_layer_step=1)
    model = transformers.Llama4ForCausalLM(config)
    return LossOf(model).eval(), _ids(count, seed=seed)


def time_series(count=2, seed=7):
    """transformers' time-series transformer: a Student's t head (its
    log-density's lgamma and log1p, torch.distributions' argument checks)
    on lagged values."""
    transformers = require("transformers")
    config = transformers.TimeSeriesTransformerConfig(
        prediction_length=4, context_length=8, lags_sequence=[1, 2],
        num_time_features=1, d_model=16, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=32, decoder_ffn_dim=32)
    model = transformers.TimeSeriesTransformerForPrediction(config)
    gen = torch.Generator().manual_seed(seed)
    batches = [(torch.randn(2, 10, generator=gen),
                torch.randn(2, 10, 1, generator=gen), torch.ones(2, 10),
                torch.randn(2, 4, generator=gen),
                torch.randn(2, 4, 1, generator=gen)) for _ in range(count)]
    return InputLoss(model, "past_values", "past_time_features",
                     "past_observed_mask", "future_values",
                     "future_time_features").eval(), batches


def llava(count=2, seed=7):
    """LLaVA: a CLIP vision tower's patch features projected and merged
    into a Llama's token embeddings at the image tokens (masked_scatter),
    the token count checked by a runtime assertion (left out)."""
    transformers = require("transformers")
    image_token = 63
    config = transformers.LlavaConfig(
        vision_config=transformers.CLIPVisionConfig(
            image_size=16, patch_size=8, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=64),
        text_config=transformers.LlamaConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=64, max_position_embeddings=64),
        image_token_id=image_token)
    model = transformers.LlavaForConditionalGeneration(config)
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        ids = torch.randint(0, image_token, (2, 12), generator=gen)
        ids[0, 1:5] = image_token  # (16 / 8)^2 patches per image
        ids[1, 6:10] = image_token
        batches.append((ids, torch.randn(2, 3, 16, 16, generator=gen),
                        torch.randint(0, image_token, (2, 12),
                                      generator=gen)))
    return InputLoss(model, "input_ids", "pixel_values",
                     "labels").eval(), batches


class FixedLayoutLoss(nn.Module):
    """A transformers model's own loss for ``(input_ids, pixel_values,
    labels)``, with keyword arguments whose values are the same for every
    batch (an image grid, position ids) built in forward from Python lists
    (``torch.tensor``), which makes them constants of the program."""

    def __init__(self, model, **fixed):
        super().__init__()
        self.model = model
        self.fixed = {key: (value.tolist(), value.dtype)
                      for key, value in fixed.items()}

    def forward(self, input_ids, pixel_values, labels):
        fixed = {key: torch.tensor(values, dtype=dtype)
                 for key, (values, dtype) in self.fixed.items()}
        return self.model(input_ids=input_ids, pixel_values=pixel_values,
                          labels=labels, **fixed).loss


def qwen_vl(version, count=2, seed=7):
    """Qwen2-VL (``version`` 2) or Qwen3-VL (3): a vision tower over the
    patches of images of a given grid (image_grid_thw: its rotary
    positions, its attention split per image by the grid's values; Qwen3:
    its position embeddings resized to the grid), merged 2 x 2 into the
    text's image tokens (Qwen3 also adds a vision layer's features to the
    first text layer's image tokens: hidden[mask], the count asserted),
    and the text's multimodal rotary positions (M-RoPE) from the same
    grid: grid and position ids are the same for every batch,
    constants."""
    transformers = require("transformers")
    image_token, start_token = 63, 61
    vision = dict(depth=2, hidden_size=32, num_heads=4, patch_size=4,
                  spatial_merge_size=2, temporal_patch_size=2)
    text = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=64, max_position_embeddings=128)
    tokens = dict(image_token_id=image_token, video_token_id=62,
                  vision_start_token_id=start_token)
    if version == 2:
        config = transformers.Qwen2VLConfig(
            vision_config=dict(vision, embed_dim=32, mlp_ratio=2,
                               in_chans=3),
            text_config=dict(text, rope_scaling={
                "type": "mrope", "mrope_section": [1, 1, 2]}), **tokens)
        model = transformers.Qwen2VLForConditionalGeneration(config)
    else:
        config = transformers.Qwen3VLConfig(
            vision_config=dict(vision, intermediate_size=64, in_channels=3,
                               out_hidden_size=32, num_position_embeddings=16,
                               deepstack_visual_indexes=[0]),
            text_config=dict(text, head_dim=8, rope_parameters={
                "rope_type": "default", "rope_theta": 10000.0,
                "mrope_section": [1, 1, 2], "mrope_interleaved": True}),
            **tokens)
        model = transformers.Qwen3VLForConditionalGeneration(config)
    # Two images of 1 x 4 x 6 patches, (4 / 2) * (6 / 2) = 6 tokens each.
    grid = torch.tensor([[1, 4, 6], [1, 4, 6]])
    layout = torch.zeros(2, 12, dtype=torch.long)
    layout[:, 1] = start_token
    layout[:, 2:8] = image_token
    positions, _ = model.model.get_rope_index(
        layout, (layout == image_token).long(), grid)
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        ids = torch.randint(0, start_token, (2, 12), generator=gen)
        ids[:, 1:8] = layout[:, 1:8]
        batches.append((ids, torch.randn(48, 3 * 2 * 4 * 4, generator=gen),
                        torch.randint(0, start_token, (2, 12),
                                      generator=gen)))
    return FixedLayoutLoss(model, image_grid_thw=grid,
                           position_ids=positions).eval(), batches


def xlm(count=2, seed=7):
    """XLM: sinusoidal positions, and an ``assert lengths.max().item() <=
    slen`` on the token count (a runtime check left out)."""
    transformers = require("transformers")
    config = transformers.XLMConfig(vocab_size=64, emb_dim=32, n_layers=2,
                                    n_heads=4, max_position_embeddings=64)
    model = transformers.XLMWithLMHeadModel(config)
    return LossOf(model).eval(), _ids(count, seed=seed)


def bloom(count=2, seed=7):
    transformers = require("transformers")
    config = transformers.BloomConfig(
        hidden_size=32, n_layer=2, n_head=2, vocab_size=64,
        hidden_dropout=0.0, attention_dropout=0.0, bos_token_id=0,
        eos_token_id=0)
    return (LossOf(transformers.BloomForCausalLM(config)).eval(),
            _ids(count, seed=seed))


def t5(count=2, seed=7):
    """An encoder-decoder: the labels, shifted right in the model
    (writes through slices), feed the decoder."""
    transformers = require("transformers")
    config = transformers.T5Config(
        vocab_size=64, d_model=32, d_kv=16, d_ff=64, num_layers=2,
        num_heads=2, dropout_rate=0.0, decoder_start_token_id=0,
        pad_token_id=0, eos_token_id=1)
    gen = torch.Generator().manual_seed(seed)
    batches = [(torch.randint(2, 64, (2, 16), generator=gen),
                torch.randint(2, 64, (2, 8), generator=gen))
               for _ in range(count)]
    model = LossOf(transformers.T5ForConditionalGeneration(config)).eval()
    return model, batches


def mixtral(count=2, seed=7):
    """Mixture of experts: each token's top 2 of 4 experts (from_torch
    exports them as grouped products, each expert's rows in one gemm), and
    the router's load-balancing loss added to the model's loss (it counts
    tokens per expert with torch.histc)."""
    transformers = require("transformers")
    config = transformers.MixtralConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, num_local_experts=4,
        num_experts_per_tok=2, vocab_size=64, max_position_embeddings=32,
        bos_token_id=0, eos_token_id=0, output_router_logits=True,
        router_aux_loss_coef=0.02)
    return (LossOf(transformers.MixtralForCausalLM(config)).eval(),
            _ids(count, seed=seed))


def _causal(kind, count, seed, model_class=None, **options):
    """A transformers ``<kind>ForCausalLM`` (two blocks of width 32, four
    heads sharing two key/value heads) with ``options`` in its config, and
    ``count`` microbatches of ids that are also the labels."""
    transformers = require("transformers")
    config = getattr(transformers, f"{kind}Config")(**{
        "vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 64,
        "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0,
        **options})
    model = getattr(transformers, model_class or f"{kind}ForCausalLM")
    return LossOf(model(config)).eval(), _ids(count, seed=seed)


class _PaddedLoss(nn.Module):
    """A causal LM's own loss on a padded batch: ``attention_mask`` zero
    at the padding, whose labels are -100."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, mask, labels):
        return self.model(input_ids=ids, attention_mask=mask,
                          labels=labels).loss


def padded_llama(count=2, seed=7):
    """Llama on a padded batch: transformers builds the boolean causal and
    padding mask once, before the first layer, and every layer reads it
    (pipelined, it crosses the cuts)."""
    model, batches = llama(1, count=count, seed=seed)
    padded = []
    for (ids,) in batches:
        mask = torch.ones_like(ids)
        mask[1, 11:] = 0
        padded.append((ids, mask, ids.masked_fill(mask == 0, -100)))
    return _PaddedLoss(model.model).eval(), padded


def gemma2(count=2, seed=7):
    """Gemma 2: attention logits and final logits soft-capped (tanh),
    sliding-window attention in every other layer."""
    return _causal("Gemma2", count, seed, head_dim=8, sliding_window=8,
                   attn_logit_softcapping=50.0, final_logit_softcapping=30.0)


def qwen3_moe(count=2, seed=7):
    """Qwen3-MoE: q/k RMS norms, top 2 of 4 experts with the router's
    load-balancing loss."""
    return _causal("Qwen3Moe", count, seed, head_dim=8,
                   moe_intermediate_size=32, num_experts=4,
                   num_experts_per_tok=2, output_router_logits=True)


def recurrent_gemma(count=2, seed=7):
    """RecurrentGemma: a real-gated linear recurrence (RG-LRU) with a
    causal depthwise convolution, then local attention."""
    return _causal("RecurrentGemma", count, seed, num_key_value_heads=1,
                   lru_width=32, attention_window_size=8, conv1d_width=4,
                   block_types=["recurrent", "attention"])


def modernbert(count=2, seed=7):
    """ModernBERT: local (sliding-window) attention in every other layer,
    global rotary attention in the rest, the classifier on mean or CLS
    pooling."""
    transformers = require("transformers")
    config = transformers.ModernBertConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64, global_attn_every_n_layers=2,
        local_attention=8, num_labels=3, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, cls_token_id=1, sep_token_id=2)
    gen = torch.Generator().manual_seed(seed)
    batches = [(torch.randint(3, 64, (2, 16), generator=gen),
                torch.randint(0, 3, (2,), generator=gen))
               for _ in range(count)]
    return (LossOf(transformers.ModernBertForSequenceClassification(
        config)).eval(), batches)


def xlnet(count=2, seed=7):
    """XLNet: relative positional attention with its content and position
    biases, the summary of the last token."""
    transformers = require("transformers")
    config = transformers.XLNetConfig(
        vocab_size=64, d_model=32, n_layer=2, n_head=4, d_inner=64,
        dropout=0.0, num_labels=3, summary_last_dropout=0.0)
    _, batches = _classifier("Bert", count, seed)
    return (LossOf(transformers.XLNetForSequenceClassification(config))
            .eval(), batches)


class _ContrastiveLoss(nn.Module):
    """CLIP's own contrastive loss over the microbatch's (text, image)
    pairs."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, pixels):
        return self.model(input_ids=ids, pixel_values=pixels,
                          return_loss=True).loss


def clip(count=2, seed=7):
    """CLIP: a text and a vision transformer, their pooled features
    projected, normalised and compared by a learned temperature."""
    transformers = require("transformers")
    config = transformers.CLIPConfig(
        text_config=dict(vocab_size=64, hidden_size=32,
                         intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=16,
                         eos_token_id=2, bos_token_id=1, pad_token_id=0),
        vision_config=dict(image_size=32, patch_size=8, hidden_size=32,
                           intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4),
        projection_dim=16)
    gen = torch.Generator().manual_seed(seed)
    batches = [(torch.randint(3, 64, (2, 8), generator=gen),
                torch.randn(2, 3, 32, 32, generator=gen))
               for _ in range(count)]
    return _ContrastiveLoss(transformers.CLIPModel(config)).eval(), batches


def albert(count=2, seed=7):
    """ALBERT: one set of layer weights shared by both layers (a tied
    parameter used twice in a row, on two ranks one copy each) and a
    factorised embedding."""
    transformers = require("transformers")
    config = transformers.AlbertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, vocab_size=64, max_position_embeddings=32,
        num_labels=3, embedding_size=16, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)
    _, batches = _classifier("Bert", count, seed)
    return (LossOf(transformers.AlbertForSequenceClassification(config))
            .eval(), batches)


def _images(count, shape, classes=10, seed=7):
    """Random inputs of ``shape`` (images, audio...) with class labels."""
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(*shape, generator=gen),
             torch.randint(0, classes, (shape[0],), generator=gen))
            for _ in range(count)]


def vit(count=2, seed=7):
    torchvision = require("torchvision")
    model = torchvision.models.VisionTransformer(
        image_size=16, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
        mlp_dim=64, num_classes=10)
    return (LossOf(model, F.cross_entropy).eval(),
            _images(count, (2, 3, 16, 16), seed=seed))


def maxvit(count=2, seed=7):
    """MaxViT (one stage): MBConv with training-mode batch norm, block and
    grid attention through swapaxes. Stochastic depth off (its draws are
    checked in test_dropout.py)."""
    torchvision = require("torchvision")
    model = torchvision.models.MaxVit(
        input_size=(28, 28), stem_channels=8, partition_size=7,
        block_channels=[16], block_layers=[1], head_dim=8,
        stochastic_depth_prob=0.0, num_classes=10)
    return (LossOf(model, F.cross_entropy).train(),
            _images(count, (2, 3, 28, 28), seed=seed))


def swin_v2(count=2, seed=7):
    """Swin Transformer V2 (two stages): shifted windows, the continuous
    position bias MLP, cosine attention with its logit scale and the q/k/v
    bias whose k part is zeroed in place."""
    torchvision = require("torchvision")
    swin = torchvision.models.swin_transformer
    model = swin.SwinTransformer(
        patch_size=[2, 2], embed_dim=16, depths=[1, 1], num_heads=[2, 2],
        window_size=[4, 4], stochastic_depth_prob=0.0, num_classes=10,
        block=swin.SwinTransformerBlockV2,
        downsample_layer=swin.PatchMergingV2)
    return (LossOf(model, F.cross_entropy).train(),
            _images(count, (2, 3, 16, 16), seed=seed))


def resnet18(count=2, seed=7):
    """Training-mode batch norm, in float64. 64x64 images: at 32x32 the
    last block's batch norm sees one pixel of two images, where PyTorch's
    own float32 gradients are far from its float64 ones. Float64 because a
    float32 comparison is not well posed here: of the ~370k values entering
    the ReLUs, some lie within 3e-6 of zero (relative to their largest),
    inside float32 rounding, so which side of the kink they fall on depends
    on summation order (OpenBLAS's kernels for the CPU at hand), and one
    such value moves the gradients of every earlier layer by ~1e-2."""
    torchvision = require("torchvision")
    model = LossOf(torchvision.models.resnet18(num_classes=10),
                   F.cross_entropy).train().double()
    return model, [(x.double(), y)
                   for x, y in _images(count, (2, 3, 64, 64), seed=seed)]


MODELS = {"gpt2": gpt2, "llama": lambda **kw: llama(1, **kw),
          "llama_mha": lambda **kw: llama(2, **kw), "bert": bert,
          "bloom": bloom, "t5": t5, "mixtral": mixtral, "vit": vit,
          "maxvit": maxvit, "swin_v2": swin_v2, "resnet18": resnet18,
          "albert": albert, "padded_llama": padded_llama}
# Checked on one process only (test_aten_ops.py).
ONE_PROCESS_MODELS = {"deberta": deberta, "mamba": mamba,
                      "deepseek_v3": deepseek_v3, "whisper": whisper,
                      "wav2vec2": wav2vec2, "wavlm": wavlm, "mbart": mbart,
                      "llama4": llama4, "time_series": time_series,
                      "xlm": xlm, "llava": llava,
                      "qwen2_vl": lambda **kw: qwen_vl(2, **kw),
                      "qwen3_vl": lambda **kw: qwen_vl(3, **kw),
                      "gemma2": gemma2, "qwen3_moe": qwen3_moe,
                      "recurrent_gemma": recurrent_gemma,
                      "modernbert": modernbert, "xlnet": xlnet,
                      "clip": clip}


def torch_reference(model, batches):
    """Mean loss and mean parameter gradients over the microbatches (of
    the trained parameters: frozen ones are constants of the program, and
    the program leaves out those the loss does not read, which PyTorch
    gives no gradient)."""
    model.zero_grad()
    losses = []
    for args in batches:
        loss = model(*args) / len(batches)
        loss.backward()
        losses.append(loss.item())
    grads = {n: p.grad.detach().numpy().copy()
             for n, p in model.named_parameters()
             if p.requires_grad and p.grad is not None}
    return sum(losses), grads


def assert_grads_close(name, grads, ref_grads, rtol):
    """Every gradient relative to its largest entry, but at least 1e-3 of
    the model's largest: attention's key bias has a zero gradient in exact
    arithmetic (softmax ignores a per-row shift), so both sides hold
    rounding noise there."""
    assert sorted(grads) == sorted(ref_grads), name
    floor = 1e-3 * max(float(np.abs(g).max()) for g in ref_grads.values())
    for param, grad in ref_grads.items():
        ours = grads[param]
        assert ours.shape == grad.shape, param
        scale = max(float(np.abs(grad).max()), floor)
        err = float(np.abs(ours - grad).max()) / scale
        assert err <= rtol, (f"{name} grad {param}: relative error "
                             f"{err:.2e} > {rtol:.0e}")
