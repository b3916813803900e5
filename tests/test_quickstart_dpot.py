"""`opformer quickstart dpot`, shrunk: the mixture generated, a DPOT trained on it, each member's rollout error
beside persistence, the plots, and a rerun that resumes."""

import json

import numpy as np
import pytest

from opformer.cli import main
from opformer.config import config_from_dict
from opformer.data.store import read_fields
from opformer.models.registry import preset
from opformer.quickstart import dpot as job


def test_the_config_is_a_nano_dpot_on_the_three_member_mixture():
    paths = {name: f"{name}.h5" for name in job.MEMBERS}
    config = config_from_dict(job.dpot_config(paths, channels=2))
    assert config.model == {**preset("dpot_nano"), "in_channels": 2, "grid_size": 32, "t_in": 5}
    assert [(m.name, m.path) for m in config.data.mixture] == list(paths.items())
    assert (config.data.resolution, config.data.windows_per_epoch) == (32, job.WINDOWS)
    assert (config.rollout.strategy, config.rollout.noise, config.rollout.eval_frames) == ("one_step", 0.2, 10)
    assert (config.data.normalize_input, config.data.normalize_target) == ("none", "none")


@pytest.fixture
def tiny(monkeypatch):
    """Sizes that run in seconds: 16^2, 4 trajectories of a few frames per member, one epoch of a 1-block DPOT."""
    monkeypatch.setattr(job, "MEMBERS", {"diffusion_reaction": ("diffusion-reaction", {"t_final": 0.2}),
                                         "navier_stokes": ("navier-stokes", {"nu": 1e-3, "t_final": 5.0})})
    monkeypatch.setattr(job, "SAMPLES", {"n_train": 2, "n_val": 1, "n_test": 1})
    monkeypatch.setattr(job, "RESOLUTION", 16)
    monkeypatch.setattr(job, "T_IN", 2)
    monkeypatch.setattr(job, "EVAL_FRAMES", 3)
    monkeypatch.setattr(job, "EPOCHS", 1)
    monkeypatch.setattr(job, "WINDOWS", 4)
    monkeypatch.setattr(job, "BATCH", 2)
    monkeypatch.setattr(job, "MODEL", {"name": "dpot2d", "patch_size": 4, "width": 8, "depth": 1, "n_heads": 1,
                                       "mlp_ratio": 1, "head_width": 8, "modes": 2})


def test_quickstart_dpot_end_to_end_then_resumes_without_redoing_anything(tmp_path, tiny, capsys):
    out = tmp_path / "qs"
    assert main(["quickstart", "dpot", "--out", str(out), "--device", "cpu"]) == 0
    first = capsys.readouterr().out
    assert "(resuming)" not in first and "diffusion-reaction ->" in first
    rows = json.loads((out / "results.json").read_text())
    assert [(r["member"], r["split"], r["samples"], r["frames"]) for r in rows] == [
        (name, split, 1, 3) for split in ("val", "test") for name in ("diffusion_reaction", "navier_stokes")]
    assert all(np.isfinite(r["l2re"]) and r["l2re"] > 0 for r in rows)
    # persistence: the last given frame repeated, DPOT's L2RE per real channel over space and time, by hand
    for row in rows:
        fields = read_fields(out / f"{row['member']}.h5", samples=slice(2, 3) if row["split"] == "val" else
                             slice(3, 4))[0]  # (time, n, n, channels)
        truth, last = fields[2:5], fields[1:2]
        per_channel = np.sqrt(((last - truth) ** 2).sum(axis=(0, 1, 2)) / (truth ** 2).sum(axis=(0, 1, 2)))
        assert row["persistence_l2re"] == pytest.approx(per_channel.mean(), rel=1e-5)
        assert f"{row['member']:<20} {row['split']:<5}" in first
    for name in ("diffusion_reaction", "navier_stokes"):
        assert (out / f"rollout_{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "dpot" / "best.pt").is_file()
    stamps = [(out / f"{name}.h5").stat().st_mtime_ns for name in job.MEMBERS]
    assert job.quickstart_dpot(out, device="cpu") == rows
    second = capsys.readouterr().out
    assert "(resuming)" in second and " -> " not in second.split("[2/4]")[0]
    assert [(out / f"{name}.h5").stat().st_mtime_ns for name in job.MEMBERS] == stamps
