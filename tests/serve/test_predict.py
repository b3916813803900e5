"""Where a forecast starts (opformer.serve.predict): after the frames given, in the CLI as in Python, unless
``--start`` says otherwise; bounds calibrated at another frame are flagged and said to be; the help and the docs
say what the code does."""

from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

import opformer
from opformer.cli import build_parser
from opformer.serve.predict import PositionWarning, predict_file
from opformer.trust.calibration import calibrate_run
from tests.cli.test_cli import run_cli
from tests.trust.trust_runs import heat_run, operator_run  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[2]


def test_a_forecast_continues_after_the_frames_given_and_says_where_bounds_were_calibrated(capsys, heat_run,
                                                                                           tmp_path):
    run, heat = heat_run  # t_in 3 on 12-frame trajectories
    with h5py.File(heat) as f:
        fields = f["fields"][:4]
    np.save(tmp_path / "new.npy", fields)  # 12 frames each, times 0, 1, ..., 11
    code, _, _ = run_cli(capsys, "predict", run, "--input", tmp_path / "new.npy", "--output", tmp_path / "f.npz",
                         "--frames", 3)
    assert code == 0
    surrogate = opformer.load_surrogate(run, device="cpu")
    python = surrogate.rollout(torch.from_numpy(fields), 3)
    with np.load(tmp_path / "f.npz") as z:
        assert z["times"].tolist() == [12.0, 13.0, 14.0]  # not frames the user gave
        assert torch.equal(torch.from_numpy(z["fields"]), python)  # the CLI and Python forecast alike
    code, _, _ = run_cli(capsys, "predict", run, "--input", tmp_path / "new.npy", "--output", tmp_path / "s.npz",
                         "--frames", 3, "--start", 0)
    with np.load(tmp_path / "s.npz") as z:
        assert code == 0 and z["times"].tolist() == [3.0, 4.0, 5.0]
        first = torch.from_numpy(z["fields"])
    # calibrated from frame 0: a context at frame 9 is flagged whole, recorded and said; at frame 0 it is not moved
    calibration = calibrate_run(run, device="cpu")
    code, out, _ = run_cli(capsys, "predict", run, "--input", tmp_path / "new.npy", "--output", tmp_path / "b.npz",
                           "--frames", 3, "--coverage", 0.9)
    assert code == 0
    assert ("note: " + str(tmp_path / "new.npy") + ": the forecast's context starts at stored frame 9, the "
            "calibration's at frame 0: its bounds are not guaranteed there and every sample is flagged (give "
            "--start 0") in out
    with np.load(tmp_path / "b.npz") as z:
        assert z["flagged"].tolist() == [1, 1, 1, 1]
        assert (int(z["context_start"]), int(z["calibrated_context_start"])) == (9, 0)
        np.testing.assert_allclose(z["bound_relative_l2"], np.tile(calibration.quantiles(0.9)[:3].numpy(), (4, 1)))
    statistics = calibration.at(0.9)(torch.from_numpy(fields[:, :3]), first).flagged
    code, out, _ = run_cli(capsys, "predict", run, "--input", tmp_path / "new.npy", "--output", tmp_path / "c.h5",
                           "--frames", 3, "--coverage", 0.9, "--start", 0)
    assert code == 0 and "note:" not in out
    with h5py.File(tmp_path / "c.h5") as f:
        assert f["flagged"][:].tolist() == statistics.to(torch.uint8).tolist()  # the statistics' flag only
        assert (f.attrs["context_start"], f.attrs["calibrated_context_start"]) == (0, 0)
    # bounds of numpy arrays are those of the tensors
    loaded = opformer.load_surrogate(run, device="cpu")
    assert torch.equal(loaded.bounds(fields, python.numpy(), 0.9).relative_l2,
                       loaded.bounds(torch.from_numpy(fields), python, 0.9).relative_l2)
    # Python's predict_file is the same call, the note a warning
    with pytest.warns(PositionWarning, match="context starts at stored frame 9"):
        predict_file(run, tmp_path / "new.npy", tmp_path / "p.npz", frames=3, coverage=0.9, device="cpu")


def _help(command: str, option: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return " ".join(next(a for a in sub._actions if option in a.option_strings).help.split())


def test_the_help_and_the_docs_say_the_forecast_follows_the_last_frames_given():
    """What the test above measures (a forecast after the last ``t_in`` frames given, ``--start`` to move it, a
    flag where calibrated elsewhere), as each text a user reads says it."""
    assert "default: the last t_in frames of each input are the context" in _help("predict", "--start")
    assert "the forecast continues after the last of them" in _help("predict", "--input")

    def text(name: str) -> str:
        return " ".join((ROOT / name).read_text().split())

    assert "--frames 20 # 20 frames after each last t_in" in text("README.md")
    assert "the `n` frames after the last `t_in` out" in text("README.md")
    assert "from the last `t_in` frames of each trajectory of `X`" in text("docs/training.md")
    assert "the forecast continues after the frames given (`--start S`: after the `t_in` frames from stored frame " \
           "`S` instead" in text("docs/training.md")
    assert "`opformer predict` forecasts after the frames given, as `Forecaster.rollout` does: the last `t_in` " \
           "frames of each input" in text("docs/trust.md")
    assert "every sample is `flagged`" in text("docs/trust.md")
    assert "forecasts after the last `t_in` of them (the context; `--start S`: the `t_in` from stored frame `S` " \
           "instead)" in text("docs/layout.md")
    for name in ("README.md", "docs/training.md", "docs/trust.md", "docs/layout.md"):
        assert "by default the calibration's first frame" not in text(name)


def test_an_npz_prediction_keeps_the_inputs_truth_beside_its_own(capsys, operator_run, tmp_path):
    """``x`` the inputs echoed, ``y`` the predictions, and an input's true targets (``y`` beside ``x``) kept as
    ``truth``, never replaced silently; a truth of another shape is one line."""
    from opformer.cli import main

    run, data = operator_run
    with h5py.File(data) as f:
        x, y = f["input"][:5], f["target"][:5]
    np.savez(tmp_path / "xy.npz", x=x, y=y[..., 0])  # one channel: the truth may leave out its axis too
    code, _, _ = run_cli(capsys, "predict", run, "--input", tmp_path / "xy.npz", "--output", tmp_path / "p.npz")
    assert code == 0
    expected = opformer.load_surrogate(run, device="cpu").predict(x)
    with np.load(tmp_path / "p.npz") as z:
        assert sorted(z.files) == ["truth", "x", "y"]
        np.testing.assert_array_equal(z["x"], x)
        np.testing.assert_array_equal(z["y"], expected)
        np.testing.assert_array_equal(z["truth"], y)
    with h5py.File(predict_file(run, tmp_path / "xy.npz", tmp_path / "p.h5", device="cpu")) as f:
        np.testing.assert_array_equal(f["truth"][:], y) and np.testing.assert_array_equal(f["target"][:], expected)
    np.savez(tmp_path / "bad.npz", x=x, y=y[:, :7])
    assert main(["predict", str(run), "--input", str(tmp_path / "bad.npz"), "--output", str(tmp_path / "b.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("bad.npz: 'y' (the true targets beside 'x', kept as 'truth' in the output) has shape "
                        "(5, 7, 1), expected (5, 64, 1)") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "b.npz").exists()


def test_the_help_and_the_docs_name_the_keys_of_a_prediction():
    assert "x the inputs, y the predictions, truth the input's true targets" in _help("predict", "--output")
    text = " ".join((ROOT / "docs/data-format.md").read_text().split())
    assert "| `.npz` | `x` the inputs echoed, `y` the predictions; `truth` the true targets where the input holds " \
           "them | `fields` the forecast, `times` its frames' times |" in text
