"""Calibrating runs: the stored scores against evaluation's errors, per frame of rollouts, the bounds of new
predictions, and one-line errors (no calibration, another checkpoint, a corrupt file, calibrating on train)."""

import math
import os
import pickle
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch

from opformer.cli.trust import format_calibration
from opformer.config import config_from_dict
from opformer.data.pairs import load_split
from opformer.data.trajectories import load_trajectories
from opformer.errors import CheckpointError, ConfigError
from opformer.eval.metrics import rollout_errors, split_errors
from opformer.models.inference import predict
from opformer.runs import Run, save_checkpoint
from opformer.serve.predict import PositionWarning, predict_file
from opformer.train.trainer import train
from opformer.trust.calibration import CALIBRATION, Calibration, Scores, calibrate_run, load_calibration, select
from opformer.trust.conformal import conformal_quantile, conformal_rank
from opformer.trust.scores import local_scale, point_level
from opformer.trust.shift import roughness
from tests.trust.trust_runs import heat_run, operator_run  # noqa: F401 (fixtures)

CPU = torch.device("cpu")


@pytest.mark.slow
def test_an_operator_run_stores_its_test_errors_and_bounds_new_predictions(operator_run):
    run, data = operator_run
    calibration = calibrate_run(run, device="cpu")
    surrogate, _ = Run(run).model()
    test = load_split(data, "test", n_train=16, n_val=4, n_test=20)  # the stored grid, where predict predicts
    errors = split_errors(surrogate, test, 8, CPU).double()
    loaded = load_calibration(run)
    assert loaded.kind == "operator" and loaded.frames == 1 and loaded.source["split"] == "test"
    assert loaded.source["data"][0]["path"] == str(data.resolve())
    assert torch.allclose(loaded.group().relative_l2[:, 0], errors.sort().values)
    # n = 20, coverage 0.9: the ceil(21 * 0.9) = 19th smallest test error
    assert float(loaded.quantiles(0.9)[0]) == pytest.approx(float(errors.sort().values[18]))
    assert float(calibration.quantiles(0.96)[0]) == float("inf")  # rank 21 > 20
    preds = predict(surrogate, test.inputs, 8, CPU)
    bounds = loaded.bounds(test.inputs, preds, 0.9)
    assert bounds.relative_l2.shape == (20,) and bool((bounds.relative_l2 == loaded.quantiles(0.9)[0]).all())
    assert bounds.lower.shape == preds.shape and bool((bounds.lower <= preds).all() and (bounds.upper >= preds).all())
    assert not bounds.flagged.any()  # the calibration inputs themselves
    assert bounds.flagged.shape == (20,) and loaded.bounds(3 * test.inputs + 1, preds, 0.9).flagged.all()
    coarse = load_split(data, "test", resolution=32, n_train=16, n_val=4, n_test=20)  # another grid: not guaranteed
    assert loaded.bounds(coarse.inputs, predict(surrogate, coarse.inputs, 8, CPU), 0.9).flagged.all()
    at_32 = calibrate_run(run, device="cpu", resolution=32)
    assert at_32.group().grid == (32,) and at_32.source["resolution"] == 32
    assert not at_32.bounds(coarse.inputs, predict(surrogate, coarse.inputs, 8, CPU), 0.9).flagged.any()
    table = format_calibration(loaded, (0.8, 0.9, 0.96))
    assert "bound@0.9" in table and "too few calibration samples for coverage 0.96" in table


def test_calibration_errors_are_one_line(operator_run, tmp_path):
    run, data = operator_run
    for split in ("train", "val"):
        with pytest.raises(ConfigError, match=f"--split {split}: the run was"):
            calibrate_run(run, split=split, device="cpu")
    with pytest.raises(ConfigError, match="--split all: takes the run's training samples"):
        calibrate_run(run, data, split="all", device="cpu")
    calibrate_run(run, device="cpu")
    path = run / CALIBRATION
    good = path.read_bytes()
    payload = torch.load(path, weights_only=True)  # a changed score, the checksum left as it was
    payload["groups"][""]["relative_l2"][0, 0] = 0.0
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match="corrupt"):
        load_calibration(run)
    path.write_bytes(good[:100])
    with pytest.raises(CheckpointError, match="not a readable calibration"):
        load_calibration(run)
    path.unlink()
    with pytest.raises(CheckpointError, match=r"not calibrated \(no calibration.pt\); run `opformer calibrate"):
        load_calibration(run)
    path.write_bytes(good)
    load_calibration(run)
    surrogate, checkpoint = Run(run).model()  # the run trained on: another best.pt
    with torch.no_grad():
        next(surrogate.parameters()).add_(1e-3)
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("config.yaml", CALIBRATION):
        (copy / name).write_bytes((run / name).read_bytes())
    save_checkpoint(copy / "best.pt", surrogate, run_config=checkpoint["run_config"], epoch=checkpoint["epoch"],
                    history=checkpoint["history"], best_val=checkpoint["best_val"])
    with pytest.raises(CheckpointError, match="calibrates another checkpoint"):
        load_calibration(copy)


def test_a_rollout_is_calibrated_per_frame(heat_run):
    run, data = heat_run
    calibration = calibrate_run(run, device="cpu")
    assert calibration.kind == "trajectory" and calibration.frames == 5  # the run's eval_frames
    surrogate, _ = Run(run).model()
    fields = load_trajectories(data, "test", n_train=4, n_val=2, n_test=4).fields
    result = rollout_errors(surrogate, fields, 3, 5, 8, CPU)
    group = load_calibration(run).group()
    assert group.relative_l2.shape == (4, 5)
    assert torch.allclose(group.relative_l2, result.per_frame.double().sort(dim=0).values, rtol=1e-5)
    # n = 4, coverage 0.75: rank ceil(3.75) = 4, the largest error of each frame
    assert torch.allclose(calibration.quantiles(0.75), result.per_frame.double().max(dim=0).values, rtol=1e-5)
    forecast = result.predictions[:, :, ...]
    longer = torch.cat([forecast, forecast[:, -1:]], dim=1)  # a 6th frame: beyond the calibrated horizon
    bounds = calibration.bounds(fields[:, :3], longer, 0.75)
    assert bounds.relative_l2.shape == (4, 6) and bool(torch.isinf(bounds.relative_l2[:, 5]).all())
    assert torch.allclose(bounds.relative_l2[0, :5], calibration.quantiles(0.75))
    width = conformal_quantile(group.pointwise["local"][:, :, -1], 0.75, sorted_=True)
    assert torch.isfinite(width).all() and bounds.upper.shape == longer.shape
    band = conformal_quantile(group.pointwise[group.scale][:, :, point_level(0.75)], 0.75, sorted_=True)
    for frame in range(5):  # each frame's half-width: its own quantile times the scale of its own prediction
        expected = local_scale(longer[:, frame], group.scale) * band[frame]
        assert torch.allclose((bounds.upper - longer)[:, frame].double(), expected, rtol=1e-5)
    assert bool(torch.isinf(bounds.upper[:, 5]).all())
    with pytest.raises(ConfigError, match="do not fit its calibration"):
        calibration.bounds(fields[:, :3], longer[..., 0], 0.75)


@pytest.mark.slow
def test_the_cli_calibrates_and_refuses_train_in_one_line(capsys, operator_run):
    from tests.cli.test_cli import one_line_error, run_cli

    run, _ = operator_run
    code, out, _ = run_cli(capsys, "calibrate", run, "--coverage", "0.5,0.9", "--device", "cpu")
    assert code == 0 and "bound@0.5" in out and f"wrote {run}/{CALIBRATION}" in out
    one_line_error(*run_cli(capsys, "calibrate", run, "--split", "train")[::2], "--split train: the run was trained")
    one_line_error(*run_cli(capsys, "calibrate", run, "--coverage", "1.2")[::2], "--coverage 1.2")


@pytest.mark.slow
def test_a_mixture_run_is_calibrated_per_member(tmp_path, toy_mixture, mixture_config, member_writer):
    train(config_from_dict(mixture_config(toy_mixture)), tmp_path / "mix")
    with pytest.raises(ConfigError, match="--data: .* trained on a mixture"):
        calibrate_run(tmp_path / "mix", toy_mixture[0], device="cpu")
    calibration = calibrate_run(tmp_path / "mix", device="cpu")
    assert sorted(calibration.groups) == ["a", "b"] and calibration.frames == 4  # 7 frames after t_in 3
    a, b = calibration.group("a"), calibration.group("b")
    assert (a.grid, a.channels, a.samples) == ((16, 16), 1, 1) and (b.grid, b.channels) == ((32, 32), 2)
    assert [d["path"] for d in calibration.source["data"]] == [str(p.resolve()) for p in toy_mixture]
    fields = load_trajectories(toy_mixture[1], "test", n_train=4, n_val=1, n_test=1).fields
    with pytest.raises(ConfigError, match="calibrated per member of its mixture; expected one of a, b"):
        calibration.bounds(fields[:, :3], fields[:, 3:], 0.5)
    bounds = load_calibration(tmp_path / "mix").bounds(fields[:, :3], fields[:, 3:], 0.5, member="b")
    assert bounds.relative_l2.shape == (1, 4) and bounds.lower.shape == fields[:, 3:].shape
    # predict --coverage takes the member from the input file; another file is refused in one line (forecast after
    # the last frames given: not where the members were calibrated, said by a warning)
    with pytest.warns(PositionWarning, match="context starts at stored frame 4, the calibration's at frame 0"):
        out = predict_file(tmp_path / "mix", toy_mixture[1], tmp_path / "b.npz", frames=4, coverage=0.5)
    with np.load(out) as z:
        assert z["bound_relative_l2"].shape == (6, 4) and z["band_half_width"].shape == z["fields"].shape
        given = load_trajectories(toy_mixture[1], "all", n_train=4, n_val=1, n_test=1).fields[:, -3:]  # the context
        expected = calibration.sample_bounds(0.5, roughness(given, 2), "b")
        assert np.allclose(z["bound_relative_l2"], expected.numpy(), rtol=1e-5)
        from_file = {key: z[key] for key in ("fields", "bound_relative_l2", "band_half_width")}
    other = member_writer(tmp_path / "c.h5", n=32, channels=2, grid="cells", seed=3)
    with pytest.raises(ConfigError, match="calibrated per member of its mixture .* none of their files .* --member"):
        predict_file(tmp_path / "mix", other, tmp_path / "c.npz", frames=4,
                     coverage=0.5)
    assert not (tmp_path / "c.npz").exists()
    # an array of member b's trajectories, named with --member: the same forecast and bounds as from its file
    np.save(tmp_path / "b_fields.npy", load_trajectories(toy_mixture[1], "all", n_train=4, n_val=1, n_test=1)
            .fields.numpy())
    with pytest.raises(ConfigError, match="none of their files"):
        predict_file(tmp_path / "mix", tmp_path / "b_fields.npy", tmp_path / "arr.npz", frames=4,
                     coverage=0.5)
    with pytest.raises(ConfigError, match="--member c: expected one of a, b"):
        predict_file(tmp_path / "mix", tmp_path / "b_fields.npy", tmp_path / "arr.npz", member="c")
    with pytest.warns(PositionWarning):
        out = predict_file(tmp_path / "mix", tmp_path / "b_fields.npy", tmp_path / "arr.npz", frames=4,
                           coverage=0.5, member="b")
    with np.load(out) as z:
        for key, value in from_file.items():
            assert np.allclose(z[key], value, rtol=1e-5, atol=1e-7), key


def _synthetic_scores(errors_follow_roughness: bool, samples: int = 60, seed: int = 0) -> Scores:
    """Inputs of random roughness (a sine of wavenumber 1..8) and predictions whose relative L2 error is either
    proportional to that roughness (times a random factor) or independent of it."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.linspace(0, 1, 65)[:-1]
    k = torch.randint(1, 9, (samples, 1), generator=generator).double()
    inputs = torch.sin(2 * torch.pi * k * x)[..., None]
    truth = torch.cos(2 * torch.pi * x).expand(samples, -1)[:, None, :, None].double()
    spread = 0.5 + torch.rand(samples, 1, generator=generator)  # no ties: a continuous error over roughness
    level = (k / 8 * spread if errors_follow_roughness else spread).reshape(-1, 1, 1, 1)
    noise = torch.randn(truth.shape, generator=generator)
    preds = truth + 0.1 * level * noise / noise.flatten(1).norm(dim=1).reshape(-1, 1, 1, 1) * truth.flatten(1).norm(
        dim=1).reshape(-1, 1, 1, 1)
    scores = Scores()
    scores.add(inputs, preds, truth, ndim=1)
    return scores


def test_the_sharper_score_is_selected_on_held_out_samples_and_used_by_the_bounds():
    assert select(_synthetic_scores(True))["score"] == "roughness"
    assert select(_synthetic_scores(False))["score"] == "relative_l2"
    assert select(_synthetic_scores(True, samples=8)) == {"samples": 8, "score": "relative_l2", "scale": "local"}
    chosen = select(_synthetic_scores(True, seed=1))
    group = _synthetic_scores(True, seed=2).group(chosen)
    calibration = Calibration("run", "operator", "", {}, {"": group})
    inputs = torch.sin(2 * torch.pi * torch.tensor([[1.0], [8.0]]) * torch.linspace(0, 1, 65)[:-1])[..., None]
    bounds = calibration.bounds(inputs, torch.ones(2, 64, 1), 0.9)
    factor = calibration.quantiles(0.9, score="roughness")[0]
    assert torch.allclose(bounds.relative_l2, factor * roughness(inputs, 1))  # the rough input gets the wider bound
    assert bounds.relative_l2[1] > 4 * bounds.relative_l2[0]
    plain = calibration.bounds(inputs, torch.ones(2, 64, 1), 0.9, score="relative_l2").relative_l2
    assert torch.allclose(plain, calibration.quantiles(0.9)[0].expand(2))


@pytest.mark.slow
def test_the_normalized_bound_reaches_the_nominal_coverage():
    """Calibrations of synthetic models whose error follows the input's roughness: over many draws, a new sample's
    error lies under its own bound (quantile of error / roughness, times its roughness) with probability k / (n + 1)."""
    n, draws, coverage = 19, 150, 0.9
    hits = []
    for draw in range(draws):
        scores = _synthetic_scores(True, samples=n + 10, seed=draw)
        cat = scores.joined()
        calibration_part, new = Scores(), slice(n, None)
        calibration_part.parts = {key: [value[:n]] for key, value in cat.items()}
        group = calibration_part.group({"score": "roughness", "scale": "local"})
        bound = Calibration("run", "operator", "", {}, {"": group}).sample_bounds(coverage, cat["difficulty"][new])
        hits.append(cat["relative_l2"][new, 0] <= bound[:, 0])
    rate = float(torch.cat(hits).double().mean())
    rank = conformal_rank(n, coverage)
    expected, a, b = rank / (n + 1), rank, n + 1 - rank
    spread = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)) / draws + expected * (1 - expected) / (10 * draws))
    assert abs(rate - expected) < 4 * spread


def _rollout_scores(errors: torch.Tensor, seed: int = 0) -> Scores:
    """Scores of forecasts whose relative L2 error at sample ``i`` and frame ``t`` is ``errors[i, t]``."""
    generator = torch.Generator().manual_seed(seed)
    n, frames = errors.shape
    truth = torch.ones(n, frames, 16, 1, dtype=torch.float64)
    noise = torch.randn(truth.shape, generator=generator, dtype=torch.float64)
    noise = noise / noise.flatten(2).norm(dim=2)[..., None, None] * truth.flatten(2).norm(dim=2)[..., None, None]
    scores = Scores()
    scores.add(torch.randn(n, 2, 16, 1, generator=generator), truth + errors[..., None, None] * noise, truth, ndim=1)
    return scores


def test_joint_bounds_are_the_quantile_of_the_largest_scaled_score_times_each_frames_scale():
    errors = 0.1 + torch.rand(9, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    scores = _rollout_scores(errors)
    scale = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    group = scores.group(frame_scale={"relative_l2": scale, "roughness": scale})
    calibration = Calibration("run", "trajectory", "", {}, {"": group})
    joint = (errors / scale).max(dim=1).values.sort().values
    # n = 9, coverage 0.8: rank ceil(10 * 0.8) = 8
    assert torch.allclose(calibration.joint_quantiles(0.8), joint[7] * scale)
    assert bool((calibration.joint_quantiles(0.8) >= calibration.quantiles(0.8)).all())
    own = scores.group()  # without held-out scales: each frame's median over these samples
    assert torch.allclose(own.frame_scale["relative_l2"], errors.median(dim=0).values)
    # one frame: the joint bound is the per-frame one
    single = Calibration("run", "trajectory", "", {}, {"": _rollout_scores(errors[:, :1]).group()})
    assert torch.allclose(single.joint_quantiles(0.8), single.quantiles(0.8))
    old = Calibration("run", "trajectory", "", {}, {"": replace(group, joint=None, frame_scale=None)})
    with pytest.raises(CheckpointError, match="predates joint bounds; run `opformer calibrate run` again"):
        old.joint_quantiles(0.8)


@pytest.mark.slow
def test_joint_bounds_hold_for_every_frame_at_once_where_per_frame_bounds_do_not():
    """Errors independent across 5 frames (growing along them): over 30 calibrations of 99 samples, the share of
    new forecasts within the bound at every frame is 0.9 with the joint bounds, about 0.9^5 with per-frame ones."""
    frames, n, coverage = 5, 99, 0.9
    growth = torch.arange(1, frames + 1, dtype=torch.float64)
    joint_hits, frame_hits = [], []
    for draw in range(30):
        generator = torch.Generator().manual_seed(draw)
        errors = 0.01 * growth * torch.exp(0.5 * torch.randn(n + 50 + 400, frames, generator=generator,
                                                             dtype=torch.float64))
        calibrated, held_out, new = errors[:n], errors[n:n + 50], errors[n + 50:]
        group = _rollout_scores(calibrated, draw).group(frame_scale=_rollout_scores(held_out).frame_scales())
        calibration = Calibration("run", "trajectory", "", {}, {"": group})
        joint_hits.append(float((new <= calibration.joint_quantiles(coverage)).all(dim=1).double().mean()))
        frame_hits.append(float((new <= calibration.quantiles(coverage)).all(dim=1).double().mean()))
    assert coverage - 0.02 <= np.mean(joint_hits) <= coverage + 1 / (n + 1) + 0.02
    assert abs(np.mean(frame_hits) - coverage ** frames) < 0.05


class _RunsCode:
    """A pickle that would create its ``marker`` file if it were unpickled with code allowed."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.slow
def test_a_foreign_pickle_in_place_of_the_calibration_is_one_line_and_never_runs(operator_run, tmp_path):
    """A calibration.pt that would run code (a pickle of protocol 4, as torch warns of) is refused as the
    checkpoints are: exit 2, one line on stderr (no warning of torch's before it), and the code never ran."""
    run, data = operator_run
    marker = tmp_path / "ran"
    (run / CALIBRATION).write_bytes(pickle.dumps(_RunsCode(str(marker)), protocol=4))
    proc = subprocess.run([sys.executable, "-m", "opformer", "predict", str(run), "--input", str(data), "--output",
                           str(tmp_path / "out.h5"), "--coverage", "0.9", "--device", "cpu"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"opformer predict: error: {run / CALIBRATION}: not a readable calibration "
                                        "(UnpicklingError); run `opformer calibrate` again"]
    assert not marker.exists() and not (tmp_path / "out.h5").exists()


@pytest.mark.parametrize("sharpness, chosen", [
    ({"relative_l2": 1.0, "roughness": 0.97, "residual": 1.04}, "residual"),  # 4% wider than the sharpest: robust
    ({"relative_l2": 2.0, "roughness": 1.95, "residual": 2.1}, "residual"),  # 2.1 <= 1.1 x 1.95
    ({"relative_l2": 2.0, "roughness": 1.95, "residual": 2.15}, "relative_l2"),  # beyond 10%: the old rule
    ({"relative_l2": 2.0, "roughness": 1.5, "residual": 1.7}, "roughness"),
    ({"relative_l2": 2.0, "roughness": 1.5, "residual": 1.6}, "residual"),
    ({"relative_l2": 2.0, "roughness": 1.85}, "relative_l2"),  # a normalized score must beat the plain by 10%
    ({"relative_l2": 2.0, "roughness": 1.7}, "roughness"),
    ({"relative_l2": 1.0, "roughness": 1.0, "backtest": 1.0}, "relative_l2"),  # the backtest is not a physics score
])
def test_a_physics_score_within_10_percent_of_the_sharpest_is_chosen(sharpness, chosen):
    from opformer.trust.calibrating import choose_score

    assert choose_score(sharpness) == chosen


def test_calibrate_prints_the_median_and_range_of_the_per_input_bounds_of_a_normalized_score():
    scores = _synthetic_scores(True)
    calibration = Calibration("run", "operator", "", {}, {"": scores.group({"score": "roughness", "scale": "rms"})})
    per_input = calibration.sample_bounds(0.9, calibration.group().difficulty, score="roughness")[:, 0]
    table = format_calibration(calibration, (0.9,))
    lines = table.splitlines()
    assert lines[1].split() == ["samples", "bound@0.9", "range@0.9"]
    assert lines[2].split() == ["60", f"{float(per_input.median()):.3e}",
                                f"{float(per_input.min()):.2e}..{float(per_input.max()):.2e}"]
    assert float(per_input.min()) < float(per_input.max())  # the rough inputs get wider bounds
    assert ("per-sample roughness: each input gets its own bound (the score's quantile times the input's roughness); "
            "bound@c is the median of the calibration inputs' bounds") in table
    plain = format_calibration(Calibration("run", "operator", "", {}, {"": scores.group()}), (0.9,))
    assert "range@" not in plain and "per-sample relative_l2: bound@c is the bound of every input" in plain


@pytest.mark.slow
def test_the_cli_says_what_a_normalized_scores_printed_bound_is(capsys, operator_run, monkeypatch):
    from tests.cli.test_cli import run_cli

    # the run's 4 validation samples are too few to choose by: choose the normalized score for it
    monkeypatch.setattr("opformer.trust.calibrating.select", lambda scores: {"score": "roughness", "scale": "rms"})
    run, _ = operator_run
    code, out, _ = run_cli(capsys, "calibrate", run, "--coverage", "0.9", "--device", "cpu")
    calibration = load_calibration(run)
    per_input = calibration.sample_bounds(0.9, calibration.group().difficulty)[:, 0]
    assert code == 0 and calibration.group().score == "roughness"
    assert f"{float(per_input.min()):.2e}..{float(per_input.max()):.2e}" in out
    assert "bound@c is the median of the calibration inputs' bounds" in out
