"""Corrupt data files, as a fault injector makes them: every one reads back exactly or fails with one
DataError line, never another exception and never silently different data."""

import h5py
import numpy as np
import pytest

from opformer.data.store import read_arrays, read_fields, read_info, write_operator_dataset, write_trajectory_dataset
from opformer.errors import DataError


def _files(tmp_path):
    rng = np.random.default_rng(0)
    pairs = write_operator_dataset(tmp_path / "pairs.h5", rng.normal(size=(6, 32, 1)), rng.normal(size=(6, 32, 1)),
                                   pde={"name": "toy"}, solver={}, domain={"lengths": [1.0], "periodic": [True]},
                                   seed=0, input_channels=["a"], target_channels=["u"])
    traj = write_trajectory_dataset(tmp_path / "traj.h5", rng.normal(size=(3, 4, 8, 8, 1)), np.arange(4.0),
                                    pde={}, solver={}, domain={"lengths": [1.0, 1.0], "periodic": [True, True]},
                                    seed=0, channels=["w"])
    return [(pairs, lambda p: read_arrays(p, slice(None))), (traj, lambda p: (read_fields(p, slice(None)),))]


def chunk_of(path, position):
    """`sample S` (`, frame T`) of the stored chunk holding byte ``position`` of the pristine file, or ''."""
    for start, end, where in CHUNKS[path.name]:
        if start <= position < end:
            return where
    return ""


CHUNKS = {}


def _chunks(path):
    found = []
    with h5py.File(path, "r") as f:
        for name in ("input", "target", "fields"):
            if name in f:
                for i in range(f[name].id.get_num_chunks()):
                    info = f[name].id.get_chunk_info(i)
                    where = f"'/{name}' sample {info.chunk_offset[0]}" + (
                        f", frame {info.chunk_offset[1]}" if name == "fields" else "")
                    found.append((info.byte_offset, info.byte_offset + info.size, where))
    return found


def _same(a, b):
    return all((x is None and y is None) or np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["flip", "zero", "truncate"])
def test_every_corruption_reads_exactly_or_is_one_data_error(tmp_path, fault):
    outcomes = {"same": 0, "error": 0, "named": 0}
    for path, read in _files(tmp_path):
        CHUNKS[path.name] = _chunks(path)
        pristine = path.read_bytes()
        expected = read(path)
        for position in np.linspace(0, len(pristine) - 1, 24).astype(int):
            raw = bytearray(pristine)
            if fault == "flip":
                raw[position:position + 16] = bytes(b ^ 0xA5 for b in raw[position:position + 16])
                if chunk_of(path, position) != chunk_of(path, min(position + 15, len(raw) - 1)):
                    continue  # the 16 bytes run past their chunk: which error comes first is HDF5's order
            elif fault == "zero":
                raw[position:position + 64] = bytes(len(raw[position:position + 64]))
            else:
                del raw[max(position, 1):]
            path.write_bytes(bytes(raw))
            try:
                read_info(path)
                got = read(path)
            except DataError as exc:
                assert "\n" not in str(exc) and str(path) in str(exc), str(exc)
                if fault == "flip" and chunk_of(path, position):  # a damaged stored chunk: its sample is named
                    assert chunk_of(path, position) + " is corrupt" in str(exc), (position, str(exc))
                    outcomes["named"] += 1
                outcomes["error"] += 1
                continue
            assert _same(got, expected), f"{fault} at {position} of {path.name}: data changed silently"
            outcomes["same"] += 1
        path.write_bytes(pristine)
    assert outcomes["error"] > 0  # the faults did hit something
    if fault == "flip":
        assert outcomes["named"] > 0  # some flips fell inside a chunk and named its sample
