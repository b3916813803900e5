import h5py
import numpy as np
import pytest
import torch

from opformer.data.store import read_info, write_trajectory_dataset
from opformer.data.trajectories import load_trajectories
from opformer.errors import DataError

SIZES = dict(n_train=6, n_val=2, n_test=2)


def test_trajectory_file_round_trip_and_strides(heat_file):
    info = read_info(heat_file)
    assert (info.kind, info.n_samples, info.spatial_shape, len(info.times)) == ("trajectory", 10, (16, 16), 12)
    with h5py.File(heat_file) as f:
        stored = f["fields"][()]
        assert f["fields"].chunks == (1, 1, 16, 16, 1)  # one frame per chunk
    split = load_trajectories(heat_file, "val", resolution=8, time_stride=2, **SIZES)
    assert split.fields.shape == (2, 6, 8, 8, 1)
    np.testing.assert_array_equal(split.fields.numpy(), stored[6:8, ::2, ::2, ::2])
    torch.testing.assert_close(split.times, torch.tensor(info.times[::2], dtype=torch.float64))


def test_windows_are_channel_last_with_time_before_channels(heat_file):
    split = load_trajectories(heat_file, "train", **SIZES)
    pairs = split.window_starts(t_in=3, span=2, mode="all", generator=None)
    assert len(pairs) == 6 * (12 - 3 - 2 + 1)
    x, y = split.fetch(torch.tensor([[4, 5]]), t_in=3, span=2)
    assert x.shape == (1, 16, 16, 3, 1) and y.shape == (1, 16, 16, 2, 1)
    torch.testing.assert_close(x[0, :, :, 1], split.fields[4, 6])
    torch.testing.assert_close(y[0, :, :, 0], split.fields[4, 8])
    random = split.window_starts(3, 2, "random", torch.Generator().manual_seed(0))
    assert random[:, 0].tolist() == list(range(6)) and random[:, 1].max() <= 12 - 5


def test_windows_longer_than_the_trajectory_and_bad_files_are_errors(heat_file, tmp_path, edit_h5):
    split = load_trajectories(heat_file, "train", **SIZES)
    with pytest.raises(DataError, match="a window of 10 input \\+ 3 future frames is longer than the 12 frames"):
        split.window_starts(10, 3, "all", None)
    with pytest.raises(DataError, match="time stamps must increase strictly"):
        write_trajectory_dataset(tmp_path / "bad.h5", np.zeros((1, 3, 4, 4, 1)), np.array([0.0, 1.0, 1.0]),
                                 pde={}, solver={}, domain={"lengths": [1, 1], "periodic": [True, True]}, seed=0,
                                 channels=["u"])
    assert not (tmp_path / "bad.h5").exists()
    with edit_h5(heat_file) as f:
        del f["times"]
    with pytest.raises(DataError, match="missing dataset '/times'"):
        read_info(heat_file)


def test_cell_centred_trajectories_are_coarsened_by_cell_averages(tmp_path):
    fields = np.random.default_rng(0).normal(size=(4, 3, 8, 8, 2)).astype(np.float32)
    path = write_trajectory_dataset(tmp_path / "fv.h5", fields, np.arange(3.0), pde={}, solver={},
                                    domain={"lengths": [1.0, 1.0], "periodic": [False, False],
                                            "grid": ["cells", "cells"]}, seed=0, channels=["h", "q"])
    split = load_trajectories(path, "all", resolution=4, n_train=2, n_val=1, n_test=1)
    expected = fields.reshape(4, 3, 4, 2, 4, 2, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(split.fields.numpy(), expected, rtol=1e-6, atol=1e-7)
    with pytest.raises(DataError, match=r"domain\['grid'\] entry 'cells': expected one of periodic, nodes, cells"):
        write_trajectory_dataset(tmp_path / "bad.h5", fields, np.arange(3.0), pde={}, solver={}, seed=0,
                                 domain={"lengths": [1.0, 1.0], "periodic": [True, False],
                                         "grid": ["cells", "cells"]}, channels=["h", "q"])
