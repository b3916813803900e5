import re

import h5py
import numpy as np
import pytest

from opformer.data import store
from opformer.data.store import read_arrays, read_fields, read_info, write_operator_dataset, write_trajectory_dataset
from opformer.errors import DataError


def test_round_trip_is_self_describing(tmp_path, toy_writer):
    path = toy_writer(tmp_path / "a.h5", samples=5, n=32, seed=3)
    info = read_info(path)
    assert (info.kind, info.n_samples, info.spatial_shape, info.ndim) == ("operator", 5, (32,), 1)
    assert info.input_channels == ["u0"] and info.target_channels == ["u"]
    assert info.domain == {"lengths": [1.0], "periodic": [True]} and info.seed == 3
    x, y = read_arrays(path, slice(1, 3))
    assert x.shape == (2, 32, 1) and x.dtype == np.float32
    with h5py.File(path) as f:
        assert f["input"].chunks == (1, 32, 1)  # one sample per chunk: samples load without the whole file
        assert f.attrs["opformer_version"] and f.attrs["created"]
        np.testing.assert_array_equal(f["target"][1:3], y)


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch, toy_writer):
    path = toy_writer(tmp_path / "a.h5", samples=4, n=16)
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise RuntimeError("killed")

    monkeypatch.setattr(h5py.File, "create_dataset", boom)
    with pytest.raises(RuntimeError):
        toy_writer(path, samples=8, n=16)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.h5"]


def test_missing_and_corrupt_files_are_one_line_errors(tmp_path, toy_writer):
    with pytest.raises(DataError, match=r"nope\.h5: no such data file"):
        read_info(tmp_path / "nope.h5")
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not hdf5 at all")
    with pytest.raises(DataError, match=r"junk\.h5: not a readable HDF5 file"):
        read_info(junk)
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f["a"] = np.zeros(3)
    with pytest.raises(DataError, match=r"foreign\.h5: not an opformer data set \(missing attributes: format"):
        read_info(foreign)


def test_schema_violations_are_named(tmp_path, toy_writer, edit_h5):
    path = toy_writer(tmp_path / "a.h5", samples=3, n=16)
    with edit_h5(path) as f:
        del f["input"]
    with pytest.raises(DataError, match=r"a\.h5: missing dataset '/input'"):
        read_info(path)
    path = toy_writer(tmp_path / "b.h5", samples=3, n=16)
    with edit_h5(path) as f:
        f.attrs["domain"] = '{"lengths": [1.0]}'
    with pytest.raises(DataError, match=r"domain\['periodic'\] must be a list of 1 entries"):
        read_info(path)
    path = toy_writer(tmp_path / "c.h5", samples=3, n=16)
    with edit_h5(path) as f:
        f.attrs["format_version"] = store.FORMAT_VERSION + 1
    with pytest.raises(DataError, match="is not readable by this opformer"):
        read_info(path)


def test_nan_is_reported_with_its_sample(tmp_path, toy_writer, edit_h5):
    path = toy_writer(tmp_path / "a.h5", samples=6, n=16)
    with edit_h5(path) as f:
        f["target"][4, 3, 0] = np.nan
    read_arrays(path, slice(0, 4))  # the clean samples still load
    with pytest.raises(DataError, match=r"'/target' holds NaN or Inf \(first in sample 4\)"):
        read_arrays(path, slice(2, 6))


def test_writer_rejects_inconsistent_arrays(tmp_path, toy_writer):
    x = np.zeros((2, 8, 1))
    with pytest.raises(DataError, match="input grid"):
        write_operator_dataset(tmp_path / "x.h5", x, np.zeros((2, 4, 1)), pde={}, solver={},
                               domain={"lengths": [1], "periodic": [True]}, seed=0,
                               input_channels=["a"], target_channels=["b"])
    assert not (tmp_path / "x.h5").exists()


def test_a_flipped_byte_in_a_stored_sample_is_an_error_before_hdf5_reads_it(tmp_path):
    rng = np.random.default_rng(0)
    path = write_operator_dataset(tmp_path / "d.h5", rng.normal(size=(6, 8, 1)), rng.normal(size=(6, 8, 1)),
                                  pde={}, solver={}, domain={"lengths": [1.0], "periodic": [True]}, seed=0,
                                  input_channels=["a"], target_channels=["u"])
    traj = write_trajectory_dataset(tmp_path / "t.h5", rng.normal(size=(3, 4, 5, 5, 1)), np.arange(4.0), pde={},
                                    solver={}, domain={"lengths": [1.0, 1.0], "periodic": [True, True]}, seed=0,
                                    channels=["w"])
    for file, name, coord in ((path, "target", (3, 0, 0)), (traj, "fields", (2, 1, 0, 0, 0))):
        with h5py.File(file, "r") as f:
            chunk = f[name].id.get_chunk_info_by_coord(coord)
        raw = bytearray(file.read_bytes())
        raw[chunk.byte_offset + 2] ^= 0xFF  # one flipped byte inside the stored chunk
        file.write_bytes(bytes(raw))
    message = "corrupt or changed since it was written (its contents do not match its checksum)"
    with pytest.raises(DataError, match=r"d\.h5: " + re.escape(message)):
        read_arrays(path, slice(0, 6))
    with pytest.raises(DataError, match=r"t\.h5: " + re.escape(message)):
        read_fields(traj, slice(None))
