"""Plain .npz / .npy arrays with the domain given by the caller."""

import numpy as np
import pytest

from opformer.data.readers.arrays import read_arrays
from opformer.errors import ConfigError, DataError

N, X, Y = 4, 6, 5


def pairs(channels=None):
    rng = np.random.default_rng(0)
    shape = (N, X, Y) if channels is None else (N, X, Y, channels)
    return rng.normal(size=shape), rng.normal(size=(N, X, Y))


def test_npz_pairs_with_default_and_given_keys(tmp_path):
    x, y = pairs(channels=2)
    np.savez(tmp_path / "xy.npz", x=x, y=y)
    source = read_arrays(tmp_path / "xy.npz", lengths=[2.0, 1.0], grid=["periodic", "nodes"])
    inputs, targets = source.read(0, N)
    np.testing.assert_array_equal(inputs, x.astype(np.float32))  # channel-last kept
    np.testing.assert_array_equal(targets, y[..., None].astype(np.float32))
    assert source.kind == "operator" and source.channels == (["x0", "x1"], ["y"])
    assert source.domain == {"lengths": [2.0, 1.0], "periodic": [True, False], "grid": ["periodic", "nodes"]}
    np.savez(tmp_path / "named.npz", coefficient=y, solution=x[..., 0])
    source = read_arrays(tmp_path / "named.npz", keys=["coefficient", "solution"])
    np.testing.assert_array_equal(source.read(2, 3)[1][0, ..., 0], x[2, ..., 0].astype(np.float32))
    assert source.domain["grid"] == ["periodic", "periodic"] and source.channels == (["coefficient"], ["solution"])


def test_npy_pairs_need_a_target_file(tmp_path):
    x, y = pairs()
    np.save(tmp_path / "in.npy", x)
    np.save(tmp_path / "out.npy", y)
    with pytest.raises(ConfigError, match="--target"):
        read_arrays(tmp_path / "in.npy")
    with pytest.raises(ConfigError, match="--keys: only for a .npz"):
        read_arrays(tmp_path / "in.npy", keys=["a", "b"], target=tmp_path / "out.npy")
    inputs, targets = read_arrays(tmp_path / "in.npy", target=tmp_path / "out.npy").read(1, 3)
    np.testing.assert_array_equal(targets[..., 0], y[1:3].astype(np.float32))


def test_trajectories_with_times(tmp_path):
    fields = np.random.default_rng(1).normal(size=(N, 3, X, Y))
    np.savez(tmp_path / "traj.npz", u=fields, t=np.array([0.0, 0.5, 1.0]))
    source = read_arrays(tmp_path / "traj.npz", kind="trajectory", lengths=[1.0, 1.0], grid=["cells"])
    (out,) = source.read(0, N)
    np.testing.assert_array_equal(out[..., 0], fields.astype(np.float32))
    np.testing.assert_array_equal(source.times, [0.0, 0.5, 1.0])
    assert source.channels == (["u"],) and source.domain["grid"] == ["cells", "cells"]
    np.save(tmp_path / "traj.npy", fields)
    np.testing.assert_array_equal(read_arrays(tmp_path / "traj.npy", kind="trajectory").times, [0, 1, 2])


def test_wrong_arrays_are_named(tmp_path):
    x, y = pairs()
    np.savez(tmp_path / "other.npz", a=x, b=y)
    with pytest.raises(DataError, match="none of the arrays x / input"):
        read_arrays(tmp_path / "other.npz")
    with pytest.raises(DataError, match="missing array 'c'"):
        read_arrays(tmp_path / "other.npz", keys=["a", "c"])
    np.savez(tmp_path / "short.npz", x=x, y=y[:2])
    with pytest.raises(DataError, match="must hold the same samples"):
        read_arrays(tmp_path / "short.npz")
    with pytest.raises(DataError, match="'x' has shape .*3 spatial axes"):
        read_arrays(tmp_path / "short.npz", lengths=[1.0, 1.0, 1.0])
    x[3, 0, 0] = np.nan
    np.savez(tmp_path / "nan.npz", x=x, y=y)
    with pytest.raises(DataError, match=r"'x' holds NaN or Inf \(first in sample 3\)"):
        read_arrays(tmp_path / "nan.npz").read(0, N)
    with pytest.raises(ConfigError, match="--grid"):
        read_arrays(tmp_path / "nan.npz", grid=["nodes", "nodes", "nodes"])
    (tmp_path / "junk.npz").write_bytes(b"not a zip file at all")
    with pytest.raises(DataError, match="junk.npz: not a readable"):
        read_arrays(tmp_path / "junk.npz")
