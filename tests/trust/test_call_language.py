"""Errors name the value as the call named it: a Python keyword (``coverage=90``) from the Python API, a flag
(``--coverage 90``) from the command line."""

from pathlib import Path

import numpy as np
import pytest
import torch

import opformer
from opformer.errors import ConfigError, given
from tests.cli.test_cli import one_line_error, run_cli

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "calibrated_v1"


def test_given_spells_a_keyword_or_a_flag():
    assert given("coverage=", 90) == "coverage=90"
    assert given("score=", "sharpest") == "score='sharpest'"
    assert given("--coverage", 90) == "--coverage 90"


def test_python_bounds_name_the_keyword():
    surrogate = opformer.load_surrogate(RUN, device="cpu")
    with np.load(RUN / "expected.npz") as z:
        x, p = torch.from_numpy(z["x"]), torch.from_numpy(z["predictions"])
    with pytest.raises(ConfigError, match=r"^coverage=90: expected a level strictly between 0 and 1") as caught:
        surrogate.bounds(x, p, coverage=90)
    assert "--coverage" not in str(caught.value)
    with pytest.raises(ConfigError, match=r"^score='sharpest': expected one of relative_l2, roughness"):
        surrogate.bounds(x, p, coverage=0.9, score="sharpest")
    with pytest.raises(ConfigError, match=r"^scale='wide': expected one of rms, local"):
        surrogate.calibration.at(0.9, scale="wide")


def test_the_cli_names_the_flag(capsys, tmp_path):
    with np.load(RUN / "expected.npz") as z:
        np.save(tmp_path / "x.npy", z["x"])
    out = tmp_path / "p.npz"
    one_line_error(*run_cli(capsys, "predict", RUN, "--input", tmp_path / "x.npy", "--output", out, "--coverage", 90,
                            "--device", "cpu")[::2], "--coverage 90.0: expected a level strictly between 0 and 1")
    one_line_error(*run_cli(capsys, "predict", RUN, "--input", tmp_path / "x.npy", "--output", out, "--coverage",
                            0.9, "--score", "sharpest", "--device", "cpu")[::2],
                   "--score sharpest: expected one of relative_l2, roughness")
    assert not out.exists()
