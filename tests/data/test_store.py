import pickle
import re
from pathlib import Path

import h5py
import numpy as np
import pytest

from opformer.data import store
from opformer.data.store import integrity, schema, write
from opformer.data.store import (chunk_shape, open_dataset_file, read_arrays, read_block, read_fields, read_info,
                                 verify_file, write_operator_dataset, write_trajectory_dataset)
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


def test_one_channel_may_leave_out_its_axis_and_a_wrong_channel_axis_names_the_shape(tmp_path):
    """The one rule of opformer predict and Forecaster.predict: (sample, *grid) is one channel."""
    x, y = np.arange(16.0).reshape(2, 8), np.ones((2, 8, 1))
    common = {"pde": {}, "solver": {}, "domain": {"lengths": [1.0], "periodic": [True]}, "seed": 0}
    path = write_operator_dataset(tmp_path / "one.h5", x, y, input_channels=["a"], target_channels=["u"], **common)
    inputs, targets = read_arrays(path, slice(0, 2))
    np.testing.assert_array_equal(inputs, x[..., None]) and np.testing.assert_array_equal(targets, y)
    with pytest.raises(DataError, match=re.escape("two.h5: 'input' has shape (2, 8), expected (sample, 1 grid axes, "
                                                  "2) for the channels ['a', 'b']") + "$"):
        write_operator_dataset(tmp_path / "two.h5", x, y, input_channels=["a", "b"], target_channels=["u"], **common)
    with pytest.raises(DataError, match=re.escape("'target' has shape (2, 8, 3), expected (sample, 1 grid axes, 1) "
                                                  "for the channels ['u'] or (sample, 1 grid axes) for one channel")):
        write_operator_dataset(tmp_path / "three.h5", x, np.ones((2, 8, 3)), input_channels=["a"],
                               target_channels=["u"], **common)
    fields = np.random.default_rng(0).normal(size=(2, 3, 4, 4))
    path = write_trajectory_dataset(tmp_path / "t.h5", [fields[:1], fields[1:]], np.arange(3.0), channels=["w"],
                                    **{**common, "domain": {"lengths": [1.0, 1.0], "periodic": [True, True]}})
    np.testing.assert_array_equal(read_fields(path, slice(0, 2))[..., 0], fields.astype(np.float32))
    with pytest.raises(DataError, match=re.escape("'fields' has shape (2, 3, 4, 4), expected (sample, time, 2 grid "
                                                  "axes, 2) for the channels ['w', 'p']")):
        write_trajectory_dataset(tmp_path / "t2.h5", fields, np.arange(3.0), channels=["w", "p"],
                                 **{**common, "domain": {"lengths": [1.0, 1.0], "periodic": [True, True]}})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.h5", "t.h5"]


def _pairs(path, samples=6, n=8, **kwargs):
    rng = np.random.default_rng(0)
    return write_operator_dataset(path, rng.normal(size=(samples, n, 1)), rng.normal(size=(samples, n, 1)),
                                  pde=kwargs.pop("pde", {}), solver={}, domain={"lengths": [1.0], "periodic": [True]},
                                  seed=0, input_channels=["a"], target_channels=["u"], **kwargs)


def _trajectories(path, samples=3, frames=4, n=5):
    rng = np.random.default_rng(1)
    return write_trajectory_dataset(path, rng.normal(size=(samples, frames, n, n, 1)), np.arange(float(frames)),
                                    pde={}, solver={}, domain={"lengths": [1.0, 1.0], "periodic": [True, True]},
                                    seed=0, channels=["w"])


def _flip(path, offset, mask=0xFF):
    raw = bytearray(path.read_bytes())
    raw[offset] ^= mask
    path.write_bytes(bytes(raw))


def _chunk_offset(path, name, coord):
    with h5py.File(path, "r") as f:
        return f[name].id.get_chunk_info_by_coord(coord).byte_offset


def _no_whole_file_hash(monkeypatch):
    def refuse(path):
        raise AssertionError(f"{path} was hashed whole")
    monkeypatch.setattr(integrity, "file_digest", refuse)


def test_new_files_check_every_chunk_and_every_header(tmp_path):
    pairs, traj = _pairs(tmp_path / "d.h5"), _trajectories(tmp_path / "t.h5")
    for path in (pairs, traj):
        raw = path.read_bytes()
        assert raw.startswith(store.CHECKSUM_MAGIC) and raw[512:520] == b"\x89HDF\r\n\x1a\n"
        assert raw[520] >= 2  # superblock v2+: HDF5 checks the checksums of its metadata (v0, the default, has none)
        with h5py.File(path, "r") as f:
            for name, dataset in f.items():
                assert dataset.fletcher32 and dataset.chunks is not None, name  # /times too: no unchecked data
            for key in f.attrs:  # fixed-length text: in the checked object header, not HDF5's unchecked global heap
                dtype = f.attrs.get_id(key).dtype
                assert dtype.kind != "O" and h5py.check_string_dtype(dtype) is None or \
                    h5py.check_string_dtype(dtype).length is not None, key
            assert store.ATTRS_DIGEST in f.attrs
    with h5py.File(traj, "r") as f:
        assert f["fields"].chunks == (1, 1, 5, 5, 1) and f["times"].chunks == (4,)
    assert read_info(traj).times == (0.0, 1.0, 2.0, 3.0)
    assert store.ATTRS_DIGEST not in read_info(pairs).extra


def test_a_flipped_byte_in_a_chunk_names_the_sample_and_frame_when_read(tmp_path, monkeypatch):
    pairs, traj = _pairs(tmp_path / "d.h5"), _trajectories(tmp_path / "t.h5")
    clean_x, clean_y = read_arrays(pairs, slice(None))
    clean_fields = read_fields(traj, slice(None))
    _flip(pairs, _chunk_offset(pairs, "target", (3, 0, 0)) + 2)
    _flip(traj, _chunk_offset(traj, "fields", (2, 1, 0, 0, 0)) + 2)
    _no_whole_file_hash(monkeypatch)  # opening and reading check chunks, never the whole file
    assert read_info(pairs).n_samples == 6 and read_info(traj).n_samples == 3
    with pytest.raises(DataError, match=r"d\.h5: '/target' sample 3 is corrupt \(its checksum does not match\)"):
        read_arrays(pairs, slice(0, 6))
    with pytest.raises(DataError, match=r"t\.h5: '/fields' sample 2, frame 1 is corrupt \(its checksum does not "):
        read_fields(traj, slice(None))
    with pytest.raises(DataError, match=r"'/fields' sample 2, frame 1 is corrupt"):
        read_block(traj, "fields", (slice(1, 3), slice(1, 3)))
    # what the damage does not touch reads exactly as written
    x, y = read_arrays(pairs, slice(4, 6))
    np.testing.assert_array_equal(y, clean_y[4:6])
    np.testing.assert_array_equal(read_block(traj, "fields", (2, slice(2, 4))), clean_fields[2, 2:4])
    np.testing.assert_array_equal(read_block(traj, "fields", (slice(0, 2),)), clean_fields[:2])
    monkeypatch.undo()
    for path in (pairs, traj):
        with pytest.raises(DataError, match=re.escape(f"{path}: corrupt or changed since it was written (its "
                                                      "contents do not match its checksum)")):
            verify_file(path)


def test_a_flipped_byte_in_the_metadata_is_one_line_naming_the_file(tmp_path):
    pristine = _pairs(tmp_path / "d.h5").read_bytes()
    offsets = {"superblock": 512 + 12, "object header": pristine.index(b"OHDR", 600) + 20,
               "attribute text": pristine.index(b'"periodic": [true]') + 2,
               "chunk index": pristine.index(b"FADB") + 20}
    for where, offset in offsets.items():
        path = tmp_path / f"{where.replace(' ', '_')}.h5"
        path.write_bytes(pristine)
        _flip(path, offset, 0x01)
        with pytest.raises(DataError) as caught:
            read_info(path)
            read_arrays(path, slice(None))
        assert str(path) in str(caught.value) and "\n" not in str(caught.value), where


def test_a_large_attribute_outside_hdf5s_checked_metadata_is_checked_by_its_digest(tmp_path):
    per_sample = [round(0.001 * i, 3) for i in range(20000)]  # 150 kB of JSON: HDF5 keeps it unchecked (> ~4 KiB)
    path = _pairs(tmp_path / "d.h5", pde={"name": "toy", "per_sample": {"b": per_sample}})
    assert read_info(path).pde["per_sample"]["b"] == per_sample
    raw = bytearray(path.read_bytes())
    offset = raw.index(b"12.345")
    raw[offset] = ord("7")  # 12.345 -> 72.345: still valid JSON, a silently different value without the digest
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=r"d\.h5: its attributes do not match their checksum 'attrs_sha256'"):
        read_info(path)


def _write_legacy(path):
    """A data file as opformer wrote it before chunk checksums: HDF5's default (earliest) format, no fletcher32,
    variable-length text attributes, the SHA-256 in the user block."""
    rng = np.random.default_rng(0)
    with h5py.File(path, "w", userblock_size=store.USERBLOCK) as f:
        for name in ("input", "target"):
            f.create_dataset(name, data=rng.normal(size=(6, 16, 1)).astype(np.float32), chunks=(1, 16, 1))
        attrs = {"format": "opformer", "format_version": 1, "kind": "operator", "seed": 0, "opformer_version": "0",
                 "created": "2025-01-01T00:00:00+00:00", "pde": "{}", "solver": "{}",
                 "domain": '{"lengths": [1.0], "periodic": [true]}', "input_channels": '["a"]',
                 "target_channels": '["u"]'}
        for key, value in attrs.items():
            f.attrs[key] = value
    with open(path, "r+b") as f:
        f.write(store.CHECKSUM_MAGIC + integrity.file_digest(path).encode())
    return path


def test_a_file_without_chunk_checksums_is_hashed_whole_once_per_process(tmp_path, monkeypatch):
    path = _write_legacy(tmp_path / "old.h5")
    hashed = []
    digest = integrity.file_digest
    monkeypatch.setattr(integrity, "file_digest", lambda p: hashed.append(p) or digest(p))
    read_info(path)
    x, y = read_arrays(path, slice(0, 6))
    with open_dataset_file(path) as data:
        data.read("target", (slice(2, 4),))
    assert len(hashed) == 1 and x.shape == (6, 16, 1)
    _flip(path, _chunk_offset(path, "target", (4, 0, 0)) + 3)  # unchecked by HDF5: the whole-file hash finds it
    with pytest.raises(DataError, match=r"old\.h5: corrupt or changed since it was written \(its contents do not "
                                        r"match its checksum\)"):
        read_arrays(path, slice(0, 2))
    assert len(hashed) == 2  # a changed file is hashed again


def test_convert_opformer_rewrites_an_old_file_with_chunk_checksums(tmp_path, monkeypatch):
    from opformer.data.convert import convert_file

    old = _write_legacy(tmp_path / "old.h5")
    new, count = convert_file("opformer", old, tmp_path / "new.h5")
    assert count == 6 and verify_file(new).seed == 0
    for name, a, b in zip(("input", "target"), read_arrays(old, slice(None)), read_arrays(new, slice(None))):
        np.testing.assert_array_equal(a, b, err_msg=name)
    with h5py.File(new, "r") as f:
        assert f["target"].fletcher32
    assert read_info(new).domain == read_info(old).domain and read_info(new).input_channels == ["a"]
    _no_whole_file_hash(monkeypatch)
    read_arrays(new, slice(None))


def test_chunk_shape_keeps_frames_whole_up_to_the_limit_then_cuts_the_first_spatial_axis():
    mib = 2**20
    assert chunk_shape((1000, 8192, 1), 1) == (1, 8192, 1)  # an operator sample
    assert chunk_shape((100, 50, 64, 64, 1), 2) == (1, 1, 64, 64, 1)  # a trajectory frame
    assert chunk_shape((20, 10, 1024, 1024, 1), 2) == (1, 1, 1024, 1024, 1)  # exactly 4 MiB: whole
    assert chunk_shape((20, 10, 1024, 1025, 1), 2) == (1, 1, 512, 1025, 1)  # just above: two equal slabs
    frame = chunk_shape((10, 20, 128, 128, 128, 3), 2)
    assert frame == (1, 1, 19, 128, 128, 3) and 4 * np.prod(frame) <= 4 * mib  # 24 MiB frame -> 7 slabs of 3.6 MiB
    assert chunk_shape((2, 3, 64, 4096, 4096, 1), 2) == (1, 1, 1, 256, 4096, 1)  # a 64 MiB plane: the next axis too
    assert chunk_shape((5, 3, 8, 100, 8, 300), 2, limit=2000) == (1, 1, 1, 1, 1, 300)  # 1200 bytes of channels
    assert chunk_shape((5, 3, 8, 100, 8, 300), 2, limit=1000) == (1, 1, 1, 1, 1, 300)  # channels never cut
    assert chunk_shape((7,), 0, itemsize=8) == (7,)  # /times
    for shape, leading in (((3, 5, 300, 300, 300, 2), 2), ((4, 1000, 1000, 3), 1), ((9, 4, 33, 70, 5), 2)):
        chunk = chunk_shape(shape, leading, limit=mib)
        assert 4 * np.prod(chunk) <= mib and chunk[:leading] == (1,) * leading and chunk[-1] == shape[-1]
        assert -(-shape[leading] // chunk[leading]) * chunk[leading] - shape[leading] < chunk[leading]  # no empty slab


def test_a_3d_frame_above_the_limit_is_stored_in_slabs_and_reads_back(tmp_path, monkeypatch):
    monkeypatch.setattr(schema, "MAX_CHUNK_BYTES", 2 * 6 * 6 * 2 * 4)  # a chunk holds 2 rows of a (12, 6, 6, 2) frame
    rng = np.random.default_rng(2)
    fields = rng.normal(size=(2, 3, 12, 6, 6, 2)).astype(np.float32)
    path = write_trajectory_dataset(tmp_path / "t3.h5", fields, np.arange(3.0), pde={}, solver={},
                                    domain={"lengths": [1.0] * 3, "periodic": [True] * 3}, seed=0, channels=["u", "v"])
    with h5py.File(path, "r") as f:
        assert f["fields"].chunks == (1, 1, 2, 6, 6, 2)
    np.testing.assert_array_equal(read_fields(path, slice(None)), fields)
    _flip(path, _chunk_offset(path, "fields", (1, 2, 8, 0, 0, 0)) + 5)
    with pytest.raises(DataError, match=r"'/fields' sample 1, frame 2 is corrupt"):
        read_fields(path, slice(None))
    np.testing.assert_array_equal(read_block(path, "fields", (1, 2, slice(0, 8))), fields[1, 2, :8])


def test_blocks_are_written_a_piece_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(write, "WRITE_BYTES", 3 * 5 * 5 * 4 * 4)  # three samples of (4, 5, 5, 1) per piece
    rng = np.random.default_rng(3)
    blocks = [rng.normal(size=(k, 4, 5, 5, 1)) for k in (4, 1, 6)]
    np.save(tmp_path / "b.npy", blocks[2])
    blocks[2] = np.load(tmp_path / "b.npy", mmap_mode="r")
    written = []
    original = write._write_blocks
    monkeypatch.setattr(h5py.Dataset, "__setitem__",
                        lambda self, key, value, setitem=h5py.Dataset.__setitem__: written.append(len(value))
                        or setitem(self, key, value))
    path = write_trajectory_dataset(tmp_path / "t.h5", blocks, np.arange(4.0), pde={}, solver={},
                                    domain={"lengths": [1.0, 1.0], "periodic": [True, True]}, seed=0, channels=["w"])
    assert original is write._write_blocks and written[:4] == [3, 1, 1, 3] and max(written[:-1]) <= 3
    np.testing.assert_array_equal(read_fields(path, slice(None)),
                                  np.concatenate(blocks).astype(np.float32))


def test_an_open_file_reads_many_times_and_reopens_in_another_process(tmp_path):
    path = _trajectories(tmp_path / "t.h5")
    fields = read_fields(path, slice(None))
    with open_dataset_file(path, cache_bytes=8 * 2**20) as data:
        assert data.file.id.get_access_plist().get_cache()[2] == 8 * 2**20
        windows = [data.read("fields", (s, slice(t, t + 2))) for s in range(3) for t in range(3)]
        assert data.info().n_samples == 3
        copy = pickle.loads(pickle.dumps(data))
    np.testing.assert_array_equal(windows[4], fields[1, 1:3])
    np.testing.assert_array_equal(copy.read("fields", (2,)), fields[2])
    copy.close()
    with pytest.raises(DataError, match=r"nope\.h5: no such data file"):
        open_dataset_file(tmp_path / "nope.h5")


def test_further_sample_first_datasets_are_stored_beside_and_checked(tmp_path):
    x, y = np.zeros((3, 4, 1)), np.ones((3, 4, 1))
    common = {"pde": {}, "solver": {}, "domain": {"lengths": [1.0], "periodic": [True]}, "seed": 0,
              "input_channels": ["a"], "target_channels": ["u"]}
    bound = np.array([0.1, np.inf, 0.3])
    path = store.write_operator_dataset(tmp_path / "p.h5", x, y, datasets={"bound": bound}, **common)
    assert read_info(path).n_samples == 3 and store.verify_file(path)
    with h5py.File(path) as f:
        assert f["bound"].dtype == np.float32 and np.array_equal(f["bound"][:], bound.astype(np.float32))
    for name, value in (("target", bound), ("bound", bound[:2])):
        with pytest.raises(DataError, match=f"further dataset '{name}' must have a name of its own and 3 samples"):
            store.write_operator_dataset(tmp_path / "q.h5", x, y, datasets={name: value}, **common)
    assert not (tmp_path / "q.h5").exists()


FIXTURES = Path(__file__).parent.parent / "fixtures" / "store"


def test_files_written_by_the_previous_layout_of_the_store_still_read():
    """tests/fixtures/store/ holds files written by the single-module store (operator and trajectory, one with a
    further dataset), and contents.npz their arrays."""
    want = np.load(FIXTURES / "contents.npz")
    operator, trajectory = FIXTURES / "operator.h5", FIXTURES / "trajectory.h5"
    info = verify_file(operator)
    assert (info.kind, info.n_samples, info.spatial_shape, info.seed) == ("operator", 3, (8, 8), 7)
    assert info.input_channels == ["a"] and info.target_channels == ["u", "v"]
    assert info.domain["grid"] == ["periodic", "nodes"]
    x, y = read_arrays(operator, slice(None))
    np.testing.assert_array_equal(x, want["input"])
    np.testing.assert_array_equal(y, want["target"])
    info = verify_file(trajectory)
    assert (info.kind, info.n_samples, info.spatial_shape, info.times) == ("trajectory", 2, (6,), (0.0, 0.5, 1.0, 1.5))
    np.testing.assert_array_equal(read_fields(trajectory, slice(None)), want["fields"])
    assert read_block(trajectory, "bound").shape == (2, 3)
