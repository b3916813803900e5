"""Truncated DFTs as matrix products against torch.fft, and the spectral layers' matrix form against their FFT form
(float64, to ~1e-12)."""

from __future__ import annotations

import pytest
import torch

from opformer.nn.dft import truncated_irfftn, truncated_rfftn
from opformer.nn.fourier_mixer import FourierMixer
from opformer.nn.spectral import SpectralConv

# (spatial, kept rows of every axis but the last, modes of the last); sizes odd and even, the Nyquist mode kept
CASES = [
    ((12,), [], 7),
    ((9,), [], 3),
    ((8, 10), [(0, 1, 6, 7)], 6),
    ((7, 9), [tuple(range(7))], 5),
    ((6, 5, 8), [(0, 5), (0, 1, 2)], 5),
]
NORMS = ("ortho", "forward", "backward")


def close(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).detach().norm() / b.detach().norm())


def _kept(spectrum: torch.Tensor, rows, last: int) -> torch.Tensor:
    for axis, index in enumerate(rows, start=1):
        spectrum = spectrum.index_select(axis, torch.tensor(index))
    return spectrum.narrow(len(rows) + 1, 0, last)


@pytest.mark.parametrize("spatial, rows, last", CASES)
@pytest.mark.parametrize("norm", NORMS)
def test_forward_is_the_kept_part_of_rfftn(spatial, rows, last, norm):
    x = torch.randn(2, *spatial, 3, dtype=torch.float64)
    dims = tuple(range(1, len(spatial) + 1))
    expected = _kept(torch.fft.rfftn(x, dim=dims, norm=norm), rows, last)
    re, im = truncated_rfftn(x, rows, last, norm)
    assert close(torch.complex(re, im), expected) < 1e-12


@pytest.mark.parametrize("spatial, rows, last", CASES)
@pytest.mark.parametrize("norm", NORMS)
def test_inverse_is_irfftn_of_the_spectrum_zero_outside_the_kept_rows(spatial, rows, last, norm):
    """Random complex values on the kept rows, imaginary parts of the zero and Nyquist modes included: irfftn
    ignores them on the last axis, and so must the matrices."""
    shape = (2, *[len(r) for r in rows], last, 3)
    re, im = torch.randn(shape, dtype=torch.float64), torch.randn(shape, dtype=torch.float64)
    full = torch.zeros(2, *spatial[:-1], spatial[-1] // 2 + 1, 3, dtype=torch.complex128)
    index = torch.meshgrid(*[torch.tensor(r) for r in rows], torch.arange(last), indexing="ij")
    full[(slice(None), *index)] = torch.complex(re, im)
    dims = tuple(range(1, len(spatial) + 1))
    expected = torch.fft.irfftn(full, s=spatial, dim=dims, norm=norm)
    assert close(truncated_irfftn(re, im, rows, spatial, norm), expected) < 1e-12


def test_rows_outside_the_axis_are_refused():
    x = torch.randn(1, 8, 6, 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="out of range"):
        truncated_rfftn(x, [(0, 8)], 2)
    with pytest.raises(ValueError, match="out of range"):
        truncated_rfftn(x, [(0, 1)], 5)  # 6 points hold modes 0..3
    with pytest.raises(ValueError, match="kept rows of 1 axes"):
        truncated_rfftn(x, [], 2)


@pytest.mark.parametrize("spatial, modes", [((8, 10, 12), 3), ((7, 9, 6), (2, 4, 4)), ((5, 4, 3), 8),
                                            ((12, 9), (3, 5)), ((16,), 9)])
def test_spectral_conv_matrix_form_is_its_fft_form(spatial, modes):
    torch.manual_seed(0)
    conv = SpectralConv(3, 2, modes, len(spatial)).double()
    x = torch.randn(2, *spatial, 3, dtype=torch.float64)
    assert close(conv._forward_matrices(x), conv._forward_fft(x)) < 1e-12
    assert close(conv(x), conv._forward_fft(x)) < 1e-12  # whichever form forward takes


@pytest.mark.parametrize("spatial, modes, both_signs, norm, last_modes", [
    ((16, 16), 32, True, "ortho", None),  # DPOT-Ti's latent grid: every mode kept
    ((16, 12), 4, True, "forward", None),
    ((9, 7), 3, False, "ortho", None),  # the authors' positive corner
    ((8, 8, 8), 3, True, "ortho", 2),
    ((10, 6, 7), 2, False, "forward", 8),
    ((6, 6), None, True, "ortho", None),
])
def test_fourier_mixer_matrix_form_is_its_fft_form(spatial, modes, both_signs, norm, last_modes):
    torch.manual_seed(0)
    mixer = FourierMixer(8, 2, len(spatial), modes, 0.01, norm, both_signs, last_modes).double()
    x = torch.randn(2, *spatial, 8, dtype=torch.float64)
    assert close(mixer._forward_matrices(x), mixer._forward_fft(x)) < 1e-12
