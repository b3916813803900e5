"""Grid helpers: strided sub-grids, central differences, block averages."""

import math

import numpy as np
import pytest
import torch

from opformer.errors import DataError
from opformer.grids import (
    axis_kinds, axis_points, block_average, central_difference, kind_of, restrict, spacing, stride_for,
)


@pytest.mark.parametrize("stored, wanted, periodic, stride", [
    (8192, 2048, True, 4), (8192, 512, True, 16), (8192, 8192, True, 1),
    (421, 211, False, 2), (421, 141, False, 3), (421, 85, False, 5), (421, 61, False, 7), (421, 43, False, 10),
])
def test_strides_of_the_papers_grids(stored, wanted, periodic, stride):
    assert stride_for(stored, wanted, periodic) == stride


def test_a_resolution_that_does_not_divide_is_an_error():
    with pytest.raises(DataError, match=r"resolution 500 is not a strided sub-sample of the stored 8192 points "
                                         r"\(valid: 8192, 4096, 2048"):
        stride_for(8192, 500, True)
    with pytest.raises(DataError, match="valid: 421, 211, 141"):
        stride_for(421, 200, False)


def test_central_difference_periodic_is_exact_on_a_fourier_mode():
    n, k = 32, 3
    x = torch.arange(n, dtype=torch.float64) / n
    u = torch.sin(2 * math.pi * k * x)[None, :, None]
    h = 1 / n
    expected = math.sin(2 * math.pi * k * h) / h * torch.cos(2 * math.pi * k * x)
    torch.testing.assert_close(central_difference(u, [1.0], [True])[0, :, 0], expected)


def test_central_difference_closed_grid_is_exact_on_quadratics_in_2d():
    n = 9
    x = torch.linspace(0, 2, n, dtype=torch.float64)
    X, Y = torch.meshgrid(x, x, indexing="ij")
    u = (X ** 2 + 3 * X * Y - Y ** 2)[None, ..., None]
    grad = central_difference(u, [2.0, 2.0], [False, False])
    assert grad.shape == (1, n, n, 2)
    torch.testing.assert_close(grad[0, ..., 0], 2 * X + 3 * Y)
    torch.testing.assert_close(grad[0, ..., 1], 3 * X - 2 * Y)


def test_block_average_by_hand():
    # n = 5 -> 3 points: stride 2, blocks of radius 1 around fine nodes 0, 2, 4, clipped at the ends
    a = np.arange(25, dtype=np.float64).reshape(5, 5)
    blocks = [slice(0, 2), slice(1, 4), slice(3, 5)]
    expected = np.array([[a[r, c].mean() for c in blocks] for r in blocks])
    got = block_average(torch.from_numpy(a)[None, ..., None], 3)[0, ..., 0]
    np.testing.assert_allclose(got.numpy(), expected)


def test_block_average_keeps_constants_and_linear_functions_at_interior_nodes():
    x = torch.linspace(0, 1, 13, dtype=torch.float64)
    linear = (2 * x[:, None] - 3 * x[None, :] + 1)[None, ..., None]
    coarse = block_average(linear, 5)  # stride 3: the interior blocks are symmetric about their node
    torch.testing.assert_close(coarse[0, 1:-1, 1:-1, 0], linear[0, 3:-3:3, 3:-3:3, 0])
    torch.testing.assert_close(block_average(torch.ones(2, 13, 13, 3), 7), torch.ones(2, 7, 7, 3))
    with pytest.raises(DataError, match="6 points per axis is not a strided sub-grid of 13"):
        block_average(linear, 6)


def test_cell_grids_merge_cells_and_keep_their_averages():
    # 12 cells -> 4: stride 3, each coarse value the mean of its three cells; the cell average of a linear
    # field is its value at the centre, so the coarse cells hold the field at the coarse centres
    assert stride_for(12, 4, "cells") == 3
    with pytest.raises(DataError, match="valid: 12, 6, 4, 3"):
        stride_for(12, 5, "cells")
    x = axis_points(12, 2.0, "cells")
    torch.testing.assert_close(x, (torch.arange(12, dtype=torch.float64) + 0.5) * 2.0 / 12)
    u = (3 * x - 1)[None, :, None, None].expand(2, 12, 12, 1)
    coarse = restrict(u, 1, 3, ["cells", "nodes"])
    assert coarse.shape == (2, 4, 4, 1)
    torch.testing.assert_close(coarse[0, :, 0, 0], 3 * axis_points(4, 2.0, "cells") - 1)
    v = torch.arange(12.0)[None, None, :, None].expand(1, 12, 12, 1)  # varies along the node axis only
    assert restrict(v, 1, 3, ["cells", "nodes"])[0, 0, :, 0].tolist() == [0.0, 3.0, 6.0, 9.0]  # sub-sampled


def test_axis_kinds_read_old_and_new_domains():
    assert axis_kinds({"lengths": [1, 1], "periodic": [True, False]}) == ("periodic", "nodes")
    assert axis_kinds({"lengths": [1], "periodic": [False], "grid": ["cells"]}) == ("cells",)
    assert spacing(11, 1.0, "nodes") == 0.1 and spacing(10, 1.0, "cells") == 0.1 == spacing(10, 1.0, True)
    with pytest.raises(ValueError, match="grid kind 'edges'"):
        kind_of("edges")
