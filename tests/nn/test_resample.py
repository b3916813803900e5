"""Linear resampling of cell-centred grids: as ``F.interpolate`` on closed grids, exact averages and shift
equivariance on periodic ones."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from opformer.nn.resample import linear_resample, linear_resample_matrix


@pytest.mark.parametrize(("shape", "size", "mode"),
                         [((5, 7), (12, 3), "bilinear"), ((4, 6, 3), (9, 2, 7), "trilinear")])
def test_non_periodic_is_interpolate_without_aligned_corners(shape, size, mode):
    x = torch.randn(3, *shape, dtype=torch.float64)
    expected = F.interpolate(x[None], size=size, mode=mode, align_corners=False)[0]
    torch.testing.assert_close(linear_resample(x, size, periodic=False), expected, rtol=1e-12, atol=1e-12)


def test_periodic_wraps_around():
    x = torch.randn(2, 8, 6, dtype=torch.float64)
    # halving: each new cell is the mean of the two old cells it covers
    torch.testing.assert_close(linear_resample(x, (4, 3), periodic=True),
                               (x[:, 0::2] + x[:, 1::2])[:, :, 0::2] / 4 + (x[:, 0::2] + x[:, 1::2])[:, :, 1::2] / 4)
    # doubling commutes with periodic shifts (a shift by 3 coarse cells is 6 fine cells), unlike clamping
    fine = linear_resample(x.roll(3, 1), (16, 6), periodic=True)
    torch.testing.assert_close(fine, linear_resample(x, (16, 6), periodic=True).roll(6, 1), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(linear_resample(x.roll(3, 1), (16, 6), periodic=False),
                              linear_resample(x, (16, 6), periodic=False).roll(6, 1))
    # doubling: new cell 0 sits a quarter cell before old cell 0
    matrix = linear_resample_matrix(4, 8, periodic=True)
    assert matrix[0].tolist() == [0.75, 0.0, 0.0, 0.25] and matrix[1].tolist() == [0.75, 0.25, 0.0, 0.0]
    torch.testing.assert_close(matrix.sum(1), torch.ones(8, dtype=torch.float64))
    assert linear_resample(x, (8, 6), periodic=True) is x
