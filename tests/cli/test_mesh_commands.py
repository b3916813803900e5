"""Every command on a mesh run, through the command line: evaluate (the quadrature-weighted relative L2 beside the
plain one), predict on a user's mesh file, calibrate and bounds, plot, export and import."""

import json

import numpy as np
import pytest
import torch
import yaml

from opformer.cli import main
from opformer.data.store import read_mesh_samples
from opformer.eval.metrics import weighted_relative_l2_per_sample
from opformer.runs import Run
from tests.cli.test_mesh_train import config
from tests.data.test_store_mesh import mesh_samples, write

pytestmark = pytest.mark.slow  # each test uses a run trained from the command line (a few seconds, once)

COUNTS = (20, 31, 25, 18, 27, 22, 19, 24, 21, 26)


@pytest.fixture(scope="module")
def mesh_run(tmp_path_factory):
    """A tiny Transolver with quadrature weights, trained 2 epochs on 4 samples (2 val, 4 test)."""
    folder = tmp_path_factory.mktemp("mesh_run")
    data = write(folder / "m.h5", mesh_samples(COUNTS))
    model = {"name": "transolver", "in_channels": 1, "out_channels": 2, "n_hidden": 8, "n_layers": 1, "n_head": 2,
             "slice_num": 3, "weighting": "quadrature"}
    section = config(data, model)
    section["data"]["n_test"] = 4
    path = folder / "mesh.yaml"
    path.write_text(yaml.safe_dump(section))
    assert main(["train", str(path), "--out", str(folder / "run")]) == 0
    return folder / "run", data


def test_evaluate_reports_the_weighted_and_the_plain_relative_l2(mesh_run, tmp_path, capsys):
    run, data = mesh_run
    capsys.readouterr()
    assert main(["evaluate", str(run), "--json", str(tmp_path / "e.json")]) == 0
    out = capsys.readouterr().out
    assert "rel. L2 (quadrature)" in out and "rel. L2 (uniform)" in out
    row = json.loads((tmp_path / "e.json").read_text())["results"][0]
    # the figures by hand: each test sample alone through the surrogate, both norms averaged over samples
    surrogate = Run(run).surrogate
    weighted, uniform = [], []
    for sample in read_mesh_samples(data, range(6, 10)):
        w = torch.tensor(sample.weights / sample.weights.sum(), dtype=torch.float32)[None]
        x = torch.tensor(sample.fields["a"])[None]
        pos = torch.tensor(sample.points, dtype=torch.float32)[None]
        y = torch.tensor(sample.fields["u"])[None].double()
        with torch.no_grad():
            pred = surrogate(x, pos, w, torch.ones_like(w, dtype=torch.bool)).double()
        weighted.append(float(weighted_relative_l2_per_sample(pred, y, w)))
        uniform.append(float(weighted_relative_l2_per_sample(pred, y, torch.ones_like(w))))
    assert row["samples"] == 4 and (row["points_min"], row["points_max"]) == (19, 26)
    assert row["relative_l2"] == pytest.approx(np.mean(weighted), rel=1e-5)
    assert row["relative_l2_uniform"] == pytest.approx(np.mean(uniform), rel=1e-5)
    assert row["relative_l2"] != pytest.approx(row["relative_l2_uniform"], rel=1e-6)


def test_grid_options_of_evaluate_are_refused_on_a_mesh_run(mesh_run, capsys):
    run, _ = mesh_run
    capsys.readouterr()
    assert main(["evaluate", str(run), "--resolutions", "64"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--resolutions: for grid runs" in err
