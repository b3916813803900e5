"""Decoders: exact output of a hand-set point-wise regressor, parameter counts, resolution invariance."""

from __future__ import annotations

import math

import pytest
import torch

from opformer.nn.regressors import PointwiseRegressor, SpectralRegressor


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_pointwise_regressor_exact_output():
    model = PointwiseRegressor(2, 1, width=2, n_layers=2, activation="relu").eval()
    first, second, last = (m for m in model.net if isinstance(m, torch.nn.Linear))
    with torch.no_grad():
        first.weight.copy_(torch.tensor([[1.0, -1.0], [2.0, 0.0]]))
        first.bias.copy_(torch.tensor([0.0, -1.0]))
        second.weight.copy_(torch.tensor([[1.0, 1.0], [0.0, -1.0]]))
        second.bias.copy_(torch.tensor([0.5, 0.0]))
        last.weight.copy_(torch.tensor([[3.0, 1.0]]))
        last.bias.copy_(torch.tensor([-1.0]))
    x = torch.tensor([[[1.0, 2.0], [3.0, 1.0]]])  # (batch 1, 2 points, 2 channels)
    # point 1: relu([-1, 1]) = [0, 1] -> relu([1.5, -1]) = [1.5, 0] -> 3 * 1.5 - 1 = 3.5
    # point 2: relu([2, 5]) = [2, 5] -> relu([7.5, -5]) = [7.5, 0] -> 3 * 7.5 - 1 = 21.5
    torch.testing.assert_close(model(x), torch.tensor([[[3.5], [21.5]]]))


def test_pointwise_regressor_dropout_acts_in_training_only():
    model = PointwiseRegressor(3, 2, width=16, n_layers=3, dropout=0.5)
    x = torch.randn(4, 5, 3)
    torch.testing.assert_close(model.eval()(x), model(x))
    torch.manual_seed(0)
    assert not torch.allclose(model.train()(x), model.eval()(x))


@pytest.mark.parametrize(("ndim", "n_layers"), [(1, 2), (2, 1)])
def test_parameter_counts(ndim, n_layers):
    c_in, c_out, width, modes, head = 5, 2, 6, 3, 7

    def fourier(i: int, o: int) -> int:  # 2^(ndim-1) complex corner blocks (two reals each) + Linear(i, o)
        return 2 ** (ndim - 1) * i * o * modes**ndim * 2 + i * o + o

    spectral = SpectralRegressor(c_in, c_out, width=width, modes=modes, n_layers=n_layers, head_width=head, ndim=ndim)
    expected = fourier(c_in, width) + (n_layers - 1) * fourier(width, width) + width * head + head + head * c_out + c_out
    assert _count(spectral) == expected
    assert _count(PointwiseRegressor(c_in, c_out, width, n_layers=3)) == (
        c_in * width + width + 2 * (width * width + width) + width * c_out + c_out)


def test_burgers_decoder_count():
    # the Galerkin Transformer's Burgers decoder: 96 -> 48 -> 48, 16 modes, head 48 (docs/models.md)
    assert _count(SpectralRegressor(96, 1, width=48, modes=16, n_layers=2, head_width=48)) == 230_593


@pytest.mark.parametrize("ndim", [1, 2])
def test_spectral_regressor_is_resolution_invariant_for_band_limited_inputs(ndim):
    # one Fourier layer: its spectral part maps a band-limited field to a band-limited field at any grid size, and
    # the activation and head act point-wise, so the coarse grid's output is the fine output at the shared points
    torch.manual_seed(0)
    model = SpectralRegressor(2, 3, width=4, modes=3, n_layers=1, head_width=5, ndim=ndim).double().eval()

    def field(n: int) -> torch.Tensor:
        x = torch.arange(n, dtype=torch.float64) / n
        axes = torch.meshgrid(*[x] * ndim, indexing="ij")
        s = sum(torch.sin(2 * math.pi * (k + 1) * a) + torch.cos(2 * math.pi * k * a) for k, a in enumerate(axes))
        return torch.stack([s, s * 0.5 + 1.0], dim=-1).unsqueeze(0)

    coarse, fine = model(field(12)), model(field(24))
    torch.testing.assert_close(coarse, fine[(slice(None), *[slice(None, None, 2)] * ndim)])
