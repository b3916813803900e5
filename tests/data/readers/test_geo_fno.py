"""Geo-FNO's mesh benchmarks: files written in the publishers' axis orders convert to mesh samples equal to what
their loaders (thuml/Transolver's exp_elas.py, exp_airfoil.py, exp_pipe.py, exp_plas.py) make of them."""

import numpy as np
import pytest

from opformer.cli import main
from opformer.data.convert import convert_file
from opformer.data.store import read_info, read_mesh_samples
from opformer.errors import DataError
from opformer.meshes import WEIGHTS_ESTIMATED, WEIGHTS_LUMPED, cell_measures, structured_quads

from tests.foreign_formats import write_geo_fno_elasticity, write_geo_fno_plasticity, write_geo_fno_structured
from tests.imports.test_hub import one_line_error


def test_elasticity_is_a_point_cloud_with_the_coordinates_as_input(tmp_path):
    rng = np.random.default_rng(0)
    xy, sigma, rr = rng.random((3, 25, 2)), rng.random((3, 25)), rng.random((3, 42))
    paths = write_geo_fno_elasticity(tmp_path, xy, sigma, rr)
    out, count = convert_file("geo-fno", paths, tmp_path / "elas.h5")
    info = read_info(out)
    assert count == 3 and info.kind == "mesh" and info.input_channels == [] and info.target_channels == ["stress"]
    assert info.mesh["weights_from"] == WEIGHTS_ESTIMATED and info.mesh["cell_kind"] is None
    assert info.pde["name"] == "geo-fno-elasticity" and info.pde["published_splits"] == {"train": [0, 3], "test": [0, 3]}
    # the publisher's loader: XY permute(2, 0, 1) -> (N, points, 2); sigma permute(1, 0) -> (N, points)
    loaded_xy, loaded_s = np.load(paths[0]).transpose(2, 0, 1), np.load(paths[1]).transpose(1, 0)
    for k, sample in enumerate(read_mesh_samples(out, range(3))):
        assert np.array_equal(sample.points, loaded_xy[k].astype(np.float64))
        assert np.array_equal(sample.fields["stress"][:, 0], loaded_s[k])
        assert sample.settings["rr_07"] == pytest.approx(float(np.float32(rr[k, 7])))


@pytest.mark.parametrize("prefix, channel, name", [("NACA_Cylinder_", 4, "mach"), ("Pipe_", 0, "velocity_x")])
def test_structured_meshes_keep_their_shape_and_lumped_weights(tmp_path, prefix, channel, name):
    rng = np.random.default_rng(1)
    rows, cols = 7, 4
    theta, radius = np.meshgrid(np.linspace(0, 2.5, rows), 1 + np.arange(cols), indexing="ij")
    x = np.stack([radius * np.cos(theta) * (1 + 0.1 * k) for k in range(2)])
    y = np.stack([radius * np.sin(theta) for _ in range(2)])
    q = rng.random((2, 5, rows, cols))
    paths = write_geo_fno_structured(tmp_path, prefix, x, y, q)
    out, _ = convert_file("geo-fno", paths, tmp_path / "s.h5")
    info = read_info(out)
    assert info.target_channels == [name] and info.mesh["structured"] and info.mesh["cell_kind"] == "quad"
    assert info.mesh["weights_from"] == WEIGHTS_LUMPED and info.mesh["cells_from_shape"]
    # the publisher's loader: stack([X, Y], -1).reshape(N, -1, 2); Q[:, channel].reshape(N, -1)
    loaded_x = np.stack([np.load(paths[0]), np.load(paths[1])], -1).reshape(2, -1, 2)
    loaded_y = np.load(paths[2])[:, channel].reshape(2, -1)
    for k, sample in enumerate(read_mesh_samples(out, [0, 1])):
        assert sample.shape == (rows, cols) and np.array_equal(sample.points, loaded_x[k].astype(np.float64))
        assert np.array_equal(sample.fields[name][:, 0], loaded_y[k])
        assert np.array_equal(sample.cells, structured_quads((rows, cols)))
        area = cell_measures(sample.points, sample.cells, "quad").sum()  # the annulus sector's quads
        assert sample.weights.sum() == pytest.approx(area) and area > 0


@pytest.mark.slow  # the .mat file is read by a child process (seconds)
def test_plasticity_is_trajectories_on_the_unit_index_grid(tmp_path):
    rng = np.random.default_rng(2)
    n, rows, cols, frames = 2, 5, 3, 4
    die, output = rng.random((n, rows)), rng.random((n, rows, cols, frames, 4))
    path = write_geo_fno_plasticity(tmp_path / "plas_N987_T20.mat", die, output)
    out, _ = convert_file("geo-fno", [path], tmp_path / "p.h5")
    info = read_info(out)
    assert info.mesh["task"] == "trajectory" and info.times == tuple(np.linspace(0, 1, frames))
    assert info.input_channels == ["die"] and info.target_channels == ["position_0", "position_1",
                                                                        "displacement_0", "displacement_1"]
    # exp_plas.py: output.transpose(-2, -1)[k].reshape(-1, 4, T): point i * J + j, channel c, time t
    loaded = output.astype(np.float32).swapaxes(-2, -1).reshape(n, -1, 4, frames)
    for k, sample in enumerate(read_mesh_samples(out, [0, 1])):
        assert sample.shape == (rows, cols) and sample.weights.sum() == pytest.approx(1.0)
        assert np.array_equal(sample.fields["position"], loaded[k, :, :2].transpose(2, 0, 1))
        assert np.array_equal(sample.fields["displacement"], loaded[k, :, 2:].transpose(2, 0, 1))
        assert np.array_equal(sample.fields["die"][2, :, 0], np.repeat(die[k].astype(np.float32), cols))
        assert np.allclose(sample.points.reshape(rows, cols, 2)[:, 0, 0], np.linspace(0, 1, rows))


def test_bad_files_are_one_line_errors(capsys, tmp_path):
    rng = np.random.default_rng(3)
    xy, sigma = rng.random((3, 25, 2)), rng.random((3, 25))
    paths = write_geo_fno_elasticity(tmp_path, xy, sigma)
    out = tmp_path / "o.h5"
    np.save(paths[1], np.zeros((24, 3), np.float32))
    one_line_error(capsys, ["convert", "geo-fno", *paths, "--out", out], "Random_UnitCell_sigma_10.npy", "(25, 3)")
    one_line_error(capsys, ["convert", "geo-fno", paths[0], "--out", out], "needs a file Random_UnitCell_sigma")
    pipe = write_geo_fno_structured(tmp_path, "Pipe_", np.zeros((1, 3, 3)), np.zeros((1, 3, 3)), np.zeros((1, 1, 3, 3)))
    one_line_error(capsys, ["convert", "geo-fno", paths[0], pipe[0], "--out", out], "not a file of Geo-FNO's")
    one_line_error(capsys, ["convert", "geo-fno", tmp_path / "data.npy", "--out", out], "not a Geo-FNO file name")
    sigma[2, 4] = np.nan
    paths = write_geo_fno_elasticity(tmp_path, xy, sigma)
    one_line_error(capsys, ["convert", "geo-fno", *paths, "--out", out], "NaN or Inf (first in sample 2)")
    assert not out.exists()


def test_the_command_converts_the_first_samples(capsys, tmp_path):
    rng = np.random.default_rng(4)
    paths = write_geo_fno_elasticity(tmp_path, rng.random((4, 12, 2)), rng.random((4, 12)))
    assert main(["convert", "geo-fno", *map(str, paths), "--out", str(tmp_path / "e.h5"), "--samples", "2"]) == 0
    assert "wrote 2 samples" in capsys.readouterr().out and read_info(tmp_path / "e.h5").n_samples == 2
    with pytest.raises(DataError):
        read_mesh_samples(tmp_path / "e.h5", [2])
