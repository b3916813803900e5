"""Resizing to another grid of the same domain: Fourier on periodic axes, linear / cell means on closed ones."""

import math

import pytest
import torch

from opformer.data.resize import fourier_resize, resize
from opformer.errors import DataError
from opformer.grids import axis_points


def band_limited(n: int, modes: dict[int, tuple[float, float]]) -> torch.Tensor:
    """sum_k a cos(2 pi k x) + b sin(2 pi k x) at the n periodic points of [0, 1) (float64)."""
    x = axis_points(n, 1.0, "periodic")
    return sum(a * torch.cos(2 * math.pi * k * x) + b * torch.sin(2 * math.pi * k * x) for k, (a, b) in modes.items())


@pytest.mark.parametrize("n, m", [(16, 24), (16, 64), (15, 32), (24, 16), (64, 16), (33, 15)])
def test_fourier_resize_of_a_band_limited_field_is_exact(n, m):
    modes = {0: (0.3, 0.0), 1: (1.0, -0.5), 3: (0.2, 0.7), min(n, m) // 2 - 1: (0.4, 0.1)}
    out = fourier_resize(band_limited(n, modes)[None, :, None], 1, m)[0, :, 0]
    assert out.shape == (m,)
    assert torch.allclose(out, band_limited(m, modes), atol=1e-12, rtol=0)


def test_fourier_resize_keeps_the_nyquist_mode():
    """Down to an even size the +-m/2 modes fold into its Nyquist cosine (their samples); up from an even size
    the stored Nyquist cosine stays a cosine."""
    fine = band_limited(32, {1: (1.0, 0.0), 8: (0.5, 0.3)})
    coarse = fourier_resize(fine, 0, 16)
    assert torch.allclose(coarse, fine[::2], atol=1e-12, rtol=0)  # samples of the field at the coarse points
    up = fourier_resize(band_limited(16, {8: (0.5, 0.0)}), 0, 48)
    assert torch.allclose(up, band_limited(48, {8: (0.5, 0.0)}), atol=1e-12, rtol=0)


def test_fourier_resize_keeps_dtype_and_other_axes():
    x = band_limited(16, {2: (1.0, 1.0)}).float()
    field = torch.stack([x, 2 * x])[:, None, :, None].expand(2, 3, 16, 4)  # axes: sample, time, x, channel
    out = fourier_resize(field, 2, 8)
    assert out.dtype == torch.float32 and out.shape == (2, 3, 8, 4)
    assert torch.allclose(out[1], 2 * out[0]) and torch.allclose(out[0, 0, :, 0], x[::2], atol=1e-6)


@pytest.mark.parametrize("kind, n, m", [("nodes", 9, 17), ("nodes", 17, 5), ("nodes", 10, 7),
                                        ("cells", 8, 12), ("cells", 12, 8), ("cells", 16, 4), ("cells", 5, 3)])
def test_closed_axes_resize_a_linear_field_exactly(kind, n, m):
    line = lambda size: 2.0 - 3.0 * axis_points(size, 2.5, kind)  # noqa: E731
    out = resize(line(n)[None, :, None], 1, [m], [kind])[0, :, 0]
    assert torch.allclose(out, line(m), atol=1e-12, rtol=0)


def test_integer_coarsening_of_cells_is_the_cell_mean():
    x = torch.arange(8.0).reshape(1, 8, 1) ** 2
    assert torch.equal(resize(x, 1, [2], ["cells"])[0, :, 0], torch.tensor([(0 + 1 + 4 + 9) / 4, (16 + 25 + 36 + 49) / 4]))


def test_two_axes_of_different_kinds():
    x, y = axis_points(16, 1.0, "periodic"), axis_points(8, 2.0, "cells")
    field = (torch.sin(2 * math.pi * x)[:, None] * (1 + y)[None, :])[None, :, :, None]
    out = resize(field, 1, [32, 12], ["periodic", "cells"])
    x2, y2 = axis_points(32, 1.0, "periodic"), axis_points(12, 2.0, "cells")
    assert torch.allclose(out[0, :, :, 0], torch.sin(2 * math.pi * x2)[:, None] * (1 + y2)[None, :], atol=1e-12)


def test_a_closed_axis_of_one_point_cannot_be_resized():
    with pytest.raises(DataError, match="cannot interpolate a nodes axis of 1 points to 4"):
        resize(torch.zeros(1, 1), 1, [4], ["nodes"])
