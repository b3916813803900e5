"""Time-dependent baselines (FNO with time as channels, F-FNO, Dil-ResNet): parameter counts by formula,
shapes, resolution invariance, translation equivariance, input errors, and learning a tiny advection problem."""

from __future__ import annotations

import math

import pytest
import torch

from opformer.errors import ConfigError, DataError
from opformer.models import build_model, preset
from opformer.models.dil_resnet import DILATIONS, DilResNet
from opformer.models.ffno import FFNO
from opformer.models.fno_time import FNOTime


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _linear(i: int, o: int) -> int:
    return i * o + o


def _fno_time_params(ndim, t_in, t_out, c, width, modes, n_layers, proj) -> int:
    lift = _linear(t_in * c + ndim, width)
    # SpectralConv: 2^(ndim-1) corner blocks of complex (width, width, modes^ndim) + point-wise Linear
    layer = 2 ** (ndim - 1) * width * width * modes**ndim * 2 + _linear(width, width)
    return lift + n_layers * layer + _linear(width, proj) + _linear(proj, t_out * c)


def _ffno_params(ndim, t_in, t_out, c, width, modes, n_layers, ffn, proj, shared=False) -> int:
    lift = _linear(t_in * c + ndim, width)
    spectral = ndim * width * width * modes * 2  # one complex (width, width, modes) per axis
    ffn_params = _linear(width, ffn) + _linear(ffn, width)
    spectral_total = spectral if shared else n_layers * spectral
    return lift + spectral_total + n_layers * ffn_params + _linear(width, proj) + _linear(proj, t_out * c)


def _dil_resnet_params(ndim, t_in, t_out, c, width, n_blocks) -> int:
    kernel = 3**ndim
    encoder = t_in * c * width * kernel + width
    block = 7 * (width * width * kernel + width + 2 * width)  # 7 convs, each with a GroupNorm (weight, bias)
    decoder = width * t_out * c * kernel + t_out * c
    return encoder + n_blocks * block + decoder


def test_parameter_counts_by_formula():
    assert _count(FNOTime(2, t_in=3, t_out=2, in_channels=2, width=8, modes=4, n_layers=3, projection_width=16)) == (
        _fno_time_params(2, 3, 2, 2, 8, 4, 3, 16)
    )
    assert _count(FNOTime(3, t_in=2, t_out=1, in_channels=3, width=6, modes=3, n_layers=2, projection_width=8)) == (
        _fno_time_params(3, 2, 1, 3, 6, 3, 2, 8)
    )
    assert _count(FFNO(2, t_in=3, t_out=2, in_channels=2, width=8, modes=5, n_layers=3, projection_width=16)) == (
        _ffno_params(2, 3, 2, 2, 8, 5, 3, 32, 16)
    )
    ffno3 = FFNO(3, t_in=2, in_channels=3, width=8, modes=4, n_layers=3, ffn_width=12, share_weights=True)
    assert _count(ffno3) == _ffno_params(3, 2, 1, 3, 8, 4, 3, 12, 128, shared=True)
    assert ffno3.layers[0].spectral is ffno3.layers[2].spectral
    assert _count(DilResNet(2, t_in=3, t_out=2, in_channels=2, width=16, n_blocks=2, norm_groups=4)) == (
        _dil_resnet_params(2, 3, 2, 2, 16, 2)
    )
    assert _count(DilResNet(3, t_in=2, in_channels=3, width=8, n_blocks=1, norm_groups=2)) == (
        _dil_resnet_params(3, 2, 1, 3, 8, 1)
    )


@pytest.mark.parametrize(
    ("name", "count"),
    [("fno2d_time_ns", _fno_time_params(2, 10, 1, 1, 20, 12, 4, 128)),
     ("ffno2d_ns", _ffno_params(2, 10, 1, 1, 64, 16, 8, 256, 128)),
     ("ffno2d_kolmogorov", _ffno_params(2, 4, 4, 1, 48, 16, 8, 192, 128)),
     ("dil_resnet2d_ns", _dil_resnet_params(2, 10, 1, 1, 128, 4)),
     ("fno3d_time_velocity", _fno_time_params(3, 4, 2, 3, 20, 8, 4, 128)),
     ("ffno3d_velocity", _ffno_params(3, 4, 2, 3, 32, 8, 8, 128, 128)),
     ("dil_resnet3d_velocity", _dil_resnet_params(3, 4, 2, 3, 128, 4))],
)
def test_preset_parameter_counts(name, count):
    assert _count(build_model(preset(name))) == count


def test_ffno_layer_is_improved_residual():
    torch.manual_seed(0)
    model = FFNO(2, t_in=2, width=8, modes=3, n_layers=2, projection_width=8).double()
    layer = model.layers[0]
    h = torch.randn(2, 6, 5, 8, dtype=torch.float64)
    expected = h + layer.ffn.linear2(layer.ffn.activation(layer.ffn.linear1(layer.spectral(h))))
    torch.testing.assert_close(layer(h), expected)


SMALL = {
    "fno2d_time": {"width": 8, "modes": 4, "n_layers": 2, "projection_width": 16},
    "fno3d_time": {"width": 6, "modes": 3, "n_layers": 2, "projection_width": 8},
    "ffno2d": {"width": 8, "modes": 4, "n_layers": 2, "projection_width": 16},
    "ffno3d": {"width": 8, "modes": 3, "n_layers": 2, "projection_width": 8},
    "dil_resnet2d": {"width": 8, "n_blocks": 1, "norm_groups": 2},
    "dil_resnet3d": {"width": 8, "n_blocks": 1, "norm_groups": 2},
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_shapes_and_input_errors(name):
    model = build_model({"name": name, "t_in": 3, "t_out": 2, "in_channels": 2, **SMALL[name]})
    spatial = (10, 12) if model.ndim == 2 else (8, 9, 10)
    assert model(torch.randn(2, *spatial, 3, 2)).shape == (2, *spatial, 2, 2)
    with pytest.raises(DataError, match=r"^model built for t_in=3, got 5 input frames$"):
        model(torch.randn(2, *spatial, 5, 2))
    with pytest.raises(DataError, match=r"^model built for in_channels=2, got 1 channels$"):
        model(torch.randn(2, *spatial, 3, 1))
    with pytest.raises(DataError, match=rf"expects \(batch, {model.ndim} spatial axes, time, channels\)"):
        model(torch.randn(2, *spatial, 2))
    two_out = build_model({"name": name, "t_in": 3, "t_out": 2, "in_channels": 2, "out_channels": 1, **SMALL[name]})
    assert two_out(torch.randn(1, *spatial, 3, 2)).shape == (1, *spatial, 2, 1)


def test_bad_constructor_values():
    with pytest.raises(ConfigError, match="t_in, t_out"):
        FFNO(2, t_in=0)
    with pytest.raises(ConfigError, match="multiple of norm_groups"):
        DilResNet(2, width=12, norm_groups=8)


def _band_limited(n: int, coeffs: torch.Tensor) -> torch.Tensor:
    """sum_{k,l} Re(c_kl e^{2 pi i (k x + l y)}) at x, y = i/n; ``coeffs`` complex (batch, K, K, t, c)."""
    s = torch.arange(n, dtype=torch.float64) / n
    k = torch.arange(coeffs.shape[1], dtype=torch.float64)
    e = torch.exp(2j * math.pi * torch.outer(s, k))
    return torch.einsum("xk,yl,bkltc->bxytc", e, e, coeffs).real


@pytest.mark.parametrize("name", ["fno2d_time", "ffno2d"])
def test_resolution_invariance_on_band_limited_input(name):
    """Roughly invariant: the point-wise nonlinearities and the coordinate channel (a sawtooth) are not
    band-limited, so sub-sampling the 64-grid output differs a little from the 32-grid output."""
    torch.manual_seed(0)
    model = build_model({"name": name, "t_in": 2, "t_out": 1, **SMALL[name]}).double()
    coeffs = torch.randn(2, 3, 3, 2, 1, dtype=torch.complex128)
    coarse, fine = model(_band_limited(32, coeffs)), model(_band_limited(64, coeffs))
    assert torch.linalg.norm(fine[:, ::2, ::2] - coarse) / torch.linalg.norm(coarse) < 5e-3
    dil = build_model({"name": "dil_resnet2d", "t_in": 2, "t_out": 1, **SMALL["dil_resnet2d"]}).double()
    coarse, fine = dil(_band_limited(32, coeffs)), dil(_band_limited(64, coeffs))
    assert torch.linalg.norm(fine[:, ::2, ::2] - coarse) / torch.linalg.norm(coarse) > 0.2  # a CNN is not


@pytest.mark.parametrize("name", ["dil_resnet2d", "dil_resnet3d"])
def test_dil_resnet_circular_padding_is_translation_equivariant(name):
    torch.manual_seed(0)
    model = build_model({"name": name, "t_in": 2, "t_out": 2, **SMALL[name]}).double()
    spatial = (12, 10) if model.ndim == 2 else (9, 8, 10)
    x = torch.randn(2, *spatial, 2, 1, dtype=torch.float64)
    shifts, dims = (3, 7, 2)[: model.ndim], tuple(range(1, model.ndim + 1))
    torch.testing.assert_close(model(x.roll(shifts, dims)), model(x).roll(shifts, dims), rtol=1e-12, atol=1e-12)
    zero_padded = build_model({"name": name, "t_in": 2, "t_out": 2, "periodic": False, **SMALL[name]}).double()
    assert not torch.allclose(zero_padded(x.roll(shifts, dims)), zero_padded(x).roll(shifts, dims))


def _advection_heat_windows(n_samples: int, n: int, t_in: int, t_out: int, seed: int) -> tuple:
    """Exact frames of u_t + u_x = nu lap u on the periodic unit square, a random band-limited u0 (|k| <= 2);
    the time step moves the field by one grid cell, nu damps mode k by exp(-0.02 |k|^2) per step."""
    gen = torch.Generator().manual_seed(seed)
    k = torch.fft.fftfreq(n, 1 / n)
    kx, ky = torch.meshgrid(k, k, indexing="ij")
    mask = (kx.abs() <= 2) & (ky.abs() <= 2)
    u0_hat = torch.randn(n_samples, n, n, generator=gen, dtype=torch.complex64) * mask
    step = torch.exp(-2j * math.pi * kx / n - 0.02 * (kx**2 + ky**2))
    frames = [torch.fft.ifft2(u0_hat * step**t).real for t in range(t_in + t_out)]
    u = torch.stack(frames, dim=-1)[..., None] * n * n / 5  # (batch, n, n, time, 1), values of order one
    return u[..., :t_in, :], u[..., t_in:, :]


def _relative_l2(pred: torch.Tensor, target: torch.Tensor) -> float:
    return (torch.linalg.norm(pred - target) / torch.linalg.norm(target)).item()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "sizes", "bound"),
    [("fno2d_time", {"width": 16, "modes": 4, "n_layers": 2, "projection_width": 32}, 0.2),
     ("ffno2d", {"width": 16, "modes": 4, "n_layers": 2, "projection_width": 32}, 0.2),
     ("dil_resnet2d", {"width": 16, "n_blocks": 1, "norm_groups": 4}, 0.2)],
)
def test_learns_tiny_advection_heat_problem(name, sizes, bound):
    torch.manual_seed(0)
    x_train, y_train = _advection_heat_windows(32, 16, 2, 2, seed=1)
    x_test, y_test = _advection_heat_windows(8, 16, 2, 2, seed=2)
    model = build_model({"name": name, "t_in": 2, "t_out": 2, **sizes})
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    with torch.no_grad():
        initial = _relative_l2(model(x_test), y_test)
    for _ in range(100):
        optimiser.zero_grad()
        loss = torch.linalg.norm(model(x_train) - y_train) / torch.linalg.norm(y_train)
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        final = _relative_l2(model(x_test), y_test)
    assert initial > 0.8 and final < bound


def test_dil_resnet_pads_each_axis_by_its_kind():
    """Per axis: circular along the periodic one, zeros along the closed one (exactly, at every dilation)."""
    torch.manual_seed(0)
    mixed = build_model({"name": "dil_resnet2d", "t_in": 2, "periodic": [True, False], **SMALL["dil_resnet2d"]})
    mixed = mixed.double()
    uniform = {kind: build_model({"name": "dil_resnet2d", "t_in": 2, "periodic": kind, **SMALL["dil_resnet2d"]})
               for kind in (True, False)}
    for model in uniform.values():
        model.double().load_state_dict(mixed.state_dict())  # the same parameters whatever the padding
        assert type(model.encoder) is torch.nn.Conv2d
    assert {model.encoder.padding_mode for model in uniform.values()} == {"circular", "zeros"}
    conv = 3 * DILATIONS.index(8)  # the dilation-8 convolution of the first block
    x = torch.randn(2, 8, 20, 24, dtype=torch.float64)
    quiet_closed, quiet_periodic = x.clone(), x.clone()
    quiet_closed[..., :8], quiet_closed[..., -8:] = 0, 0  # zero near the ends of the closed axis
    quiet_periodic[:, :, :8], quiet_periodic[:, :, -8:] = 0, 0  # and of the periodic one
    layer = {name: model.blocks[0].stack[conv] for name, model in (("mixed", mixed), *uniform.items())}
    torch.testing.assert_close(layer["mixed"](quiet_closed), layer[True](quiet_closed), rtol=0, atol=1e-14)
    torch.testing.assert_close(layer["mixed"](quiet_periodic), layer[False](quiet_periodic), rtol=0, atol=1e-14)
    assert not torch.allclose(layer["mixed"](x), layer[True](x))
    assert not torch.allclose(layer["mixed"](x), layer[False](x))
    # the whole model: translation equivariant along the periodic axis only
    u = torch.randn(2, 12, 10, 2, 1, dtype=torch.float64)
    torch.testing.assert_close(mixed(u.roll(5, 1)), mixed(u).roll(5, 1), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(mixed(u.roll(5, 2)), mixed(u).roll(5, 2))
    assert mixed(torch.randn(1, 12, 4, 2, 1, dtype=torch.float64)).shape == (1, 12, 4, 1, 1)  # a short closed axis
    with pytest.raises(DataError, match=r"needs >= 8 points per periodic axis, got \(4, 12\)"):
        mixed(torch.randn(1, 4, 12, 2, 1, dtype=torch.float64))


def test_dil_resnet3d_mixed_axes():
    torch.manual_seed(0)
    model = build_model({"name": "dil_resnet3d", "t_in": 2, "periodic": [False, True, True],
                         **SMALL["dil_resnet3d"]}).double()
    u = torch.randn(1, 6, 8, 9, 2, 1, dtype=torch.float64)
    torch.testing.assert_close(model(u.roll((3, 4), (2, 3))), model(u).roll((3, 4), (2, 3)), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(model(u.roll(2, 1)), model(u).roll(2, 1))
