import numpy as np
import pytest
import torch

from opformer.data import pairs
from opformer.data.pairs import load_split
from opformer.grids import block_average, central_difference
from opformer.data.normalize import UnitGaussianNormalizer
from opformer.errors import DataError


def test_splits_are_disjoint_and_strided(toy_file):
    sizes = dict(n_train=16, n_val=4, n_test=4)
    train = load_split(toy_file, "train", resolution=16, **sizes)
    test = load_split(toy_file, "test", resolution=16, **sizes)
    full = load_split(toy_file, "all", n_train=0, n_val=0, n_test=0)
    assert train.inputs.shape == (16, 16, 1) and test.inputs.shape == (4, 16, 1)
    torch.testing.assert_close(train.inputs, full.inputs[:16, ::4])
    torch.testing.assert_close(test.targets, full.targets[20:24, ::4])
    # the target derivative is taken on the finest grid, then sub-sampled
    fine_grad = central_difference(full.targets, [1.0], [True])
    torch.testing.assert_close(test.target_grad, fine_grad[20:24, ::4])
    with pytest.raises(DataError, match="holds 24 samples but the splits need 25"):
        load_split(toy_file, "train", n_train=17, n_val=4, n_test=4)


def test_target_gradient_in_chunks_equals_the_whole_split(toy_file, monkeypatch):
    monkeypatch.setattr(pairs, "GRADIENT_CHUNK", 3)  # 16 samples: five chunks of 3 and one of 1
    train = load_split(toy_file, "train", resolution=16, n_train=16, n_val=4, n_test=4)
    full = load_split(toy_file, "all", n_train=0, n_val=0, n_test=0)
    assert torch.equal(train.target_grad, central_difference(full.targets, [1.0], [True])[:16, ::4])


def test_batches_cover_every_sample_once(toy_file):
    data = load_split(toy_file, "all", n_train=0, n_val=0, n_test=0)
    seen = torch.cat([x for x, _, _ in data.batches(5, torch.Generator().manual_seed(0))])
    assert sorted(seen[:, 0, 0].tolist()) == sorted(data.inputs[:, 0, 0].tolist())


def test_pointwise_normalizer_round_trip_and_striding():
    data = torch.randn(50, 16, 2) * torch.linspace(1, 3, 16)[None, :, None] + 5
    norm = UnitGaussianNormalizer("pointwise", (16,), 2, (True,)).fit(data)
    z = norm.encode(data)
    torch.testing.assert_close(z.mean(0), torch.zeros(16, 2), atol=1e-5, rtol=0)
    torch.testing.assert_close(norm.decode(z), data)
    coarse = data[:, ::4]
    torch.testing.assert_close(norm.encode(coarse), z[:, ::4], rtol=0, atol=0)  # strided: the very statistics
    with pytest.raises(DataError, match="normalizer: fitted on 1D data, got 2D"):
        norm.encode(torch.zeros(1, 4, 4, 2))


def test_pointwise_statistics_are_interpolated_to_any_grid_of_the_domain():
    # closed axis: 5 stored nodes at x = 0, 1/4, ..., 1; statistics linear in x stay linear on 9 or 3 nodes
    closed = UnitGaussianNormalizer("pointwise", (5,), 1, (False,))
    closed.mean.copy_(torch.linspace(0, 4, 5)[:, None])
    closed.std.copy_(torch.linspace(1, 2, 5)[:, None])
    fine = torch.linspace(0, 4, 9)[:, None]
    torch.testing.assert_close(closed.decode(torch.zeros(1, 9, 1))[0], fine)
    torch.testing.assert_close(closed.decode(torch.ones(1, 3, 1))[0], torch.tensor([[0.0], [2.0], [4.0]])
                               + torch.tensor([[1.0], [1.5], [2.0]]) + closed.eps)
    # periodic axis: 4 cells, the point between the last stored one and the first wraps around
    periodic = UnitGaussianNormalizer("pointwise", (4,), 1, (True,))
    periodic.mean.copy_(torch.tensor([[0.0], [2.0], [4.0], [6.0]]))
    assert periodic.decode(torch.zeros(1, 8, 1))[0, :, 0].tolist() == [0, 1, 2, 3, 4, 5, 6, 3]


def test_channel_normalizer_uses_one_statistic_per_channel():
    data = torch.stack([torch.full((4, 8), 2.0), torch.arange(32.0).reshape(4, 8)], dim=-1)
    norm = UnitGaussianNormalizer("channel", (8,), 2, (True,)).fit(data)
    assert norm.mean.tolist() == pytest.approx([2.0, 15.5])
    assert norm.encode(data)[..., 0].abs().max() == 0
    np.testing.assert_allclose(norm.encode(data[:, ::2]).numpy(), norm.encode(data)[:, ::2].numpy())


def test_inverse_split_swaps_input_and_target_and_block_averages_the_target(darcy_file):
    sizes = dict(n_train=8, n_val=2, n_test=2)
    forward = load_split(darcy_file, "train", resolution=9, **sizes)
    inverse = load_split(darcy_file, "train", resolution=9, target_resolution=5, direction="inverse", **sizes)
    stored = load_split(darcy_file, "train", **sizes)
    assert (forward.input_channels, forward.target_channels) == (["a"], ["u"])
    assert (inverse.input_channels, inverse.target_channels) == (["u"], ["a"])
    torch.testing.assert_close(inverse.inputs, forward.targets)
    assert inverse.targets.shape == (8, 5, 5, 1)
    # the coarse coefficient is the block average of the stored 17 x 17 one (stride 4, blocks of 5 x 5 nodes)
    torch.testing.assert_close(inverse.targets, block_average(stored.inputs, 5))
    torch.testing.assert_close(inverse.targets[3, 2, 2, 0], stored.inputs[3, 6:11, 6:11, 0].mean())
    with pytest.raises(DataError, match="direction 'sideways'"):
        load_split(darcy_file, "train", direction="sideways", **sizes)


def test_pointwise_statistics_on_cell_grids_are_interpolated_between_cell_centres():
    # 4 cells of (0, 1): centres 1/8, 3/8, 5/8, 7/8; statistics linear in x. The 2 coarse cells' centres 1/4,
    # 3/4 lie half-way between fine centres; the 8 fine cells' outer centres lie beyond the outer stored ones
    cells = UnitGaussianNormalizer("pointwise", (4,), 1, ("cells",))
    cells.mean.copy_(torch.tensor([[1.0], [3.0], [5.0], [7.0]]))  # 8 x
    assert cells.decode(torch.zeros(1, 2, 1))[0, :, 0].tolist() == [2.0, 6.0]
    assert cells.decode(torch.zeros(1, 8, 1))[0, :, 0].tolist() == [1.0, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.0]


def test_a_channel_normalizer_fits_zero_channels():
    """A mesh operator whose input is the coordinates alone has 0 input channels: the fit is empty, not an error."""
    from opformer.data.normalize import UnitGaussianNormalizer

    norm = UnitGaussianNormalizer("channel", (), 0, ()).fit(torch.zeros(7, 0))
    assert norm.encode(torch.zeros(2, 5, 0)).shape == (2, 5, 0)
