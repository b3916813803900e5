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
from tests.trust.trust_runs import heat_run  # noqa: F401 (fixture)

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
