"""The mesh quickstart, shrunk: generation, training, evaluation, calibration, bounds on new geometries, plots."""

import json

import pytest

from opformer.cli import main
from opformer.config import config_from_dict
from opformer.quickstart import mesh as job


def test_the_config_is_the_quadrature_weighted_gt_on_meshes_on_the_elasticity_channels():
    config = config_from_dict(job.quickstart_config("e.h5"))
    assert config.model["name"] == "galerkin_transformer_mesh" and config.model["weighting"] == "quadrature"
    assert (config.model["in_channels"], config.model["out_channels"]) == (0, 4)  # coordinates -> 4 stress fields
    # enough calibration samples for a finite bound at the shown coverage: ceil((n + 1) c) <= n
    assert job.SAMPLES["n_test"] >= job.COVERAGE / (1 - job.COVERAGE)


@pytest.mark.slow
def test_mesh_quickstart_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(job, "SAMPLES", {"n_train": 6, "n_val": 2, "n_test": 9})
    monkeypatch.setattr(job, "NEW", 2)
    monkeypatch.setattr(job, "RESOLUTION", 8)
    monkeypatch.setattr(job, "EPOCHS", 1)
    monkeypatch.setattr(job, "MODEL", {**job.MODEL, "d_model": 8, "dim_ff": 8, "decoder_width": 8, "n_layers": 1})
    out = tmp_path / "qs"
    assert main(["quickstart", "mesh", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "rel. L2 (quadrature)" in printed and "within" in printed
    results = json.loads((out / "results.json").read_text())
    assert results["calibration_samples"] == 9 and len(results["new_geometries"]) == 2
    bound = results["bound_at_coverage"]["0.9"]
    assert all(row["bound"] == pytest.approx(bound) and row["within"] == (row["relative_l2"] <= bound)
               for row in results["new_geometries"])
    for name in ("elasticity.h5", "new_predictions.h5", "gt_mesh/best.pt", "gt_mesh/calibration.pt",
                 "losses.png", "predictions.png"):
        assert (out / name).is_file(), name
