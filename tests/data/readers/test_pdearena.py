"""PDEArena NavierStokes2D files, written in the published layout (a group per split)."""

import h5py
import numpy as np
import pytest

from opformer.data.readers.pdearena import read_pdearena_ns
from opformer.errors import ConfigError, DataError

N, T, X, Y = 3, 5, 8, 6
BUOYANCY = [0.2, 0.3, 0.5]


def random_fields():
    return np.random.default_rng(0).normal(size=(3, N, T, X, Y))


def test_smoke_and_velocities_land_in_their_channels(tmp_path, layouts):
    fields = random_fields()
    source = read_pdearena_ns(layouts.pdearena(tmp_path / "NavierStokes2D_train_0_0.50000_3.h5", fields, BUOYANCY))
    (out,) = source.read(0, N)
    np.testing.assert_array_equal(out, np.moveaxis(fields, 0, -1).astype(np.float32))
    assert source.channels == (["smoke", "vx", "vy"],)
    assert source.domain == {"lengths": [32.0, 32.0], "periodic": [False, False], "grid": ["cells", "cells"]}
    np.testing.assert_allclose(source.times, np.linspace(18, 102, T))
    with h5py.File(tmp_path / "NavierStokes2D_train_0_0.50000_3.h5", "r") as f:  # the file's dt is not t's step
        assert not np.isclose(f["train/dt"][0], (102 - 18) / (T - 1))
    np.testing.assert_array_equal(source.per_sample["buoyancy_y"], BUOYANCY)
    assert "staggered" in source.pde["velocity"] and source.pde["split"] == "train"


def test_the_split_is_chosen_or_asked_for(tmp_path, layouts):
    path = layouts.pdearena(tmp_path / "two.h5", random_fields(), BUOYANCY, splits=("valid", "test"))
    with pytest.raises(DataError, match="choose one with --split"):
        read_pdearena_ns(path)
    assert read_pdearena_ns(path, split="test").pde["split"] == "test"
    with pytest.raises(ConfigError, match="--split train: .* has no such group"):
        read_pdearena_ns(path, split="train")


def test_faults_name_the_key(tmp_path, layouts):
    path = layouts.pdearena(tmp_path / "a.h5", random_fields(), BUOYANCY)
    with h5py.File(path, "a") as f:
        del f["train/vy"]
    with pytest.raises(DataError, match="missing dataset '/train/vy'"):
        read_pdearena_ns(path)
    path = layouts.pdearena(tmp_path / "b.h5", random_fields(), BUOYANCY)
    with h5py.File(path, "a") as f:
        f["train/t"][1] += 1.0
    with pytest.raises(DataError, match="'/train/t' differs between samples"):
        read_pdearena_ns(path)
    fields = np.zeros((3, N, T, X, Y))
    fields[1, 2] = np.nan
    with pytest.raises(DataError, match=r"'/train/vx' holds NaN or Inf \(first in sample 2\)"):
        read_pdearena_ns(layouts.pdearena(tmp_path / "c.h5", fields, BUOYANCY)).read(0, N)
