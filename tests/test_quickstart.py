"""The built-in default job, shrunk: data, training, evaluation at two grids, plots, and a rerun that resumes."""

import json

import pytest

from opformer.quickstart import burgers as job
from opformer.config import config_from_dict
from opformer.models.registry import preset


def test_the_default_config_is_the_papers_burgers_model_on_the_quickstart_grid():
    config = config_from_dict(job.quickstart_config("b.h5"))
    assert config.model == preset("gt_burgers")
    assert (config.data.path, config.data.resolution) == ("b.h5", job.TRAINED)
    assert (config.data.n_train, config.data.n_val, config.data.n_test) == (256, 32, 64)
    assert job.STORED % job.TRAINED == 0  # the zero-shot grid is a refinement of the training one


@pytest.mark.slow
def test_quickstart_end_to_end_then_resumes_without_redoing_anything(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(job, "SAMPLES", {"n_train": 8, "n_val": 4, "n_test": 4})
    monkeypatch.setattr(job, "STORED", 64)
    monkeypatch.setattr(job, "TRAINED", 32)
    tiny = {"name": "galerkin_transformer_1d", "d_model": 8, "n_layers": 1, "dim_ff": 8, "decoder_width": 8,
            "decoder_modes": 4, "decoder_head_width": 8}
    monkeypatch.setattr(job, "preset", lambda name: dict(tiny))
    out = tmp_path / "qs"
    rows = job.quickstart(out)
    first = capsys.readouterr().out
    assert "[1/4] generating 16 Burgers samples at n = 64" in first and "(resuming)" not in first
    assert [(r["resolution"], r["trained_at"], r["samples"]) for r in rows] == [(32, 32, 4), (64, 32, 4)]
    assert json.loads((out / "results.json").read_text()) == rows
    for name in ("burgers.h5", "gt/best.pt", "gt/last.pt", "losses.png", "predictions.png"):
        assert (out / name).is_file(), name
    stamp = (out / "burgers.h5").stat().st_mtime_ns
    again = job.quickstart(out)
    second = capsys.readouterr().out
    assert "generating" not in second and "(resuming)" in second
    assert again == rows and (out / "burgers.h5").stat().st_mtime_ns == stamp
