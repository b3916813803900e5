"""Users' meshes through meshio: VTU, XDMF and Gmsh MSH files that meshio writes round-trip into mesh data files;
mismatched meshes, missing fields and NaN are one-line errors naming the file and the field."""

import sys

import numpy as np
import pytest
from scipy.spatial import Delaunay

from opformer.data.convert import convert_file
from opformer.data.store import read_info, read_mesh_samples
from opformer.errors import ConfigError
from opformer.meshes import WEIGHTS_LUMPED, lumped_weights

from tests.imports.test_hub import one_line_error

meshio = pytest.importorskip("meshio")


def square(n, seed=0):
    """A triangulated unit square with corners and n random points; points in 3D with z = 0 as meshio keeps 2D."""
    points = np.concatenate([[[0, 0], [1, 0], [0, 1], [1, 1]], np.random.default_rng(seed).random((n, 2))])
    return points, Delaunay(points).simplices


def write(path, points, cells, kind="triangle", **fields):
    mesh = meshio.Mesh(np.c_[points, np.zeros(len(points))], [(kind, cells)], point_data=fields)
    meshio.write(path, mesh, file_format="gmsh22" if str(path).endswith(".msh") else None)
    return path


@pytest.mark.parametrize("suffix", [".vtu", ".xdmf", ".msh"])
def test_files_meshio_writes_round_trip(tmp_path, suffix):
    files, meshes = [], []
    for k, n in enumerate((12, 20)):
        points, cells = square(n, k)
        a, u = np.sin(points[:, 0]) + k, np.c_[points[:, 1], points[:, 0] * points[:, 1], points[:, 0]]
        files.append(write(tmp_path / f"s{k}{suffix}", points, cells, a=a, u=u))
        meshes.append((points, cells, a, u))
    out, count = convert_file("mesh", files, tmp_path / "m.h5", inputs=["a"], targets=["u"])
    info = read_info(out)
    assert count == 2 and info.kind == "mesh" and info.mesh["dim"] == 2 and info.mesh["cell_kind"] == "triangle"
    assert info.input_channels == ["a"] and info.target_channels == ["u_0", "u_1", "u_2"]
    assert info.mesh["weights_from"] == WEIGHTS_LUMPED
    for sample, (points, cells, a, u) in zip(read_mesh_samples(out, [0, 1]), meshes):
        assert np.array_equal(sample.points, points) and np.array_equal(sample.cells, cells)
        assert np.array_equal(sample.fields["a"][:, 0], a.astype(np.float32))
        assert np.array_equal(sample.fields["u"], u.astype(np.float32))
        assert np.allclose(sample.weights, lumped_weights(points, cells, "triangle"))
        assert sample.weights.sum() == pytest.approx(1.0)


def test_mixed_triangles_and_quads_become_triangles_and_3d_tetrahedra_are_kept(tmp_path):
    points = np.array([[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1.0]])
    mesh = meshio.Mesh(np.c_[points, np.zeros(6)], [("quad", np.array([[0, 1, 4, 3]])), ("triangle", np.array(
        [[1, 2, 5], [1, 5, 4]]))], point_data={"u": points[:, 0]})
    meshio.write(tmp_path / "mixed.vtu", mesh)
    out, _ = convert_file("mesh", [tmp_path / "mixed.vtu"], tmp_path / "m.h5", targets=["u"])
    sample = read_mesh_samples(out, [0])[0]
    assert sample.cell_kind == "triangle" and len(sample.cells) == 4 and sample.weights.sum() == pytest.approx(2.0)
    cube = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]])
    meshio.write(tmp_path / "tet.vtu", meshio.Mesh(cube, [("tetra", np.array([[0, 1, 2, 3]]))],
                                                   point_data={"u": cube[:, 2]}))
    out, _ = convert_file("mesh", [tmp_path / "tet.vtu"], tmp_path / "t.h5", targets=["u"])
    sample = read_mesh_samples(out, [0])[0]
    assert sample.points.shape == (4, 3) and sample.cell_kind == "tetra" and sample.weights.sum() == pytest.approx(1 / 6)


def test_trajectories_from_folders_of_frames_and_xdmf_time_series(tmp_path, monkeypatch):
    points, cells = square(10)
    for run in ("run_a", "run_b"):
        (tmp_path / run).mkdir()
        for t in (0, 1, 2, 10):
            write(tmp_path / run / f"step_{t}.vtu", points, cells, u=points[:, 0] * t + (run == "run_b"))
    files = sorted((tmp_path / "run_a").iterdir()) + sorted((tmp_path / "run_b").iterdir())
    out, count = convert_file("mesh", files, tmp_path / "f.h5", kind="trajectory", targets=["u"])
    info = read_info(out)
    assert count == 2 and info.mesh["task"] == "trajectory" and info.times == (0.0, 1.0, 2.0, 3.0)
    run_b = read_mesh_samples(out, [1])[0]
    assert np.allclose(run_b.fields["u"][3, :, 0], points[:, 0] * 10 + 1)  # step_10 after step_2
    monkeypatch.chdir(tmp_path)  # meshio's TimeSeriesWriter puts its .h5 in the working folder
    with meshio.xdmf.TimeSeriesWriter(tmp_path / "series.xdmf") as writer:
        writer.write_points_cells(np.c_[points, np.zeros(len(points))], [("triangle", cells)])
        for t in (0.0, 0.25, 0.5):
            writer.write_data(t, point_data={"u": points[:, 1] * t})
    out, _ = convert_file("mesh", [tmp_path / "series.xdmf"], tmp_path / "x.h5", kind="trajectory", targets=["u"])
    assert read_info(out).times == (0.0, 0.25, 0.5)
    assert np.allclose(read_mesh_samples(out, [0])[0].fields["u"][2, :, 0], points[:, 1] * 0.5)


def test_mismatched_meshes_missing_fields_and_nan_are_one_line_errors(capsys, tmp_path):
    points, cells = square(10)
    good = write(tmp_path / "good.vtu", points, cells, u=points[:, 0])
    out = tmp_path / "o.h5"
    one_line_error(capsys, ["convert", "mesh", good, "--targets", "p", "--out", out], "good.vtu", "no point field 'p'")
    bad = points[:, 0].copy()
    bad[3] = np.nan
    nan = write(tmp_path / "nan.vtu", points, cells, u=bad)
    one_line_error(capsys, ["convert", "mesh", good, nan, "--targets", "u", "--out", out], "nan.vtu",
             "point field 'u' holds NaN or Inf")
    (tmp_path / "run").mkdir()
    write(tmp_path / "run" / "f0.vtu", points, cells, u=points[:, 0])
    other, other_cells = square(11, 5)
    write(tmp_path / "run" / "f1.vtu", other, other_cells, u=other[:, 0])
    one_line_error(capsys, ["convert", "mesh", tmp_path / "run" / "f0.vtu", tmp_path / "run" / "f1.vtu", "--kind",
                      "trajectory", "--targets", "u", "--out", out], "f1.vtu", "mesh differs from f0.vtu's")
    (tmp_path / "junk.vtu").write_text("not a mesh")
    one_line_error(capsys, ["convert", "mesh", tmp_path / "junk.vtu", "--targets", "u", "--out", out], "junk.vtu",
             "not a mesh meshio can read")
    one_line_error(capsys, ["convert", "mesh", good, "--out", out], "needs --targets")
    assert not out.exists()


def test_missing_meshio_is_one_line_naming_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "meshio", None)  # import fails as if not installed
    with pytest.raises(ConfigError, match=r"^convert mesh: the meshio package is missing; "
                                          r"pip install 'opformer\[mesh\]'$"):
        convert_file("mesh", [tmp_path / "x.vtu"], tmp_path / "o.h5", targets=["u"])
