"""grid_coordinates: periodic points, non-periodic end points, strided sub-grids."""

from __future__ import annotations

import math

import torch

from opformer.nn.positional import append_coordinates, fourier_features, grid_coordinates


def test_periodic_grid_excludes_right_end_and_subsamples_exactly():
    fine = grid_coordinates((8192,), lengths=1.0, periodic=True)
    assert fine.shape == (8192, 1)
    assert fine[0, 0] == 0 and fine[1, 0] == 1 / 8192 and fine[-1, 0] == 8191 / 8192
    for n in (512, 2048):
        assert torch.equal(fine[:: 8192 // n], grid_coordinates((n,), periodic=True))


def test_non_periodic_grid_includes_both_ends():
    pos = grid_coordinates((5, 3), lengths=(2.0, 1.0), periodic=False, dtype=torch.float64)
    assert pos.shape == (5, 3, 2)
    torch.testing.assert_close(pos[:, 0, 0], torch.tensor([0, 0.5, 1, 1.5, 2], dtype=torch.float64))
    torch.testing.assert_close(pos[0, :, 1], torch.tensor([0, 0.5, 1], dtype=torch.float64))
    fine = grid_coordinates((421, 421), periodic=False)
    assert torch.equal(fine[::10, ::10], grid_coordinates((43, 43), periodic=False))


def test_mixed_axes_and_append():
    pos = grid_coordinates((4, 3, 2), lengths=(1.0, 3.0, 1.0), periodic=(True, False, True))
    assert pos.shape == (4, 3, 2, 3)
    assert pos[1, 0, 0, 0] == 0.25 and pos[0, 2, 0, 1] == 3.0 and pos[0, 0, 1, 2] == 0.5
    x = torch.zeros(2, 4, 3, 2, 5, dtype=torch.float64)
    y = append_coordinates(x, pos)
    assert y.shape == (2, 4, 3, 2, 8) and y.dtype == torch.float64
    assert torch.equal(y[1, ..., 5:], pos.double())


def test_cell_axes_hold_the_cell_centres():
    pos = grid_coordinates((4, 3), lengths=(2.0, 1.0), periodic=("cells", "periodic"), dtype=torch.float64)
    torch.testing.assert_close(pos[:, 0, 0], torch.tensor([0.25, 0.75, 1.25, 1.75], dtype=torch.float64))
    torch.testing.assert_close(pos[0, :, 1], torch.tensor([0.0, 1 / 3, 2 / 3], dtype=torch.float64))


def test_fourier_features_formula():
    pos = torch.tensor([[0.125, 0.5]], dtype=torch.float64)
    out = fourier_features(pos, 2)
    angles = [2 * math.pi * k * v for v in (0.125, 0.5) for k in (1, 2)]
    expected = [0.125, 0.5] + [math.sin(a) for a in angles] + [math.cos(a) for a in angles]
    torch.testing.assert_close(out[0], torch.tensor(expected, dtype=torch.float64), rtol=1e-14, atol=1e-14)
    assert fourier_features(pos, 0) is pos
