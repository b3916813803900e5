"""`opformer quickstart dpot`, shrunk: the mixture generated, a DPOT pre-trained on it, each member's rollout
error beside persistence (at the member's own time stride), fine-tuning on the held-out member beside scratch,
the plots, and a rerun that resumes."""

import json

import numpy as np
import pytest

from opformer.cli import main
from opformer.config import config_from_dict
from opformer.data.store import read_fields
from opformer.models.registry import preset
from opformer.quickstart import dpot as job
from opformer.runs import Run


def test_the_config_is_a_nano_dpot_on_the_mixture_each_member_at_its_stride():
    paths = {name: f"{name}.h5" for name in job.MEMBERS}
    config = config_from_dict(job.dpot_config(paths, channels=3, seed=7))
    # patch 2 on 32^2: the nano preset's 16^2 latent grid (patch 4 on 64^2)
    assert config.model == {**preset("dpot_nano"), "patch_size": 2, "in_channels": 3, "grid_size": 32, "t_in": 5}
    assert config.model["grid_size"] // config.model["patch_size"] == preset("dpot_nano")["grid_size"] // 4
    assert [(m.name, m.path, m.time_stride) for m in config.data.mixture] == [
        ("navier_stokes", "navier_stokes.h5", 1), ("shallow_water", "shallow_water.h5", 6), ("smoke", "smoke.h5", 1)]
    assert (config.data.resolution, config.data.windows_per_epoch, config.seed) == (32, job.WINDOWS, 7)
    assert (config.rollout.strategy, config.rollout.noise, config.rollout.eval_frames) == ("one_step", 0.2, 10)
    assert (config.data.normalize_input, config.data.normalize_target) == ("none", "none")
    assert config.train.epochs * -(-job.WINDOWS // job.BATCH) == 800


def test_fine_tuning_copies_every_component_and_scratch_none_with_the_same_recipe():
    tuned = config_from_dict(job.finetune_config("held.h5", channels=3, pretrained="out/dpot", seed=7))
    scratch = config_from_dict(job.finetune_config("held.h5", channels=3, pretrained=None, seed=7))
    assert tuned.init.checkpoint == "out/dpot" and len(tuned.init.components) == 5 and scratch.init.checkpoint is None
    pretrained = config_from_dict(job.dpot_config({name: f"{name}.h5" for name in job.MEMBERS}, 3))
    assert tuned.model == scratch.model == pretrained.model  # the pre-trained shapes
    assert (tuned.rollout.noise, tuned.rollout.windows, tuned.train.epochs) == (0.0, "all", job.FINETUNE_EPOCHS)
    for section in ("data", "optim", "schedule", "rollout", "train", "seed"):
        assert getattr(tuned, section) == getattr(scratch, section)
    (name, member), = job.HELD_OUT.items()
    assert name not in job.MEMBERS and member.seed != 0  # another viscosity and other initial vorticities


@pytest.fixture
def tiny(monkeypatch):
    """Sizes that run in seconds: 16^2, 4 trajectories of a few frames per member, one epoch of a 1-block DPOT; the
    dam break used every 20th frame (6 frames 0.2 apart), the held-out Navier-Stokes padded to 2 channels."""
    monkeypatch.setattr(job, "MEMBERS", {
        "diffusion_reaction": job.Member("diffusion-reaction", {"t_final": 0.25}),
        "shallow_water": job.Member("shallow-water", {}, time_stride=20)})
    monkeypatch.setattr(job, "HELD_OUT", {"navier_stokes": job.Member("navier-stokes", {"t_final": 5.0}, seed=1)})
    monkeypatch.setattr(job, "SAMPLES", {"n_train": 2, "n_val": 1, "n_test": 1})
    monkeypatch.setattr(job, "HELD_OUT_SAMPLES", {"n_train": 2, "n_val": 1, "n_test": 1})
    monkeypatch.setattr(job, "RESOLUTION", 16)
    monkeypatch.setattr(job, "T_IN", 2)
    monkeypatch.setattr(job, "EVAL_FRAMES", 3)
    monkeypatch.setattr(job, "EPOCHS", 1)
    monkeypatch.setattr(job, "FINETUNE_EPOCHS", 1)
    monkeypatch.setattr(job, "WINDOWS", 4)
    monkeypatch.setattr(job, "BATCH", 2)
    monkeypatch.setattr(job, "MODEL", {"name": "dpot2d", "patch_size": 4, "width": 8, "depth": 1, "n_heads": 1,
                                       "mlp_ratio": 1, "head_width": 8, "modes": 2})


def persistence_by_hand(path, sample: int, stride: int) -> float:
    """DPOT's L2RE of the last given frame repeated: per real channel over space and time, mean over channels."""
    fields = read_fields(path, samples=slice(sample, sample + 1))[0, ::stride]  # (time, n, n, channels)
    truth, last = fields[2:5], fields[1:2]
    return float(np.sqrt(((last - truth) ** 2).sum(axis=(0, 1, 2)) / (truth ** 2).sum(axis=(0, 1, 2))).mean())


@pytest.mark.slow
def test_quickstart_dpot_end_to_end_then_resumes_without_redoing_anything(tmp_path, tiny, capsys):
    out = tmp_path / "qs"
    assert main(["quickstart", "dpot", "--out", str(out), "--device", "cpu", "--seed", "3"]) == 0
    first = capsys.readouterr().out
    assert "(resuming)" not in first and "diffusion-reaction ->" in first and "navier-stokes ->" in first
    results = json.loads((out / "results.json").read_text())
    rows, held = results["mixture"], results["held_out"]
    assert [(r["member"], r["split"], r["samples"], r["frames"]) for r in rows] == [
        (name, split, 1, 3) for split in ("val", "test") for name in ("diffusion_reaction", "shallow_water")]
    assert [r["frame_step"] for r in rows[:2]] == pytest.approx([0.05, 0.2])
    assert all(np.isfinite(r["l2re"]) and r["l2re"] > 0 for r in rows + held)
    # persistence at each member's own stride (the dam break every 20th stored frame), by hand
    for row in rows:
        stride = job.MEMBERS[row["member"]].time_stride
        expected = persistence_by_hand(out / f"{row['member']}.h5", 2 if row["split"] == "val" else 3, stride)
        assert row["persistence_l2re"] == pytest.approx(expected, rel=1e-5)
    # the printed table: what the demo is, where the claims are, the test rows with their ratio
    assert "not the paper's accuracy" in first and "docs/reproducing.md" in first
    for row in rows[2:]:
        assert (f"{row['member']:<16}" in first and f"{row['l2re']:.4f}" in first
                and f"{row['l2re'] / row['persistence_l2re']:.2f}" in first)
    # fine-tuned and scratch on the held-out member's test trajectory (sample 3), persistence beside them
    assert [(r["init"], r["samples"], r["frames"]) for r in held] == [
        ("fine-tuned (pre-trained)", 1, 3), ("from scratch", 1, 3)]
    assert held[0]["l2re"] != held[1]["l2re"]
    expected = persistence_by_hand(out / "navier_stokes.h5", 3, 1)
    assert held[0]["persistence_l2re"] == held[1]["persistence_l2re"] == pytest.approx(expected, rel=1e-5)
    assert "copied embed, pos, time_agg, blocks, head" in first
    assert Run(out / "finetune").config.init.checkpoint == str((out / "dpot").absolute())
    assert Run(out / "scratch").config.init.checkpoint is None
    for name in ("diffusion_reaction", "shallow_water"):
        assert (out / f"rollout_{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert all((out / run / "best.pt").is_file() for run in ("dpot", "finetune", "scratch"))
    files = [*job.MEMBERS, *job.HELD_OUT]
    stamps = [(out / f"{name}.h5").stat().st_mtime_ns for name in files]
    assert job.quickstart_dpot(out, device="cpu", seed=3) == results
    second = capsys.readouterr().out
    assert second.count("(resuming)") == 3 and " -> " not in second.split("[2/5]")[0]
    assert [(out / f"{name}.h5").stat().st_mtime_ns for name in files] == stamps
