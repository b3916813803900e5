"""SpectralConv against an explicit DFT computation; resolution invariance; mode truncation."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from opformer.errors import ConfigError
from opformer.nn.spectral import FourierLayer, SpectralConv


def _dft(n: int, sign: int) -> torch.Tensor:
    j = torch.arange(n, dtype=torch.float64)
    return torch.exp(sign * 2j * math.pi * torch.outer(j, j) / n) / math.sqrt(n)


def reference(conv: SpectralConv, x: torch.Tensor) -> torch.Tensor:
    """Explicit DFT matrices; keep the corner blocks; real inverse of an rfft-half spectrum."""
    spatial = x.shape[1:-1]
    ndim = len(spatial)
    coeff = x.to(torch.complex128)
    for a, n in enumerate(spatial):  # forward DFT ("ortho") along every axis
        coeff = torch.movedim(torch.movedim(coeff, a + 1, -1) @ _dft(n, -1).T, -1, a + 1)
    weight = torch.view_as_complex(conv.weight.detach().double())
    spectrum = torch.zeros(*coeff.shape[:-1], conv.out_channels, dtype=torch.complex128)
    kept = [min(m, n // 2) for m, n in zip(conv.modes[:-1], spatial[:-1])]
    kept.append(min(conv.modes[-1], spatial[-1] // 2 + 1))
    for block, signs in enumerate(itertools.product((1, -1), repeat=ndim - 1)):
        for freq in itertools.product(*[range(k) for k in kept]):
            # freq[a] = |frequency| - (0 or 1); map to grid index and weight index
            grid_idx, w_idx = [], []
            for a, f in enumerate(freq):
                if a < ndim - 1 and signs[a] < 0:
                    grid_idx.append(spatial[a] - 1 - f)  # frequency -(f+1)
                    w_idx.append(conv.modes[a] - 1 - f)
                else:
                    grid_idx.append(f)
                    w_idx.append(f)
            w = weight[(block, slice(None), slice(None), *w_idx)]
            spectrum[(slice(None), *grid_idx)] = coeff[(slice(None), *grid_idx)] @ w
    out = spectrum
    for a, n in enumerate(spatial[:-1]):  # complex inverse DFT along the two-sided axes
        out = torch.movedim(torch.movedim(out, a + 1, -1) @ _dft(n, 1).T, -1, a + 1)
    n = spatial[-1]
    # real inverse along the last axis: DC (and Nyquist) once, real part only; others twice
    j = torch.arange(n, dtype=torch.float64)
    result = torch.zeros(*out.shape[:-1][:-1], n, out.shape[-1], dtype=torch.float64)
    half = out.shape[-2]
    for k in range(half):
        factor = 1.0 if k == 0 or (n % 2 == 0 and k == n // 2) else 2.0
        phase = torch.exp(2j * math.pi * k * j / n) / math.sqrt(n)
        term = out[..., k : k + 1, :] * phase.view(*([1] * ndim), n, 1)
        result = result + factor * term.real
    return result


def _random_conv(in_c: int, out_c: int, modes, ndim: int) -> SpectralConv:
    conv = SpectralConv(in_c, out_c, modes, ndim)
    with torch.no_grad():
        conv.weight.normal_()
    return conv


@pytest.mark.parametrize(
    ("spatial", "modes"),
    [((12,), 3), ((11,), 4), ((8, 10), (3, 4)), ((7, 6), 2), ((6, 4, 6), (2, 2, 3))],
)
def test_matches_explicit_dft(spatial, modes):
    torch.manual_seed(0)
    conv = _random_conv(3, 2, modes, len(spatial))
    x = torch.randn(2, *spatial, 3, dtype=torch.float64)
    torch.testing.assert_close(conv(x), reference(conv, x), rtol=1e-10, atol=1e-10)


def _band_limited(n: int, coeffs: torch.Tensor) -> torch.Tensor:
    """sum_k a_k cos(2 pi k x) + b_k sin(2 pi k x) at x = i/n; coeffs (batch, K, 2, channels)."""
    x = torch.arange(n, dtype=torch.float64) / n
    k = torch.arange(coeffs.shape[1], dtype=torch.float64)
    cos, sin = torch.cos(2 * math.pi * torch.outer(x, k)), torch.sin(2 * math.pi * torch.outer(x, k))
    return torch.einsum("nk,bkc->bnc", cos, coeffs[:, :, 0]) + torch.einsum("nk,bkc->bnc", sin, coeffs[:, :, 1])


def test_resolution_invariance_1d():
    torch.manual_seed(0)
    conv = _random_conv(2, 3, 8, 1).double()
    coeffs = torch.randn(2, 6, 2, 2, dtype=torch.float64)
    coarse, fine = conv(_band_limited(32, coeffs)), conv(_band_limited(128, coeffs))
    torch.testing.assert_close(fine[:, ::4], coarse, rtol=1e-10, atol=1e-10)


def test_resolution_invariance_2d():
    torch.manual_seed(0)
    conv = _random_conv(1, 2, (4, 4), 2).double()
    cx = torch.randn(1, 3, 2, 1, dtype=torch.float64)
    cy = torch.randn(1, 3, 2, 1, dtype=torch.float64)

    def field(n: int) -> torch.Tensor:
        """A separable band-limited field u(x) v(y) on an n x n periodic grid."""
        ux, uy = _band_limited(n, cx)[0, :, 0], _band_limited(n, cy)[0, :, 0]
        return (ux[:, None] * uy[None, :])[None, :, :, None]

    torch.testing.assert_close(conv(field(48))[:, ::3, ::3], conv(field(16)), rtol=1e-10, atol=1e-10)


def test_modes_truncated_on_small_grids():
    torch.manual_seed(0)
    big = _random_conv(2, 2, 16, 1)
    small = SpectralConv(2, 2, 5, 1)
    with torch.no_grad():
        small.weight.copy_(big.weight[:, :, :, :5])
    x = torch.randn(3, 8, 2)
    torch.testing.assert_close(big(x), small(x))
    # 2D: the negative-frequency block keeps its lowest |frequencies|, i.e. its last entries
    big2 = _random_conv(1, 1, (6, 4), 2)
    small2 = SpectralConv(1, 1, (3, 4), 2)
    with torch.no_grad():
        small2.weight[0].copy_(big2.weight[0, :, :, :3])
        small2.weight[1].copy_(big2.weight[1, :, :, 3:])
    x2 = torch.randn(2, 6, 8, 1)
    torch.testing.assert_close(big2(x2), small2(x2))


def test_parameter_count_counts_complex_entries_twice():
    assert sum(p.numel() for p in SpectralConv(96, 48, 16, 1).parameters()) == 96 * 48 * 16 * 2
    assert sum(p.numel() for p in SpectralConv(32, 32, 12, 2).parameters()) == 2 * 32 * 32 * 12 * 12 * 2
    assert sum(p.numel() for p in SpectralConv(4, 4, 3, 3).parameters()) == 4 * 4 * 4 * 27 * 2


def test_float32_under_autocast_and_fourier_layer():
    torch.manual_seed(0)
    layer = FourierLayer(4, 5, 3, ndim=2, activation="silu")
    x = torch.randn(2, 8, 8, 4)
    expected = torch.nn.functional.silu(layer.spectral(x) + layer.linear(x))
    torch.testing.assert_close(layer(x), expected)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer.spectral(x.bfloat16())
    assert y.dtype == torch.float32
    no_act = FourierLayer(4, 5, 3, ndim=2, activation=None)
    torch.testing.assert_close(no_act(x), no_act.spectral(x) + no_act.linear(x))


def test_bad_modes_rejected():
    with pytest.raises(ConfigError):
        SpectralConv(2, 2, (4, 4), ndim=1)
    with pytest.raises(ConfigError):
        SpectralConv(2, 2, 4, ndim=4)


def fft_reference_2d(weight: torch.Tensor, modes: tuple[int, int], x: torch.Tensor) -> torch.Tensor:
    """``irfft2`` of the weighted corner blocks of ``rfft2(x)`` ("ortho"), the FFT formula of the 2D layer."""
    n1, n2 = x.shape[1:3]
    k1, k2 = min(modes[0], n1 // 2), min(modes[1], n2 // 2 + 1)
    x_ft = torch.fft.rfft2(x, dim=(1, 2), norm="ortho")
    w = torch.view_as_complex(weight)
    out = x_ft.new_zeros(*x_ft.shape[:-1], w.shape[2])
    out[:, :k1, :k2] = torch.einsum("bxyi,ioxy->bxyo", x_ft[:, :k1, :k2], w[0, :, :, :k1, :k2])
    out[:, n1 - k1:, :k2] = torch.einsum("bxyi,ioxy->bxyo", x_ft[:, n1 - k1:, :k2], w[1, :, :, modes[0] - k1:, :k2])
    return torch.fft.irfft2(out, s=(n1, n2), dim=(1, 2), norm="ortho")


@pytest.mark.parametrize(
    ("spatial", "modes"),
    # odd/even axes, every row kept (k1 = n1 / 2, the Nyquist row in the negative block), the Nyquist column
    [((85, 85), (12, 12)), ((9, 12), (3, 5)), ((8, 8), (4, 5)), ((6, 7), (5, 9)), ((10, 9), (1, 1))],
)
def test_2d_matches_fft_formula_with_gradients(spatial, modes):
    torch.manual_seed(0)
    conv = _random_conv(3, 4, modes, 2).double()
    x = torch.randn(2, *spatial, 3, dtype=torch.float64, requires_grad=True)
    y = conv(x)
    ref = fft_reference_2d(conv.weight, modes, x)
    torch.testing.assert_close(y, ref, rtol=1e-12, atol=1e-12)
    g = torch.randn_like(y)
    grads = torch.autograd.grad(y, [x, conv.weight], g)
    ref_grads = torch.autograd.grad(ref, [x, conv.weight], g)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_2d_float32_close_to_float64():
    torch.manual_seed(0)
    conv = SpectralConv(32, 32, 12, 2)
    x = torch.randn(2, 85, 85, 32)
    y = conv(x)
    assert y.dtype == torch.float32
    ref = fft_reference_2d(conv.weight.double(), (12, 12), x.double())
    assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-6
