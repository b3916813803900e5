"""DPOT's Fourier attention: against an explicit per-mode complex computation, both +-k corners, the soft-shrink,
its discretisation behaviour, precision under autocast, errors."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from opformer.errors import ConfigError
from opformer.nn.fourier_mixer import FourierMixer


def _randomise(mixer: FourierMixer, seed: int = 0) -> FourierMixer:
    """Weights of order one (the initial ones are tiny), float64."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in mixer.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    return mixer.double()


def _kept(index: tuple[int, ...], spectrum: tuple[int, ...], modes: int | None) -> bool:
    """Whether a mode of the rfftn spectrum is kept: signed frequency in [-m, m) on the two-sided axes
    (the Nyquist row counted as -n/2), in [0, m) on the last axis."""
    if modes is None:
        return True
    *two_sided, last = index
    signed = [r if 2 * r < n else r - n for r, n in zip(two_sided, spectrum)]
    return all(-modes <= f < modes for f in signed) and last < modes


def _reference(mixer: FourierMixer, x: torch.Tensor) -> torch.Tensor:
    """``irfftn(K(rfftn(x)))`` with ``K`` evaluated mode by mode and head by head in complex arithmetic."""
    spatial = tuple(x.shape[1:-1])
    dims = tuple(range(1, len(spatial) + 1))
    x_ft = torch.fft.rfftn(x, dim=dims, norm=mixer.norm)
    out = torch.zeros_like(x_ft)
    heads, b = mixer.n_heads, mixer.width // mixer.n_heads
    w1, w2 = torch.view_as_complex(mixer.w1), torch.view_as_complex(mixer.w2)
    b1, b2 = torch.view_as_complex(mixer.b1), torch.view_as_complex(mixer.b2)
    for batch in range(x.shape[0]):
        for index in itertools.product(*(range(n) for n in x_ft.shape[1:-1])):
            if not _kept(index, spatial, mixer.modes):
                continue
            z = x_ft[(batch, *index)]
            for h in range(heads):
                zh = z[h * b:(h + 1) * b]
                hidden = zh @ w1[h] + b1[h]
                hidden = torch.complex(F.gelu(hidden.real), F.gelu(hidden.imag))
                o = hidden @ w2[h] + b2[h]
                if mixer.shrink > 0:
                    o = torch.complex(F.softshrink(o.real, mixer.shrink), F.softshrink(o.imag, mixer.shrink))
                out[(batch, *index, slice(h * b, (h + 1) * b))] = o
    return torch.fft.irfftn(out, s=spatial, dim=dims, norm=mixer.norm)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("spatial", "modes", "shrink", "norm"),
    [((6, 8), None, 0.0, "ortho"), ((8, 7), 2, 0.0, "ortho"), ((8, 6), 4, 0.0, "ortho"),
     ((7, 8), 3, 0.5, "forward"), ((6, 4, 6), 2, 0.0, "ortho"), ((4, 6, 5), None, 0.3, "ortho")],
)
def test_matches_the_per_mode_complex_computation(spatial, modes, shrink, norm):
    torch.manual_seed(0)
    mixer = _randomise(FourierMixer(6, 3, len(spatial), modes=modes, shrink=shrink, norm=norm))
    x = torch.randn(2, *spatial, 6, dtype=torch.float64)
    torch.testing.assert_close(mixer(x), _reference(mixer, x), rtol=1e-10, atol=1e-10)


def test_both_corners_are_kept_and_the_rest_is_zero():
    """With 2 modes on an 8 x 8 grid, the output spectrum is nonzero exactly on rows {0, 1, 6, 7} x columns
    {0, 1}: the negative frequencies -2, -1 of the first axis as well as the positive ones; plus row 2 of
    column 0, the conjugate of row 6 there (a real field's spectrum is Hermitian on column 0)."""
    mixer = _randomise(FourierMixer(4, 2, 2, modes=2))
    out = torch.fft.rfft2(mixer(torch.randn(3, 8, 8, 4, dtype=torch.float64)), dim=(1, 2), norm="ortho")
    support = out.abs().amax(dim=(0, 3)) > 1e-10
    expected = torch.zeros(8, 5, dtype=torch.bool)
    expected[[0, 1, 6, 7], :2] = True
    expected[2, 0] = True
    assert torch.equal(support, expected)


def _band_limited(n: int, coeffs: torch.Tensor) -> torch.Tensor:
    """``sum Re(c_kl e^{2 pi i (k x + l y)})`` at ``x, y = i / n``; ``coeffs`` complex ``(batch, K, K, width)``
    over the frequencies ``k, l`` in ``-K//2 .. K//2``."""
    s = torch.arange(n, dtype=torch.float64) / n
    k = torch.arange(coeffs.shape[1], dtype=torch.float64) - coeffs.shape[1] // 2
    e = torch.exp(2j * math.pi * torch.outer(s, k))
    return torch.einsum("xk,yl,bklc->bxyc", e, e, coeffs).real


def test_discretisation_behaviour_on_a_band_limited_input():
    """With ``norm="forward"`` the kept coefficients are the function's, so a band-limited input (|k| <= 2,
    3 modes kept) gives the same output function on 16^2 and 32^2 points (sampled on the common points). The
    authors' ``"ortho"`` scales the coefficients by sqrt(points), which the biases and GELU do not undo: the
    outputs at two resolutions are different functions (here by 6%; less for large inputs, where GELU is
    nearly positively homogeneous and the biases are small beside the coefficients)."""
    torch.manual_seed(0)
    coeffs = torch.randn(2, 5, 5, 4, dtype=torch.complex128)
    coarse, fine = _band_limited(16, coeffs), _band_limited(32, coeffs)
    forward = _randomise(FourierMixer(4, 2, 2, modes=3, norm="forward"))
    torch.testing.assert_close(forward(fine)[:, ::2, ::2], forward(coarse), rtol=1e-12, atol=1e-12)
    ortho = _randomise(FourierMixer(4, 2, 2, modes=3, norm="ortho"))
    coarse_out, fine_out = ortho(coarse), ortho(fine)[:, ::2, ::2]
    assert torch.linalg.norm(fine_out - coarse_out) / torch.linalg.norm(coarse_out) > 0.03


def test_runs_in_float32_under_autocast():
    torch.manual_seed(0)
    mixer = FourierMixer(8, 2, 2, modes=3)
    x = torch.randn(2, 8, 8, 8)
    expected = mixer(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = mixer(x)
        half = mixer(x.to(torch.bfloat16))
    assert out.dtype == torch.float32 and half.dtype == torch.float32
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    torch.testing.assert_close(half, mixer(x.to(torch.bfloat16).float()), rtol=0, atol=0)


def test_initialisation_and_errors():
    mixer = FourierMixer(12, 3, 3)
    for p in (mixer.w1, mixer.b1, mixer.w2, mixer.b2):
        assert p.min() >= 0 and p.max() < 1 / 16
    assert mixer.w1.shape == (3, 4, 4, 2) and mixer.b2.shape == (3, 4, 2)
    with pytest.raises(ConfigError, match=r"^width \(12\) must be a multiple of n_heads \(5\)$"):
        FourierMixer(12, 5, 2)
    with pytest.raises(ConfigError, match="fft norm must be one of ortho, forward"):
        FourierMixer(12, 3, 2, norm="backward")
    with pytest.raises(ValueError, match="expected \\(batch, 3 spatial axes, 12\\)"):
        mixer(torch.randn(1, 4, 4, 12))
