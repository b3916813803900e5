"""Mesh data files: samples of varying point counts round-trip exactly, verify, and refuse bad input and damaged
copies with one line each."""

import h5py
import numpy as np
import pytest
from scipy.spatial import Delaunay

from opformer.data.store import MeshFile, read_info, read_mesh_samples, verify_file, write_mesh_dataset
from opformer.errors import ConfigError, DataError
from opformer.meshes import WEIGHTS_ESTIMATED, WEIGHTS_LUMPED, MeshSample


def mesh_samples(counts=(30, 45, 12), seed=0, times=None):
    """Random triangulations of the unit square with fields a (1 channel), u (2 channels) and a setting."""
    rng = np.random.default_rng(seed)
    samples = []
    for n in counts:
        points = np.concatenate([[[0, 0], [1, 0], [0, 1], [1, 1]], rng.random((n - 4, 2))])
        a, u = np.sin(points[:, 0]), np.stack([points[:, 1], points[:, 0] * points[:, 1]], 1)
        if times is not None:
            a = np.stack([a * t for t in times])
            u = np.stack([u + t for t in times])
        samples.append(MeshSample(points=points, fields={"a": a, "u": u}, cells=Delaunay(points).simplices,
                                  settings={"radius": float(n) / 10}))
    return samples


def write(path, samples, **kw):
    options = {"inputs": ["a"], "targets": ["u"], "pde": "toy", "settings": {"nu": 0.1}, **kw}
    return write_mesh_dataset(path, samples, **options)


def test_varying_point_counts_round_trip_exactly(tmp_path):
    samples = mesh_samples()
    path = write(tmp_path / "m.h5", samples)
    info = verify_file(path)
    assert info.kind == "mesh" and info.n_samples == 3 and info.mesh["task"] == "operator"
    assert info.input_channels == ["a"] and info.target_channels == ["u_0", "u_1"]
    assert info.mesh["points"] == 87 and info.mesh["cell_kind"] == "triangle"
    assert info.mesh["weights_from"] == WEIGHTS_LUMPED and info.pde == {"name": "toy", "nu": 0.1}
    assert info.domain["lengths"] == pytest.approx([1.0, 1.0]) and info.domain["origin"] == [0.0, 0.0]
    back = read_mesh_samples(path, [2, 0, 1])
    for got, want in zip(back, [samples[2], samples[0], samples[1]]):
        assert np.array_equal(got.points, want.points) and np.array_equal(got.weights, want.weights)
        assert np.array_equal(got.cells, want.cells) and got.cell_kind == "triangle"
        assert np.array_equal(got.fields["a"], want.fields["a"][:, None].astype(np.float32))
        assert np.array_equal(got.fields["u"], want.fields["u"].astype(np.float32))
        assert got.settings == want.settings and got.shape is None
    with MeshFile(path) as data:
        assert data.point_counts().tolist() == [30, 45, 12]


def test_trajectories_structured_shapes_and_point_clouds_round_trip(tmp_path):
    times = [0.0, 0.5, 1.0]
    samples = mesh_samples((20, 16), times=times)
    path = write(tmp_path / "t.h5", samples, times=times)
    info = read_info(path)
    assert info.mesh["task"] == "trajectory" and info.times == tuple(times)
    got = read_mesh_samples(path, [1])[0]
    assert got.fields["u"].shape == (3, 16, 2)
    assert np.array_equal(got.fields["u"], samples[1].fields["u"].astype(np.float32))
    # a structured 4 x 5 point cloud without cells: estimated weights, flagged; the input is the coordinates alone
    x = np.stack(np.meshgrid(np.arange(4.0), np.arange(5.0), indexing="ij"), -1).reshape(-1, 2)
    cloud = [MeshSample(points=x + k, fields={"s": x[:, 0] * k}, shape=(4, 5)) for k in range(2)]
    path = write_mesh_dataset(tmp_path / "c.h5", cloud, inputs=[], targets=["s"], pde="cloud", settings={})
    info = read_info(path)
    assert info.mesh["weights_from"] == WEIGHTS_ESTIMATED and info.input_channels == [] and info.mesh["structured"]
    got = read_mesh_samples(path, [1])[0]
    assert got.shape == (4, 5) and got.weights_from == WEIGHTS_ESTIMATED and got.cells is None
    assert np.array_equal(got.weights, cloud[1].weights) and "s" in got.fields and len(got.fields) == 1


@pytest.mark.parametrize("change, message", [
    (lambda s: s.fields.pop("u"), "sample 1: no field 'u'"),
    (lambda s: s.fields.__setitem__("u", np.full((len(s.points), 2), np.nan)), "sample 1: field 'u' holds NaN"),
    (lambda s: s.fields.__setitem__("u", np.zeros((len(s.points), 3))), "sample 1: field 'u' has 3 channels"),
    (lambda s: setattr(s, "cells", None), "sample 1: cells"),
    (lambda s: setattr(s, "weights_from", WEIGHTS_ESTIMATED), "sample 1: weights knn-estimate"),
    (lambda s: setattr(s, "cells", s.cells + 100), "sample 1: cells of shape"),
])
def test_bad_samples_are_one_line_errors_and_nothing_is_written(tmp_path, change, message):
    samples = mesh_samples()
    change(samples[1])
    with pytest.raises(DataError) as exc:
        write(tmp_path / "m.h5", samples)
    assert message in str(exc.value) and "\n" not in str(exc.value)
    assert list(tmp_path.iterdir()) == []  # atomic: neither the file nor a temporary


def test_an_existing_file_is_replaced_only_with_force(tmp_path):
    path = write(tmp_path / "m.h5", mesh_samples())
    with pytest.raises(ConfigError, match="already exists"):
        write(path, mesh_samples())
    write(path, mesh_samples((10,)), force=True)
    assert read_info(path).n_samples == 1


def test_a_grid_file_is_not_mesh_data(tmp_path):
    from opformer.data.store import write_operator_dataset
    grid = write_operator_dataset(tmp_path / "g.h5", np.zeros((2, 8, 1)), np.zeros((2, 8, 1)), pde={}, solver={},
                                  domain={"lengths": [1.0], "periodic": [True]}, seed=0, input_channels=["a"],
                                  target_channels=["u"])
    with pytest.raises(DataError, match="not mesh data"):
        MeshFile(grid)


def _read_all(path):
    return [(s.points, s.weights, s.cells, s.fields["a"], s.fields["u"]) for s in read_mesh_samples(path, range(3))]


def _chunk(path, name, sample):
    """The byte range of the stored chunk of ``/name`` holding sample ``sample``'s first row."""
    with h5py.File(path, "r") as f:
        row = int(f["offsets"][sample])
        for i in range(f[name].id.get_num_chunks()):
            info = f[name].id.get_chunk_info(i)
            if info.chunk_offset[0] <= row < info.chunk_offset[0] + f[name].chunks[0]:
                return info.byte_offset, info.size


def test_a_flipped_byte_in_a_chunk_names_the_sample(tmp_path):
    path = write(tmp_path / "m.h5", mesh_samples((300, 400, 280)))
    start, size = _chunk(path, "point_target", 1)
    raw = bytearray(path.read_bytes())
    raw[start + size // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError) as exc:
        read_mesh_samples(path, [1])
    assert str(exc.value).startswith(f"{path}: '/point_target' sample 1 is corrupt") and "\n" not in str(exc.value)
    with pytest.raises(DataError, match="do not match its checksum"):
        verify_file(path)


@pytest.mark.parametrize("fault", ["flip", "zero", "truncate"])
def test_every_damaged_copy_reads_exactly_or_is_one_data_error(tmp_path, fault):
    path = write(tmp_path / "m.h5", mesh_samples())
    pristine, expected = path.read_bytes(), _read_all(path)
    outcomes = {"same": 0, "error": 0}
    for position in np.linspace(600, len(pristine) - 1, 40).astype(int):
        raw = bytearray(pristine)
        if fault == "truncate":
            raw = raw[:position]
        else:
            raw[position] = raw[position] ^ 0xFF if fault == "flip" else 0
        path.write_bytes(bytes(raw))
        try:
            got = _read_all(path)
        except DataError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(str(path))
            outcomes["error"] += 1
        else:
            assert all(np.array_equal(a, b) for x, y in zip(got, expected) for a, b in zip(x, y))
            outcomes["same"] += 1
    assert outcomes["error"] > 0
