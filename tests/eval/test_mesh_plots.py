"""Plots of mesh samples: fields on the triangulation, meshes with their weights, truth/prediction/error."""

import numpy as np
import pytest

from opformer.cli import main
from opformer.eval.mesh_plots import plot_mesh_predictions, triangles
from opformer.meshes import MeshSample, cell_measures, structured_quads
from tests.data.test_store_mesh import mesh_samples, write


def test_quads_are_cut_into_two_triangles_of_the_same_area():
    x = np.stack(np.meshgrid(np.linspace(0, 1, 4), np.linspace(0, 2, 3), indexing="ij"), -1).reshape(-1, 2)
    sample = MeshSample(points=x, fields={}, cells=structured_quads((4, 3)), cell_kind="quad")
    tris = triangles(sample)
    area = cell_measures(x, tris, "triangle").sum()
    assert len(tris) == 2 * 6 and area == pytest.approx(2.0)
    assert triangles(MeshSample(points=x, fields={})) is None  # a point cloud is drawn as points


@pytest.mark.slow
def test_plot_draws_a_mesh_file_and_predictions(tmp_path, capsys):
    samples = mesh_samples((20, 30))
    path = write(tmp_path / "m.h5", samples)
    assert main(["plot", str(path), "--samples", "2", "--out", str(tmp_path / "figs")]) == 0
    png = tmp_path / "figs" / "mesh_samples.png"
    assert "wrote" in capsys.readouterr().out and png.read_bytes()[:4] == b"\x89PNG"
    out = plot_mesh_predictions(samples, [s.fields["u"] * 1.1 for s in samples], ["u"], tmp_path / "p.png")
    assert out.stat().st_size > 1000
