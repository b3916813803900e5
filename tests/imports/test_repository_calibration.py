"""A run's calibration travels through ``opformer export`` and ``opformer import opformer``: checksummed like the
weights, bound to the imported checkpoint, giving the original's bounds; a calibration of another checkpoint is
left out with the reason."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import opformer
from opformer.runs import Run
from tests.cli.test_cli import one_line_error, run_cli
from tests.trust.trust_runs import heat_run  # noqa: F401 (fixture)

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "calibrated_v1"


def bounds_of(run: Path) -> tuple[torch.Tensor, ...]:
    surrogate = opformer.load_surrogate(run, device="cpu")
    with np.load(RUN / "expected.npz") as z:
        x = torch.from_numpy(z["x"])
    predictions = surrogate.predict(x)
    found = [predictions]
    for score in ("relative_l2", "roughness"):
        bounds = surrogate.bounds(x, predictions, coverage=0.9, score=score)
        found += [bounds.relative_l2, bounds.upper, bounds.flagged]
    return tuple(found)


def test_export_then_import_keeps_the_calibration(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "export", RUN, tmp_path / "repo")
    assert code == 0 and "calibration.safetensors" in out and "with its calibration" in out
    config = json.loads((tmp_path / "repo" / "config.json").read_text())
    assert config["calibration"]["included"] and len(config["calibration"]["sha256"]) == 64
    assert "## Error bounds" in (tmp_path / "repo" / "README.md").read_text()
    code, out, _ = run_cli(capsys, "import", "opformer", tmp_path / "repo", "--out", tmp_path / "copy")
    assert code == 0 and "with its calibration" in out
    copy, original = Run(tmp_path / "copy"), Run(RUN)
    record = copy.calibration_record()  # checked against the imported checkpoint
    assert record["meta"]["checkpoint_checksum"] == copy.checkpoint_checksum
    assert record["meta"]["source"]["imported"]["checkpoint_checksum"] == original.checkpoint_checksum
    for mine, theirs in zip(bounds_of(tmp_path / "copy"), bounds_of(RUN)):
        assert torch.equal(mine, theirs)
    with np.load(RUN / "expected.npz") as z:  # what the calibrated run gave when it was written
        np.testing.assert_allclose(bounds_of(tmp_path / "copy")[1].numpy(), z["bound"], rtol=1e-6)


def test_a_changed_calibration_file_is_refused_in_one_line(tmp_path, capsys):
    assert run_cli(capsys, "export", RUN, tmp_path / "repo")[0] == 0
    path = tmp_path / "repo" / "calibration.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    one_line_error(*run_cli(capsys, "import", "opformer", tmp_path / "repo", "--out", tmp_path / "copy")[::2],
                   "calibration.safetensors: corrupt or replaced (its SHA-256 is not the one config.json records)")
    path.unlink()
    one_line_error(*run_cli(capsys, "import", "opformer", tmp_path / "repo", "--out", tmp_path / "copy")[::2],
                   "no calibration.safetensors")
    assert not (tmp_path / "copy").exists()


@pytest.mark.parametrize("damage", ["corrupt", "absent"])
def test_export_says_why_it_carries_no_calibration(tmp_path, capsys, damage):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    if damage == "corrupt":
        (run / "calibration.pt").write_bytes(b"not a calibration")
    else:
        (run / "calibration.pt").unlink()
    code, out, _ = run_cli(capsys, "export", run, tmp_path / "repo")
    why = "not a readable calibration" if damage == "corrupt" else "the run is not calibrated"
    assert code == 0 and "without a calibration: " in out and why in out
    assert not (tmp_path / "repo" / "calibration.safetensors").exists()
    assert why in (tmp_path / "repo" / "README.md").read_text()
    code, out, _ = run_cli(capsys, "import", "opformer", tmp_path / "repo", "--out", tmp_path / "copy")
    assert code == 0 and "without a calibration: " in out and not Run(tmp_path / "copy").calibrated


@pytest.mark.slow
def test_a_rollouts_calibration_gives_the_same_joint_bounds_after_the_round_trip(tmp_path, heat_run):
    from opformer.data.trajectories import load_trajectories
    from opformer.imports.export import export_run
    from opformer.imports.repository import import_repository
    from opformer.trust.calibration import calibrate_run

    run, heat = heat_run
    calibrate_run(run, device="cpu", backtest=1)
    import_repository(export_run(run, tmp_path / "repo"), tmp_path / "copy")
    fields = load_trajectories(heat, "test", n_train=4, n_val=2, n_test=4).fields[:, :4]
    answers = []
    for where in (run, tmp_path / "copy"):
        surrogate = opformer.load_surrogate(where, device="cpu")
        forecast = surrogate.rollout(fields, 5)
        bounds = surrogate.bounds(fields, forecast, coverage=0.8, joint=True, score="backtest")
        answers.append((forecast, bounds.relative_l2, bounds.upper, bounds.flagged))
    for mine, theirs in zip(*answers):
        assert torch.equal(mine, theirs)
    assert torch.isfinite(answers[1][1]).all()
