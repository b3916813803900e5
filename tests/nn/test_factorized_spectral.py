"""Factorised spectral convolution (F-FNO): per-axis transform against an explicit DFT; sum over axes."""

from __future__ import annotations

import math

import pytest
import torch

from opformer.errors import ConfigError
from opformer.nn.factorized_spectral import AxisSpectralConv, FactorizedSpectralConv


def _dft_reference(x: torch.Tensor, weight: torch.Tensor, axis: int) -> torch.Tensor:
    """Explicit sums: X_k = sum_j x_j e^{-2 pi i jk/n} / sqrt(n), Y_k = X_k W_k for k < modes (< n/2),
    y_j = (Re Y_0 + 2 Re sum_{k>=1} Y_k e^{2 pi i jk/n}) / sqrt(n); ``weight`` complex ``(in, out, modes)``."""
    xm = x.movedim(axis + 1, -2).to(torch.complex128)  # (..., n, in)
    n, modes = xm.shape[-2], weight.shape[-1]
    j = torch.arange(n, dtype=torch.float64)
    out = torch.zeros(*xm.shape[:-1], weight.shape[1], dtype=torch.float64)
    for k in range(modes):
        phase = torch.exp(-2j * math.pi * j * k / n)
        x_k = torch.einsum("...ji,j->...i", xm, phase) / math.sqrt(n)
        y_k = torch.einsum("...i,io->...o", x_k, weight[:, :, k])
        term = y_k[..., None, :] * torch.exp(2j * math.pi * j * k / n)[:, None]
        out = out + (1 if k == 0 else 2) * term.real / math.sqrt(n)
    return out.movedim(-2, axis + 1)


@pytest.mark.parametrize(
    ("shape", "axis"), [((2, 10, 3), 0), ((2, 10, 7, 3), 0), ((1, 6, 10, 3), 1), ((1, 4, 5, 9, 3), 2)]
)
def test_axis_conv_equals_explicit_dft(shape, axis):
    torch.manual_seed(0)
    conv = AxisSpectralConv(3, 2, 4, axis).double()
    with torch.no_grad():
        conv.weight.normal_()
    x = torch.randn(*shape, dtype=torch.float64)
    expected = _dft_reference(x, torch.view_as_complex(conv.weight), axis)
    torch.testing.assert_close(conv(x), expected, rtol=1e-10, atol=1e-10)


def test_factorized_conv_is_sum_of_axis_convs_with_own_weights():
    torch.manual_seed(0)
    conv = FactorizedSpectralConv(3, 5, (4, 3, 2), ndim=3).double()
    x = torch.randn(2, 8, 6, 5, 3, dtype=torch.float64)
    expected = sum(_dft_reference(x, torch.view_as_complex(c.weight), c.axis) for c in conv.axes)
    torch.testing.assert_close(conv(x), expected, rtol=1e-10, atol=1e-10)
    # parameters: one complex (in, out, modes_axis) tensor per axis, a complex entry counted twice
    assert sum(p.numel() for p in conv.parameters()) == 2 * 3 * 5 * (4 + 3 + 2)
    assert len({p.data_ptr() for p in conv.parameters()}) == 3


def test_modes_truncated_on_small_grid_and_resolution_invariance():
    torch.manual_seed(0)
    conv = AxisSpectralConv(1, 1, 8, 0).double()
    # on 6 points only modes 0..3 exist: the result equals a 4-mode convolution with the first 4 weights
    small = AxisSpectralConv(1, 1, 4, 0).double()
    with torch.no_grad():
        small.weight.copy_(conv.weight[:, :, :4])
    x = torch.randn(2, 6, 1, dtype=torch.float64)
    torch.testing.assert_close(conv(x), small(x), rtol=1e-12, atol=1e-12)
    # a field with frequencies 0..5 (< 8 kept modes) gives the same function on 16 and 64 points
    coeffs = torch.randn(6, 2, dtype=torch.float64)

    def field(n: int) -> torch.Tensor:
        s = torch.arange(n, dtype=torch.float64)[:, None] / n * torch.arange(6, dtype=torch.float64)
        return (torch.cos(2 * math.pi * s) @ coeffs[:, 0] + torch.sin(2 * math.pi * s) @ coeffs[:, 1])[None, :, None]

    torch.testing.assert_close(conv(field(64))[:, ::4], conv(field(16)), rtol=1e-10, atol=1e-10)


def test_bad_sizes_rejected():
    with pytest.raises(ConfigError, match="1, 2 or 3 dimensions"):
        FactorizedSpectralConv(2, 2, 4, ndim=4)
    with pytest.raises(ConfigError, match="modes must be 2"):
        FactorizedSpectralConv(2, 2, (4, 4, 4), ndim=2)
    with pytest.raises(ConfigError, match="must be >= 1"):
        AxisSpectralConv(2, 2, 0, 0)
