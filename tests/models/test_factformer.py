"""FactFormer models: parameter counts (formula and presets), shapes, the authors' lift, the closed-domain CNN
(``cnn_layers``) and ``padding``, latent marching, the full-grid linear-attention variant, input errors, and learning
a tiny advection problem."""

from __future__ import annotations

import math

import pytest
import torch

from opformer.errors import ConfigError, DataError
from opformer.models import build_model, preset
from opformer.models.factformer import ChannelwiseLift, ClosedDomainCNN, FactFormer2dSteady, FactFormerTime
from opformer.nn.oformer_attention import OFormerAttention


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _linear(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def _layer_params(ndim: int, d: int, heads: int, head_dim: int, km: int, latent: int, linear: bool = False) -> int:
    """One encoder layer: positional Linear + block (LN, V, the shared to_in, per axis projection + kernel, output
    network, no biases); with ``linear`` the block's attention is Q, K, V over the full grid."""
    projection = d * d + 2 * d + _linear(d, 2 * d) + _linear(d, latent)  # gamma, LN, GEGLU MLP
    kernel = 2 * _linear(latent, heads * head_dim * km, bias=False)  # q and k
    attention = 3 * _linear(d, heads * head_dim, bias=False) if linear else (
        _linear(d, heads * head_dim, bias=False) + d * d + ndim * (projection + kernel))
    block = 2 * d + attention + heads * head_dim * d + d * d
    return _linear(d, d) + block


def _cnn_params(ndim: int, d: int, layers: int) -> int:
    """The closed-domain U: stride-2 conv d -> d/2 and layers - 1 more, layers - 1 convs d/2 -> d/2 and one to d."""
    k, h = 3 ** ndim, d // 2
    return (d * h * k + h) + 2 * (layers - 1) * (h * h * k + h) + (h * d * k + d)


def _time_params(ndim, t_in, t_out, c, d, heads, head_dim, km, layers, latent, linear=False, channelwise=False,
                 cnn=0) -> int:
    lift = (d // 2) * 2 + t_in * (d // 2) * d if channelwise else _linear(t_in * c, d)
    marcher = t_out * latent + 2 * latent + _linear(latent, d) + _linear(d, latent)
    decoder = 2 * latent + latent * d // 8 + d * (d // 2) + _linear(d // 2, c)
    width = 2 * d if cnn else d
    return (lift + layers * _layer_params(ndim, d, heads, head_dim, km, d, linear)
            + (_cnn_params(ndim, d, cnn) if cnn else 0) + width * latent + marcher + decoder)


def _steady_params(c, d, heads, head_dim, km, layers, cnn_layers) -> int:
    width = 2 * d if cnn_layers else d
    decoder = 2 * width + width * d + _linear(d, c)
    cnn = _cnn_params(2, d, cnn_layers) if cnn_layers else 0
    return _linear(c, d) + layers * _layer_params(2, d, heads, head_dim, km, d) + cnn + decoder


def test_parameter_counts_by_formula():
    two = FactFormerTime(2, t_in=3, t_out=2, in_channels=2, d_model=16, n_head=2, head_dim=4, kernel_multiplier=3,
                         n_layers=2, latent_dim=24, decoder_groups=8)
    assert _count(two) == _time_params(2, 3, 2, 2, 16, 2, 4, 3, 2, 24)
    three = FactFormerTime(3, t_in=2, t_out=3, in_channels=4, d_model=16, n_head=3, head_dim=2, n_layers=1,
                           kernel_multiplier=3, latent_dim=16, decoder_groups=8, lift="channelwise", cnn_layers=3)
    assert _count(three) == _time_params(3, 2, 3, 4, 16, 3, 2, 3, 1, 16, channelwise=True, cnn=3)
    assert _count(FactFormer2dSteady(d_model=16, n_head=2, head_dim=4, n_layers=2, cnn_layers=1)) == (
        _steady_params(1, 16, 2, 4, 2, 2, 1)
    )
    assert _count(FactFormer2dSteady(d_model=16, n_head=2, head_dim=4, n_layers=2, cnn_layers=0)) == (
        _steady_params(1, 16, 2, 4, 2, 2, 0)
    )


# exact counts of opformer's presets, equal to the authors' code's trainable parameters at their configs
# (tests/imports/test_factformer_import.py proves the layouts equal); the paper's figures in the comments
@pytest.mark.parametrize(
    ("name", "count", "formula"),
    [("factformer_kolmogorov", 3_463_489, _time_params(2, 10, 4, 1, 128, 8, 64, 2, 4, 256)),  # paper 3.46M
     ("factformer_darcy", 3_749_953, _steady_params(1, 128, 12, 64, 2, 3, 2)),  # paper 3.75M
     ("factformer_turbulence3d", 5_093_188,
      _time_params(3, 10, 2, 4, 128, 6, 64, 3, 4, 192, channelwise=True)),  # paper 5.09M
     ("factformer_smoke3d", 4_501_764,
      _time_params(3, 4, 4, 4, 128, 6, 64, 3, 3, 192, channelwise=True, cnn=2)),  # paper (Table 3) 4.50M
     ("linear_kolmogorov", 1_295_681, _time_params(2, 10, 4, 1, 128, 8, 64, 1, 4, 256, linear=True))],
)
def test_preset_parameter_counts(name, count, formula):
    model = build_model(preset(name))
    assert _count(model) == count
    assert formula is None or formula == count


@pytest.mark.slow
def test_linear_variant_swaps_only_the_attention():
    model = build_model(preset("linear_kolmogorov"))
    factorized = build_model(preset("factformer_kolmogorov"))
    mixers = [block.mixer for block in model.encoder.blocks]
    assert len(mixers) == 4 and all(isinstance(m, OFormerAttention) for m in mixers)
    assert all((m.n_head, m.head_dim) == (8, 64) for m in mixers)  # the factorised model's heads
    rest = {k: v.shape for k, v in model.state_dict().items() if ".mixer." not in k}
    assert rest == {k: v.shape for k, v in factorized.state_dict().items() if ".mixer." not in k}
    assert model(torch.randn(1, 12, 10, 10, 1)).shape == (1, 12, 10, 4, 1)


TINY = {"d_model": 16, "n_head": 2, "head_dim": 4, "n_layers": 1}


@pytest.mark.slow
@pytest.mark.parametrize("attention", ["factorized", "linear"])
def test_time_model_shapes_and_errors(attention):
    tiny = {**TINY, "head_dim": 12}  # RoPE of the linear attention: 2 (3) axis groups of even width
    two = build_model({"name": "factformer2d", "t_in": 3, "t_out": 2, "in_channels": 2, "latent_dim": 16,
                       "attention": attention, **tiny})
    assert two(torch.randn(2, 12, 10, 3, 2)).shape == (2, 12, 10, 2, 2)
    three = build_model({"name": "factformer3d", "t_in": 2, "t_out": 3, "in_channels": 4, "out_channels": 1,
                         "latent_dim": 16, "attention": attention, **tiny})
    assert three(torch.randn(1, 6, 5, 4, 2, 4)).shape == (1, 6, 5, 4, 3, 1)
    with pytest.raises(DataError, match=r"^model built for t_in=3, got 5 input frames$"):
        two(torch.randn(2, 12, 10, 5, 2))
    with pytest.raises(DataError, match=r"expects \(batch, 2 spatial axes, time, channels\)"):
        two(torch.randn(2, 12, 10, 2))
    with pytest.raises(DataError, match=r"^model built for t_in=2, got 3 input frames$"):
        three(torch.randn(1, 6, 5, 4, 3, 4))


def test_channelwise_lift_is_a_per_channel_affine_map_then_one_linear_over_frames():
    torch.manual_seed(0)
    lift = ChannelwiseLift(t_in=3, in_channels=2, d_model=8).double()  # 4 features: 2 per channel
    x = torch.randn(5, 3, 2, dtype=torch.float64)
    h = torch.nn.functional.gelu(x[..., [0, 0, 1, 1]] * lift.weight + lift.bias)  # (5, t, 4)
    w = lift.mix.weight.reshape(8, 4, 3)  # (out, feature, frame): their (t_in, 1) convolution's layout
    torch.testing.assert_close(lift(x), torch.einsum("ntf,oft->no", h, w))


def test_steady_model_shapes_and_zero_padded_cnn():
    model = build_model({"name": "factformer2d_steady", **TINY})
    assert model(torch.randn(2, 11, 13, 1)).shape == (2, 11, 13, 1)
    convs = [m for m in model.cnn.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.kernel_size, c.stride, c.padding) for c in convs] == [((3, 3), (2, 2), (1, 1))] + [
        ((3, 3), (1, 1), (1, 1))] * 3
    assert all(c.padding_mode == "zeros" for c in convs)
    assert model.decoder_norm.num_channels == 32  # the CNN's 16 features before the encoder's 16
    with pytest.raises(DataError, match="expected \\(batch, n_1, n_2, channels\\)"):
        model(torch.randn(2, 11, 13))


def test_closed_domain_cnn_on_3d_shapes_and_zero_padding():
    """The U returns the input's grid (odd sizes too). Zero padding: on a constant field (instance norm left out)
    the same weights with circular padding give a constant (a torus has no walls); with the model's zero padding the
    centre of the box, out of the walls' reach, gets that constant and the corner does not."""
    import copy

    torch.manual_seed(0)
    cnn = ClosedDomainCNN(3, 8, 2).double()
    assert cnn(torch.randn(2, 7, 5, 3, 8, dtype=torch.float64)).shape == (2, 7, 5, 3, 8)
    convs = [m for m in cnn.modules() if isinstance(m, torch.nn.Conv3d)]
    assert [(c.kernel_size, c.stride, c.padding_mode) for c in convs] == [((3, 3, 3), (2, 2, 2), "zeros")] + [
        ((3, 3, 3), (1, 1, 1), "zeros")] * 3
    cnn.down[0] = torch.nn.Identity()
    torus = copy.deepcopy(cnn)
    for conv in torus.modules():
        if isinstance(conv, torch.nn.Conv3d):
            conv.padding_mode = "circular"
    u = torch.full((1, 16, 16, 16, 8), 0.7, dtype=torch.float64)
    with torch.no_grad():
        walls, periodic = cnn(u), torus(u)
    torch.testing.assert_close(periodic, periodic[:, :1, :1, :1].expand_as(periodic))
    torch.testing.assert_close(walls[:, 8, 8, 8], periodic[:, 8, 8, 8])
    assert (walls[:, 0, 0, 0] - periodic[:, 0, 0, 0]).abs().min() > 1e-3


def test_cnn_layers_and_padding_on_the_time_models():
    torch.manual_seed(0)
    base = {"name": "factformer3d", "t_in": 2, "t_out": 2, "in_channels": 4, "latent_dim": 16, "periodic": False,
            **TINY}
    plain, cnn = build_model(base), build_model({**base, "cnn_layers": 2, "padding": 2})
    assert plain.cnn is None and isinstance(cnn.cnn, ClosedDomainCNN) and cnn.expand.in_features == 32
    assert _count(cnn) - _count(plain) == _cnn_params(3, 16, 2) + 16 * 16  # the U, and expand takes 2d
    x = torch.randn(1, 6, 4, 5, 2, 4)
    assert cnn(x).shape == (1, 6, 4, 5, 2, 4)
    # padding: the encoder sees 2 zero cells past the end of each axis, at the grid's spacing, then is cropped
    seen = []
    handle = cnn.encoder.blocks[0].register_forward_pre_hook(lambda module, args: seen.append(args))
    cnn(x)
    handle.remove()
    u, axes = seen[0]
    assert u.shape[1:4] == (8, 6, 7)
    torch.testing.assert_close(axes[0], torch.tensor([0, 0.2, 0.4, 0.6, 0.8, 1, 1.2, 1.4]))
    two = build_model({"name": "factformer2d", "t_in": 2, "t_out": 2, "latent_dim": 16, "cnn_layers": 1,
                       "padding": 1, **TINY})
    assert two(torch.randn(2, 7, 6, 2, 1)).shape == (2, 7, 6, 2, 1)


def test_bad_constructor_values():
    with pytest.raises(ConfigError, match="attention: unknown value 'softmax'"):
        FactFormerTime(2, attention="softmax", **TINY)
    with pytest.raises(ConfigError, match="multiple of decoder_groups"):
        FactFormerTime(2, latent_dim=20, **TINY)
    with pytest.raises(ConfigError, match=r"d_model / 2 \(8\) must be a multiple of in_channels \(3\)"):
        FactFormerTime(3, in_channels=3, lift="channelwise", **TINY)
    with pytest.raises(ConfigError, match="model.cnn_layers: expected an integer >= 0, got -1"):
        build_model({"name": "factformer3d", "cnn_layers": -1, **TINY})
    with pytest.raises(ConfigError, match="t_in, t_out"):
        FactFormerTime(3, t_out=0, **TINY)
    with pytest.raises(ConfigError, match="must be >= 1"):
        FactFormer2dSteady(d_model=16, n_head=0)


def test_latent_marching_steps_share_the_decoder():
    """A model marching 4 steps and one marching 2 with the same weights agree on the first 2 frames; each step
    is a new latent state (frames differ), and the step embeddings are learned parameters."""
    torch.manual_seed(0)
    four = FactFormerTime(2, t_in=2, t_out=4, latent_dim=16, **TINY).eval()
    two = FactFormerTime(2, t_in=2, t_out=2, latent_dim=16, **TINY).eval()
    state = four.state_dict()
    state["marcher.step_embedding"] = state["marcher.step_embedding"][:2]
    two.load_state_dict(state)
    x = torch.randn(2, 8, 8, 2, 1)
    with torch.no_grad():
        y4, y2 = four(x), two(x)
    torch.testing.assert_close(y4[..., :2, :], y2)
    assert not torch.allclose(y4[..., 2, :], y4[..., 3, :])
    assert four.marcher.step_embedding.requires_grad and four.marcher.step_embedding.shape == (4, 16)


def _advection_windows(n_samples: int, n: int, t_in: int, t_out: int, seed: int) -> tuple:
    """Band-limited fields moved by one grid cell per frame on the periodic unit square."""
    gen = torch.Generator().manual_seed(seed)
    k = torch.fft.fftfreq(n, 1 / n)
    kx, ky = torch.meshgrid(k, k, indexing="ij")
    u0_hat = torch.randn(n_samples, n, n, generator=gen, dtype=torch.complex64) * ((kx.abs() <= 2) & (ky.abs() <= 2))
    shift = torch.exp(-2j * math.pi * kx / n)
    u = torch.stack([torch.fft.ifft2(u0_hat * shift**t).real for t in range(t_in + t_out)], dim=-1)
    u = u[..., None] * n * n / 5
    return u[..., :t_in, :], u[..., t_in:, :]


@pytest.mark.slow
def test_learns_tiny_advection_problem():
    torch.manual_seed(0)
    x_train, y_train = _advection_windows(16, 16, 2, 2, seed=1)
    x_test, y_test = _advection_windows(8, 16, 2, 2, seed=2)
    model = FactFormerTime(2, t_in=2, t_out=2, d_model=16, n_head=2, head_dim=8, n_layers=2, latent_dim=32,
                           fourier_scale=1.0)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)

    def error(x, y):
        return torch.linalg.norm(model(x) - y) / torch.linalg.norm(y)

    with torch.no_grad():
        initial = error(x_test, y_test).item()
    for _ in range(60):
        optimiser.zero_grad()
        error(x_train, y_train).backward()
        optimiser.step()
    with torch.no_grad():
        final = error(x_test, y_test).item()
    assert initial > 0.9 and final < initial / 4  # the test error drops by a factor of at least 4 (about 7)
