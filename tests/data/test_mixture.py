"""A mixture of trajectory data sets: members resized once, channels padded and masked, seeded draws."""

import math

import h5py
import numpy as np
import pytest
import torch

import opformer.data.mixture as mixture_module
from opformer.data.mixture import Mixture, MixtureMember, MixtureSpec, pad_channels
from opformer.data.store import write_trajectory_dataset
from opformer.errors import ConfigError, DataError
from opformer.eval.metrics import masked_relative_l2_per_sample
from opformer.grids import axis_points
from opformer.train.distributed import Context
from opformer.validate import from_mapping


def spec(paths, weights=None, **options):
    members = [MixtureMember(path=str(p), weight=w) for p, w in zip(paths, weights or [1.0] * len(paths))]
    defaults = dict(resolution=16, t_in=3, t_out=2, windows_per_epoch=40, n_train=4, n_val=1, n_test=1, seed=5)
    return MixtureSpec(members=members, **{**defaults, **options})


def chi_square(counts: torch.Tensor, probabilities: torch.Tensor) -> float:
    expected = counts.sum() * probabilities
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize("rule", ["weight", "weight_x_size"])
def test_member_frequencies_follow_the_rule(tmp_path, member_writer, rule):
    paths = [member_writer(tmp_path / f"m{i}.h5", samples=s, frames=f, n=8)
             for i, (s, f) in enumerate([(6, 7), (10, 6), (4, 12)])]
    weights = [1.0, 2.0, 5.0]
    members = [MixtureMember(path=str(p), weight=w, n_train=s - 2) for p, w, s in zip(paths, weights, (6, 10, 4))]
    mixture = Mixture(MixtureSpec(members=members, resolution=8, t_in=3, t_out=2, windows_per_epoch=20000, n_val=1,
                                  n_test=1, sampling=rule))
    sizes = torch.tensor([4 * 3, 8 * 2, 2 * 8], dtype=torch.float64)  # training trajectories x window starts
    expected = torch.tensor(weights, dtype=torch.float64) * (sizes if rule == "weight_x_size" else 1)
    expected /= expected.sum()
    assert torch.allclose(mixture.probabilities(), expected)
    draws = mixture.draws(epoch=0)
    counts = torch.bincount(draws[:, 0], minlength=3).double()
    assert chi_square(counts, expected) < 2 + 5 * math.sqrt(2 * 2)  # chi-square, 2 degrees of freedom, 5 sigma
    for k, (n_train, starts) in enumerate([(4, 3), (8, 2), (2, 8)]):  # trajectories and starts in range, all hit
        mine = draws[draws[:, 0] == k]
        assert set(mine[:, 1].tolist()) == set(range(n_train)) and set(mine[:, 2].tolist()) == set(range(starts))


def test_batches_are_resized_padded_and_masked(toy_mixture):
    mixture = Mixture(spec(toy_mixture))
    assert mixture.grid == (16, 16) and mixture.channels == 2
    draws = mixture.draws(0)
    context, future, mask, member = next(mixture.batches(0, 40))
    assert context.shape == (40, 16, 16, 3, 2) and future.shape == (40, 16, 16, 2, 2)
    assert torch.equal(member, draws[:, 0]) and set(member.tolist()) == {0, 1}
    assert torch.equal(mask, torch.tensor([[True, False], [True, True]])[member])
    assert torch.all(context[member == 0][..., 1] == 0) and torch.all(future[member == 0][..., 1] == 0)
    # the window's frames: the value 100 i + 10 t + c (+ small noise) of trajectory i, frame t, channel c
    level = 100 * draws[:, 1, None] + 10 * (draws[:, 2, None] + torch.arange(5))
    frames = torch.cat([context, future], dim=-2).mean(dim=(1, 2))  # (b, time, channel)
    assert torch.allclose(frames[..., 0], level.float(), atol=0.01)
    assert torch.allclose(frames[member == 1][..., 1], level[member == 1].float() + 1, atol=0.01)


def test_training_grid_is_the_resized_member_and_validation_the_stored_one(toy_mixture):
    mixture = Mixture(spec(toy_mixture))
    cells = mixture.members[1]
    stored, mask = mixture.stored_split(1, "val")
    assert stored.shape == (1, 7, 32, 32, 2) and mask.tolist() == [True, True]
    with h5py.File(toy_mixture[1]) as f:
        raw = torch.from_numpy(f["fields"][:4])
    assert torch.allclose(cells.train, raw.reshape(4, 7, 16, 2, 16, 2, 2).mean(dim=(3, 5)))  # cell means
    test, mask = mixture.stored_split(0, "test")
    assert test.shape == (1, 7, 16, 16, 2) and torch.all(test[..., 1] == 0) and mask.tolist() == [True, False]
    assert abs(float(test[..., 0].mean()) - (500 + 30)) < 0.01  # sample 5 (after 4 train + 1 val)


def test_draws_are_reproducible_from_the_seed(toy_mixture):
    a, b = Mixture(spec(toy_mixture)), Mixture(spec(toy_mixture, seed=6))
    assert torch.equal(a.draws(3), a.draws(3))
    assert torch.equal(a.draws(3), a.draws(3, torch.Generator().manual_seed(5 + 3)))
    assert not torch.equal(a.draws(3), a.draws(4)) and not torch.equal(a.draws(3), b.draws(3))
    first = [torch.cat(t) for t in zip(*a.batches(2, 7))]
    again = [torch.cat(t) for t in zip(*Mixture(spec(toy_mixture)).batches(2, 7))]
    assert all(torch.equal(x, y) for x, y in zip(first, again))


def test_data_parallel_rows_make_the_global_batch(toy_mixture):
    mixture = Mixture(spec(toy_mixture))
    for batch in mixture.batches(1, 9):
        parts = [Context(torch.device("cpu"), rank, 2).shard(batch)[0] for rank in range(2)]
        for whole, *pieces in zip(batch, *parts):
            assert torch.equal(torch.cat(pieces), whole)


def test_padding_never_enters_the_masked_loss(toy_mixture):
    context, future, mask, member = next(Mixture(spec(toy_mixture)).batches(0, 40))
    pred = future + 0.1 * torch.randn(future.shape, generator=torch.Generator().manual_seed(0))
    clean = masked_relative_l2_per_sample(pred, future, mask)
    garbage = pred.clone()
    garbage[member == 0, ..., 1] = 1e6
    assert torch.equal(masked_relative_l2_per_sample(garbage, future, mask), clean)
    # one-channel samples: the relative L2 of channel 0 alone
    alone = masked_relative_l2_per_sample(pred[member == 0][..., :1], future[member == 0][..., :1],
                                          mask[member == 0][:, :1])
    assert torch.allclose(clean[member == 0], alone)


def test_pad_channels():
    x = torch.ones(2, 3, 1)
    assert torch.equal(pad_channels(x, 3), torch.cat([x, torch.zeros(2, 3, 2)], dim=-1))
    assert pad_channels(x, 1) is x


def test_spec_from_a_mapping(toy_mixture):
    data = {"members": [{"path": str(toy_mixture[0]), "weight": 2}, {"path": str(toy_mixture[1]), "name": "cells"}],
            "resolution": [16, 16], "t_in": 3, "t_out": 2, "n_train": 4, "n_val": 1, "n_test": 1}
    mixture = Mixture(from_mapping(MixtureSpec, data, "mixture"))
    assert [m.name for m in mixture.members] == ["a", "cells"] and mixture.members[0].weight == 2.0
    with pytest.raises(ConfigError, match=r"mixture.members\[0\].weight: expected a number > 0, got 0"):
        from_mapping(MixtureSpec, {**data, "members": [{"path": "x", "weight": 0}]}, "mixture")
    with pytest.raises(ConfigError, match="mixture.sampling: expected one of 'weight', 'weight_x_size'"):
        from_mapping(MixtureSpec, {**data, "sampling": "size"}, "mixture")


def test_bad_members_are_one_line_errors(tmp_path, member_writer, toy_mixture):
    member_writer(tmp_path / "pairs.h5", kind="operator")
    member_writer(tmp_path / "line.h5", ndim=1)
    member_writer(tmp_path / "short.h5", frames=4)
    cases = [
        ([toy_mixture[0], tmp_path / "none.h5"], {}, DataError, r"mixture.members\[1\].path: .*none.h5: no such data file"),
        ([toy_mixture[0], tmp_path / "pairs.h5"], {}, DataError,
         r"mixture.members\[1\].path: .*pairs.h5 is an operator data set; a mixture takes trajectory data sets"),
        ([toy_mixture[0], tmp_path / "line.h5"], {}, DataError, r"members\[1\].path: .*line.h5 is 1D but the first member is 2D"),
        ([tmp_path / "short.h5"], {}, DataError,
         r"members\[0\].path: .*short.h5 has 4 frames per trajectory \(time stride 1\) but a window needs t_in 3 "
         r"\+ t_out 2"),
        ([toy_mixture[0]], {"n_train": 6}, DataError, r"members\[0\]: .*a.h5: holds 6 samples but the splits need 8"),
        ([toy_mixture[0], toy_mixture[0]], {}, ConfigError, r"members\[1\].name: 'a' is the name of member 0 too"),
        ([toy_mixture[0]], {"resolution": [16, 16, 16]}, ConfigError, r"resolution: \[16, 16, 16\] gives 3 sizes but the "
                                                                r"members have 2 spatial axes"),
        ([], {}, ConfigError, "mixture.members: a mixture needs at least one member"),
    ]
    for paths, options, error, message in cases:
        with pytest.raises(error, match=message):
            Mixture(spec(paths, **options))


def test_a_periodic_member_is_fourier_resized(tmp_path):
    n, m = 8, 16
    x = axis_points(n, 1.0, "periodic")
    wave = lambda x: torch.sin(2 * math.pi * x)[:, None] * torch.cos(4 * math.pi * x)[None, :]  # noqa: E731
    fields = wave(x)[None, None, :, :, None].expand(3, 6, n, n, 1).numpy()
    path = write_trajectory_dataset(tmp_path / "w.h5", fields, np.arange(6.0), pde={}, solver={}, seed=0,
                                    domain={"lengths": [1.0, 1.0], "periodic": [True, True]}, channels=["u"])
    mixture = Mixture(spec([path], resolution=m, n_train=1))
    assert torch.allclose(mixture.members[0].train[0, 0, :, :, 0], wave(axis_points(m, 1.0, "periodic")).float(),
                          atol=1e-6)


def test_an_epoch_is_one_window_per_training_trajectory_by_default(toy_mixture):
    mixture = Mixture(spec(toy_mixture, windows_per_epoch=None))
    assert len(mixture.draws(0)) == 8 and mixture.steps_per_epoch(3) == 3


def test_members_are_read_and_resized_in_chunks(toy_mixture, monkeypatch):
    whole = Mixture(spec(toy_mixture))
    monkeypatch.setattr(mixture_module, "RESIZE_CHUNK", 3)  # 4 training trajectories: chunks of 3 and 1
    chunked = Mixture(spec(toy_mixture))
    for a, b in zip(whole.members, chunked.members):
        assert a.train.shape[0] == 4 and torch.equal(a.train, b.train)


def test_a_member_s_own_time_stride_takes_every_kth_frame_in_training_and_evaluation(toy_mixture):
    # member a every 2nd frame (its own stride), b every 3rd (the mixture's): the toy value is 100 i + 10 t + c
    members = [MixtureMember(path=str(toy_mixture[0]), time_stride=2), MixtureMember(path=str(toy_mixture[1]))]
    mixture = Mixture(MixtureSpec(members=members, resolution=16, t_in=2, t_out=1, windows_per_epoch=200,
                                  n_train=4, n_val=1, n_test=1, seed=5, time_stride=3))
    a, b = mixture.members
    assert (a.time_stride, b.time_stride) == (2, 3)
    assert a.train.shape[1] == 4 and b.train.shape[1] == 3  # 7 stored frames: 0, 2, 4, 6 and 0, 3, 6
    assert torch.allclose(a.train.mean(dim=(2, 3, 4)), (100 * torch.arange(4)[:, None] + 20 * torch.arange(4)).float(),
                          atol=0.01)
    test, _ = mixture.stored_split(0, "test")  # sample 5, on its stored grid, strided too
    assert torch.allclose(test[0, :, ..., 0].mean(dim=(1, 2)), 500 + 20 * torch.arange(4).float(), atol=0.01)
    val, _ = mixture.stored_split(1, "val")
    assert torch.allclose(val[0, :, ..., 0].mean(dim=(1, 2)), 400 + 30 * torch.arange(3).float(), atol=0.01)
    # the windows drawn step by the member's stride
    draws = mixture.draws(0)
    context, future, _, member = mixture.fetch(draws)
    frames = torch.cat([context, future], dim=-2)[..., 0].mean(dim=(1, 2))  # (window, time)
    step = torch.tensor([20.0, 30.0])[member]
    start = 100 * draws[:, 1] + step * draws[:, 2]
    assert torch.allclose(frames, start[:, None] + step[:, None] * torch.arange(3), atol=0.01)


def test_a_member_s_stride_that_leaves_too_few_frames_is_named(toy_mixture):
    members = [MixtureMember(path=str(toy_mixture[0]), time_stride=3)]
    with pytest.raises(DataError, match=r"a.h5 has 3 frames per trajectory \(time stride 3\) but a window needs "
                                        r"t_in 3 \+ t_out 1"):
        Mixture(MixtureSpec(members=members, resolution=16, t_in=3, t_out=1, n_train=4, n_val=1, n_test=1))
    with pytest.raises(ConfigError, match=r"mixture.members\[0\].time_stride: expected an integer >= 1 or null, got 0"):
        from_mapping(MixtureSpec, {"members": [{"path": "x", "time_stride": 0}], "resolution": 16}, "mixture")
