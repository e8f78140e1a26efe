"""Training-mode dropout (channel and alpha dropout too), bernoulli draws
(torchvision's stochastic depth), rand, randn, uniform_ and normal_: each
microbatch's random key (zb-run's, from the seed and the microbatch's
global number) and the op's number decide which elements are kept (or
the values drawn), so a pipelined run draws what one process draws and
the backward recomputes a mask from the key.

The draws are recomputed here from the documented rule (docs/Python.md)
by a NumPy implementation of it; PyTorch autograd with those draws is the
reference for the losses, gradients and trained parameters.
"""

import copy

import numpy as np
import pytest

from zb_testing import assert_close, require

torch = require("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import zerobubble as zb  # noqa: E402

MASK = (1 << 64) - 1
SEED = 5
MICROBATCHES = 2
STEPS = 3


def mix64(z):
    """SplitMix64's finaliser on unsigned 64-bit words (NumPy uint64)."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def rng_key(seed, microbatch):
    with np.errstate(over="ignore"):
        return mix64(mix64(np.uint64(seed)) + np.uint64(microbatch))


def draws(key, op, shape):
    """Random op number ``op``'s 24-bit draws for ``key`` (uint64)."""
    index = np.arange(int(np.prod(shape)), dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (key + np.uint64(op) * np.uint64(0xD1B54A32D192ED03)
             + index * np.uint64(0x9E3779B97F4A7C15))
    return (mix64(z) >> np.uint64(40)).reshape(shape)


def uniform(key, op, shape):
    """torch.rand's stand-in: op ``op``'s draws times 2^-24."""
    return draws(key, op, shape).astype(np.float64) * 2.0 ** -24


def normal(key, op, shape):
    """torch.randn's stand-in: Box-Muller on the draws of ops ``op`` and
    ``op + 1``."""
    u1, u2 = uniform(key, op, shape), uniform(key, op + 1, shape)
    return np.sqrt(-2.0 * np.log(1.0 - u1)) * np.cos(2.0 * np.pi * u2)


def below(key, op, shape, p):
    """Where random op number ``op``'s draws for ``key`` are below p
    (probability p): a bernoulli(p) draw is 1 there, a dropout of p drops
    there."""
    return draws(key, op, shape) < np.uint64(round(p * (1 << 24)))


def kept(key, op, shape, p):
    """Which elements a dropout of p, random op number ``op``, keeps."""
    return ~below(key, op, shape, p)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(8, 16)
        self.d1 = nn.Dropout(0.3)
        self.l2 = nn.Linear(16, 16)
        self.d2 = nn.Dropout(0.5)
        self.l3 = nn.Linear(16, 4)

    def forward(self, x, y):
        h = self.d1(torch.relu(self.l1(x)))
        h = self.d2(torch.relu(self.l2(h)))
        return F.cross_entropy(self.l3(h), y)


class Drawn(nn.Module):
    """``x`` times ``multiplier(key)``, the key that of the microbatch
    being run (``Drawn.key``): a random op with zb-run's draws."""
    key = None

    def __init__(self, multiplier):
        super().__init__()
        self.multiplier = multiplier

    def forward(self, x):
        return x * torch.from_numpy(self.multiplier(Drawn.key)).to(x.dtype)


def dropout_as_drawn(op, shape, p):
    return Drawn(lambda key: kept(key, op, shape, p) / (1.0 - p))


def data(steps, seed=3):
    gen = torch.Generator().manual_seed(seed)
    return [[(torch.randn(4, 8, generator=gen),
              torch.randint(0, 4, (4,), generator=gen))
             for _ in range(MICROBATCHES)] for _ in range(steps)]


def torch_training(model, batches, lr, drawn):
    """AdamW in float64 with the draws of zb-run (``drawn``: module name ->
    its Drawn stand-in): losses per step, the last step's gradients, the
    trained parameters."""
    model = copy.deepcopy(model).double()
    for name, module in drawn.items():
        setattr(model, name, module)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for step, microbatches in enumerate(batches):
        opt.zero_grad()
        total = 0.0
        for mb, (x, y) in enumerate(microbatches):
            Drawn.key = rng_key(SEED, step * MICROBATCHES + mb)
            loss = model(x.double(), y) / len(microbatches)
            loss.backward()
            total += float(loss.detach())
        losses.append(total)
        grads = {n: p.grad.detach().numpy().copy()
                 for n, p in model.named_parameters()}
        opt.step()
    params = {n: p.detach().numpy() for n, p in model.named_parameters()}
    return losses, grads, params


def check_training(model, drawn, ranks):
    """zb.run's AdamW steps of ``model`` against torch_training."""
    batches = data(STEPS)
    program = zb.from_torch(model, batches[0][0])
    keys = [a for a in program.data_args if a.rng]
    assert len(keys) == 1 and keys[0].shape == (1,), program.data_args
    assert "zb.rng" in program.mlir
    initial = {k: v.copy() for k, v in program.params.items()}
    result = zb.run(program, ranks=ranks, schedule="zb-h1",
                    microbatches=MICROBATCHES, steps=STEPS,
                    optimizer="adamw", lr=1e-2, params=initial,
                    inputs=batches, seed=SEED)
    losses, grads, params = torch_training(model, batches, 1e-2, drawn)
    assert_close("losses", result.losses, losses, 1e-5)
    for name, grad in grads.items():
        assert_close(f"grad {name}", result.grads[name], grad, 1e-4)
    for name, value in params.items():
        assert_close(f"param {name}", result.params[name], value, 1e-4)


@pytest.mark.parametrize("ranks", [1, 2])
def test_dropout_trains_like_torch_with_the_same_masks(ranks):
    torch.manual_seed(0)
    check_training(Net().train(), {"d1": dropout_as_drawn(0, (4, 16), 0.3),
                                   "d2": dropout_as_drawn(1, (4, 16), 0.5)},
                   ranks)


class Recurrent(nn.Module):
    """Two LSTM layers over a sequence of 4 steps (the microbatch's rows),
    with a dropout between them in training."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, dropout=0.3)
        self.out = nn.Linear(16, 4)

    def forward(self, x, y):
        h, _ = self.lstm(x)
        return F.cross_entropy(self.out(h), y)


class RecurrentReference(Recurrent):
    """Recurrent's layers one at a time (torch.lstm), ``drop`` between."""

    def forward(self, x, y):
        lstm, h = self.lstm, x.unsqueeze(1)
        zeros = torch.zeros(1, 1, 16, dtype=x.dtype)
        for layer in range(2):
            if layer:
                h = self.drop(h)
            weights = [getattr(lstm, f"{kind}_l{layer}") for kind in (
                "weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            h = torch.lstm(h, (zeros, zeros), weights, True, 1, 0.0, True,
                           False, False)[0]
        return F.cross_entropy(self.out(h.squeeze(1)), y)


@pytest.mark.parametrize("ranks", [1, 2])
def test_dropout_between_recurrent_layers_trains_like_torch(ranks):
    """nn.LSTM(num_layers=2, dropout=p) in training: the first layer's
    outputs go to the second under a dropout (drawn over [steps, batch,
    hidden]), as PyTorch's; it was refused."""
    torch.manual_seed(0)
    model = Recurrent().train()
    reference = RecurrentReference()
    reference.load_state_dict(model.state_dict())
    batches = data(STEPS)
    program = zb.from_torch(model, batches[0][0])
    assert "zb.rng" in program.mlir
    result = zb.run(program, ranks=ranks, schedule="zb-h1",
                    microbatches=MICROBATCHES, steps=STEPS,
                    optimizer="adamw", lr=1e-2, inputs=batches, seed=SEED)
    losses, grads, params = torch_training(
        reference.train(), batches, 1e-2,
        {"drop": dropout_as_drawn(0, (4, 1, 16), 0.3)})
    assert_close("losses", result.losses, losses, 1e-5)
    for name, grad in grads.items():
        assert_close(f"grad {name}", result.grads[name], grad, 1e-4)
    for name, value in params.items():
        assert_close(f"param {name}", result.params[name], value, 1e-4)


class Residual(nn.Module):
    """A residual block under torchvision's stochastic depth (a bernoulli_
    per sample), then a dropout: two random ops, numbered 0 and 1."""

    def __init__(self):
        super().__init__()
        torchvision = require("torchvision")
        self.l1 = nn.Linear(8, 16)
        self.l2 = nn.Linear(16, 16)
        self.depth = torchvision.ops.StochasticDepth(0.4, "row")
        self.drop = nn.Dropout(0.2)
        self.l3 = nn.Linear(16, 4)

    def forward(self, x, y):
        h = torch.relu(self.l1(x))
        h = h + self.depth(torch.relu(self.l2(h)))
        return F.cross_entropy(self.l3(self.drop(h)), y)


@pytest.mark.parametrize("ranks", [1, 2])
def test_stochastic_depth_trains_like_torch_with_the_same_draws(ranks):
    """Each sample's branch survives with probability 0.6 (a bernoulli
    draw below 0.6) and is then scaled by 1 / 0.6, as torchvision does."""
    torch.manual_seed(0)
    survive = Drawn(lambda key: below(key, 0, (4, 1), 0.6) / 0.6)
    check_training(Residual().train(),
                   {"depth": survive, "drop": dropout_as_drawn(1, (4, 16),
                                                               0.2)},
                   ranks)


class Attention(nn.Module):
    """Causal self-attention with attention dropout (PyTorch's SDPA with
    dropout_p, or with ``drawn`` the reference's math: the probabilities
    times a mask)."""

    def __init__(self):
        super().__init__()
        # No bias: the key's would get a gradient of 0 in exact arithmetic
        # (softmax ignores it), rounding noise that AdamW blows up.
        self.qkv = nn.Linear(8, 24, bias=False)
        self.out = nn.Linear(8, 4)
        self.drawn = None

    def forward(self, x, y):
        q, k, v = self.qkv(x.reshape(1, 4, 8)).reshape(1, 4, 3, 2, 4) \
            .permute(2, 0, 3, 1, 4)
        if self.drawn is None:
            h = F.scaled_dot_product_attention(q, k, v, dropout_p=0.25,
                                               is_causal=True)
        else:
            scores = (q @ k.transpose(-1, -2)) / 2.0
            future = torch.ones(4, 4, dtype=torch.bool).triu(1)
            probs = scores.masked_fill(future, float("-inf")).softmax(-1)
            h = self.drawn(probs) @ v
        h = h.permute(0, 2, 1, 3).reshape(4, 8)
        return F.cross_entropy(self.out(h), y)


@pytest.mark.parametrize("ranks", [1, 2])
def test_attention_dropout_trains_like_torch_with_the_same_masks(ranks):
    torch.manual_seed(0)
    check_training(Attention().train(),
                   {"drawn": dropout_as_drawn(0, (1, 2, 4, 4), 0.25)}, ranks)


def test_dropout_masks_of_other_draws_differ():
    """The rule itself: a quarter dropped at p = 0.25 (within 4 sigma over
    2^16 draws), and other microbatches, steps and ops draw other masks."""
    shape = (256, 256)
    first = kept(rng_key(SEED, 0), 0, shape, 0.25)
    sigma = np.sqrt(0.25 * 0.75 / first.size)
    assert abs((~first).mean() - 0.25) < 4 * sigma
    for other in (kept(rng_key(SEED, 1), 0, shape, 0.25),
                  kept(rng_key(SEED + 1, 0), 0, shape, 0.25),
                  kept(rng_key(SEED, 0), 1, shape, 0.25)):
        # Independent masks agree on 1 - 2pq of the elements.
        agree = (first == other).mean()
        assert abs(agree - (1 - 2 * 0.25 * 0.75)) < 4 * sigma


def test_dropout_in_eval_mode_or_at_zero_adds_no_key():
    torch.manual_seed(0)
    for model in (Net().eval(), Net().train()):
        if model.training:
            model.d1.p = model.d2.p = 0.0
        program = zb.from_torch(model, data(1)[0][0])
        assert not any(a.rng for a in program.data_args)
        assert "zb.rng" not in program.mlir


@pytest.mark.parametrize("name", ["opt", "gpt2", "swin"])
def test_a_real_model_with_dropout_pipelines_like_one_process(name):
    """Hugging Face OPT and GPT-2 keep their default dropouts (0.1: OPT's
    in every decoder layer, GPT-2's on the embeddings, the residuals and
    the attention probabilities), Swin its default drop path (0.1, per
    sample: the floor of keep_prob + torch.rand): pipelined on two ranks
    (ZB-V, four stages) they draw the masks of one process, and the masks
    change the gradients."""
    transformers = require("transformers")
    from real_models import InputLoss, LossOf, _ids, _images

    torch.manual_seed(0)
    batches = _ids(MICROBATCHES)
    if name == "swin":
        config = transformers.SwinConfig(
            image_size=32, patch_size=4, embed_dim=16, depths=[2, 2],
            num_heads=[2, 2], window_size=4, num_labels=10)
        assert config.drop_path_rate > 0
        model = InputLoss(transformers.SwinForImageClassification(config),
                          "pixel_values", "labels")
        batches = _images(MICROBATCHES, (2, 3, 32, 32))
    elif name == "opt":
        config = transformers.OPTConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=4,
            num_attention_heads=4, ffn_dim=64, max_position_embeddings=64,
            word_embed_proj_dim=32)
        assert config.dropout > 0
        model = transformers.OPTForCausalLM(config)
    else:
        config = transformers.GPT2Config(vocab_size=64, n_positions=32,
                                         n_embd=32, n_layer=4, n_head=4)
        assert min(config.attn_pdrop, config.resid_pdrop,
                   config.embd_pdrop) > 0
        model = transformers.GPT2LMHeadModel(config)
    if name != "swin":
        model = LossOf(model)
    model.train()
    program = zb.from_torch(model, batches[0])
    assert "zb.rng" in program.mlir
    one = zb.gradients(program, microbatches=MICROBATCHES, inputs=batches,
                       seed=SEED)
    two = zb.gradients(program, ranks=2, schedule="zb-v",
                       microbatches=MICROBATCHES, inputs=batches, seed=SEED)
    assert two.loss == pytest.approx(one.loss, rel=1e-6)
    for param, grad in one.grads.items():
        assert_close(f"grad {param}", two.grads[param], grad, 1e-5)
    # Another seed draws other masks: another loss.
    other = zb.gradients(program, microbatches=MICROBATCHES, inputs=batches,
                         seed=SEED + 1)
    assert other.loss != pytest.approx(one.loss, rel=1e-4)


class Channels(nn.Module):
    """Dropout2d (a mask per sample and channel, random op 0) after a
    convolution, then alpha dropout (op 1) before a SELU network's last
    layer."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 6, 1)
        self.channels = nn.Dropout2d(0.3)
        self.l1 = nn.Linear(24, 16)
        self.alpha = nn.AlphaDropout(0.2)
        self.l2 = nn.Linear(16, 4)

    def forward(self, x, y):
        h = self.channels(torch.relu(self.conv(x.reshape(4, 2, 2, 2))))
        h = self.alpha(F.selu(self.l1(h.flatten(1))))
        return F.cross_entropy(self.l2(h), y)


def alpha_dropout_as_drawn(op, shape, p):
    """PyTorch's alpha dropout with the rule's mask: x * a where kept,
    else -alpha * a, plus alpha * a * p."""
    alpha = 1.7580993408473766
    a = 1.0 / np.sqrt((alpha ** 2 * p + 1) * (1 - p))

    class AlphaDrawn(nn.Module):
        def forward(self, x):
            keep = torch.from_numpy(kept(Drawn.key, op, shape, p)).to(
                x.dtype)
            return x * keep * a + (1 - keep) * (-alpha * a) + alpha * a * p

    return AlphaDrawn()


@pytest.mark.parametrize("ranks", [1, 2])
def test_channel_and_alpha_dropout_train_like_torch(ranks):
    torch.manual_seed(0)
    channels = Drawn(lambda key: kept(key, 0, (4, 6), 0.3)[:, :, None, None]
                     / 0.7)
    check_training(Channels().train(),
                   {"channels": channels,
                    "alpha": alpha_dropout_as_drawn(1, (4, 16), 0.2)},
                   ranks)


class Noisy(nn.Module):
    """Noise as models draw it: input noise (randn_like), HF's drop path
    (floor of keep_prob + rand), uniform_ and normal_ into empty tensors.
    With ``drawn``, the reference's stand-ins for the draws: random ops 0-1
    (randn, two streams), 2 (rand), 3 (uniform_), 4-5 (normal_)."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(8, 16)
        self.l2 = nn.Linear(16, 16)
        self.l3 = nn.Linear(16, 4)
        self.drawn = False

    def forward(self, x, y):
        key, t = Drawn.key, x.dtype
        if self.drawn:
            noise = torch.from_numpy(normal(key, 0, (4, 8))).to(t)
            keep = torch.from_numpy(uniform(key, 2, (4, 1))).to(t)
            shift = torch.from_numpy(uniform(key, 3, (4, 16)) - 0.5).to(t)
            scale = torch.from_numpy(1.0 + 0.2 * normal(key, 4, (4, 16)))\
                .to(t)
        else:
            noise = torch.randn_like(x)
            keep = torch.rand(4, 1, dtype=t)
            shift = torch.empty(4, 16, dtype=t).uniform_(-0.5, 0.5)
            scale = torch.empty(4, 16, dtype=t).normal_(1.0, 0.2)
        h = torch.relu(self.l1(x + 0.1 * noise))
        h = h + self.l2(h) / 0.7 * (0.7 + keep).floor()
        return F.cross_entropy(self.l3(h * scale + shift), y)


@pytest.mark.parametrize("ranks", [1, 2])
def test_noise_trains_like_torch_with_the_same_draws(ranks):
    torch.manual_seed(0)
    check_training(Noisy().train(), {"drawn": True}, ranks)


def test_compiled_draws_follow_the_rule():
    """The compiled draws themselves: a loss sum(w * noise) has the noise
    as w's gradient. They equal the rule's (recomputed in NumPy) to f32
    rounding, and have the moments of their laws over 2^14 draws: rand
    uniform in [0, 1), randn, normal_ and torch.normal normal, floor(keep
    + rand) a bernoulli(keep)."""
    shape = (128, 128)

    class Draws(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(5, *shape))

        def forward(self, x):
            noise = torch.stack([
                torch.rand(shape), torch.randn(shape),
                torch.empty(shape).normal_(2.0, 0.5),
                (0.3 + torch.rand(shape)).floor(),
                torch.normal(-1.0, 3.0, shape)])
            return (self.w * noise).sum() + x.sum()

    program = zb.from_torch(Draws().train(), (torch.zeros(1),))
    got = zb.gradients(program, inputs=[(torch.zeros(1),)],
                       seed=SEED).grads["w"]
    key = rng_key(SEED, 0)
    rule = [uniform(key, 0, shape), normal(key, 1, shape),
            2.0 + 0.5 * normal(key, 3, shape), uniform(key, 5, shape) >= 0.7,
            -1.0 + 3.0 * normal(key, 6, shape)]
    for name, ours, ref in zip(["rand", "randn", "normal_", "drop path",
                                "normal"], got, rule):
        assert_close(name, ours, ref, 1e-5)
    n = got[0].size
    u, z, g, keep, f = (a.astype(np.float64) for a in got)
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 4 * np.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 4 * np.sqrt(1 / 180 / n)
    for sample, mean, std in ((z, 0.0, 1.0), (g, 2.0, 0.5), (f, -1.0, 3.0)):
        standard = (sample - mean) / std
        assert abs(standard.mean()) < 4 / np.sqrt(n)
        assert abs(standard.var() - 1.0) < 4 * np.sqrt(2.0 / n)
        # Fourth moment 3 (variance of z^4: 96).
        assert abs((standard ** 4).mean() - 3.0) < 4 * np.sqrt(96.0 / n)
    assert set(np.unique(keep)) == {0.0, 1.0}
    assert abs(keep.mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / n)


def test_compiled_integer_draws_follow_the_rule():
    """randint (low + ((draw * (high - low)) >> 24)) and randperm (the
    stable argsort of one op's draws), read back as the weights of a loss
    on a parameter (its gradient): equal to the rule's, each randint value
    about equally often, randperm a permutation."""
    class Indices(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(3, 4096))

        def forward(self, x):
            picks = torch.stack([
                torch.randint(3, 11, (4096,)).float(),
                torch.randint_like(x, 5).repeat(4096).float(),
                torch.cat([torch.randperm(64), torch.zeros(4032,
                                                           dtype=torch.long)])
                .float()])
            return (self.w * picks).sum() + x.sum()

    program = zb.from_torch(Indices().train(), (torch.zeros(1),))
    got = zb.gradients(program, inputs=[(torch.zeros(1),)],
                       seed=SEED).grads["w"]
    key = rng_key(SEED, 0)
    span = (draws(key, 0, (4096,)) * np.uint64(8)) >> np.uint64(24)
    assert np.array_equal(got[0], 3 + span.astype(np.float64))
    assert np.array_equal(got[1], np.repeat(
        ((draws(key, 1, (1,)) * np.uint64(5)) >> np.uint64(24))
        .astype(np.float64), 4096))
    perm = np.argsort(draws(key, 2, (64,)), kind="stable")
    assert np.array_equal(got[2][:64], perm.astype(np.float64))
    assert sorted(got[2][:64]) == list(range(64))
    counts = np.bincount(got[0].astype(np.int64), minlength=11)[3:]
    assert counts.sum() == 4096
    assert np.all(np.abs(counts - 512) < 4 * np.sqrt(512 * 7 / 8))


class MaskedAutoencoder(nn.Module):
    """ViTMAE's pretraining loss; with ``noise`` set, the reference's: the
    model given the noise its random masking would draw (torch.rand of
    (batch, patches), then argsort)."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.drawn = False

    def forward(self, pixels):
        noise = None
        if self.drawn:
            noise = torch.from_numpy(uniform(Drawn.key, 0, (2, 16))).to(
                pixels.dtype)
        return self.model(pixel_values=pixels, noise=noise).loss


def test_masked_autoencoder_masks_what_torch_masks_with_the_same_noise():
    """Hugging Face ViTMAE keeps a random quarter of the patches (argsort of
    torch.rand noise, gathers by the order and its inverse): pipelined on
    two ranks (ZB-V) its loss and gradients equal PyTorch's given the
    noise of the documented rule."""
    transformers = require("transformers")
    from real_models import _images, assert_grads_close

    torch.manual_seed(0)
    config = transformers.ViTMAEConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, decoder_hidden_size=16,
        decoder_num_hidden_layers=1, decoder_num_attention_heads=2,
        decoder_intermediate_size=32)
    model = MaskedAutoencoder(
        transformers.ViTMAEForPreTraining(config)).train()
    batches = [(x,) for x, _ in _images(MICROBATCHES, (2, 3, 32, 32))]
    program = zb.from_torch(model, batches[0])
    result = zb.gradients(program, ranks=2, schedule="zb-v",
                          microbatches=MICROBATCHES, inputs=batches,
                          seed=SEED)
    model.drawn = True
    grads, loss = {}, 0.0
    model.zero_grad()
    for mb, batch in enumerate(batches):
        Drawn.key = rng_key(SEED, mb)
        part = model(*batch) / MICROBATCHES
        part.backward()
        loss += float(part.detach())
    assert result.loss == pytest.approx(loss, rel=1e-5)
    # The fixed sin-cos position embeddings are frozen: constants.
    assert_grads_close("ViTMAE", result.grads, {
        n: p.grad.detach().numpy() for n, p in model.named_parameters()
        if p.requires_grad and p.grad is not None}, 1e-4)
