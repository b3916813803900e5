"""GT Figure 12's table: inverse Darcy runs evaluated at noise levels other than their training level."""

import pytest

from benchmarks.papers.galerkin.noise_mismatch import markdown, measure, parse_levels
from opformer.config import config_from_dict
from opformer.errors import ConfigError
from opformer.eval.evaluate import evaluate_run
from opformer.train.trainer import train


def test_each_level_is_the_runs_error_with_that_noise_and_the_trained_one_is_bold(tmp_path, darcy_file,
                                                                                  darcy_config):
    run = tmp_path / "inv"
    train(config_from_dict(darcy_config(darcy_file, epochs=1, inverse=True)), run)
    row = measure(str(run), str(darcy_file), [0.0, 0.01, 0.5])
    (own,) = evaluate_run(run, darcy_file, [9])  # the run's own level, 0.01 in the tiny config
    assert row["trained_eps"] == 0.01 and row["grid"] == [9, 5] and row["samples"] == 2 and row["model"] == "gt"
    assert row["errors"]["0.01"]["relative_l2"] == own["relative_l2"]
    assert row["errors"]["0"]["relative_l2"] == evaluate_run(run, darcy_file, [9], input_noise=0.0)[0]["relative_l2"]
    assert row["errors"]["0.5"]["relative_l2"] != pytest.approx(own["relative_l2"], rel=1e-6)
    text = markdown({"runs": [row], "paper": [{"trained_eps": 0.0, "evaluated_eps": 0.01, "relative_l2": 0.194}]})
    line = next(line for line in text.splitlines() if line.startswith("| inv |"))
    assert line.split(" | ")[5:] == ["{:.4f}".format(row["errors"]["0"]["relative_l2"]),
                                     "**{:.4f}**".format(own["relative_l2"]),
                                     "{:.4f} |".format(row["errors"]["0.5"]["relative_l2"])]


def test_forward_runs_and_bad_levels_are_refused(tmp_path, darcy_file, darcy_config):
    run = tmp_path / "fwd"
    train(config_from_dict(darcy_config(darcy_file, epochs=1)), run)
    with pytest.raises(ConfigError, match="not an inverse problem"):
        measure(str(run), str(darcy_file), [0.0])
    assert parse_levels("0.1,0,0.1") == [0.0, 0.1]
    for text in ("0,x", "-0.1", "inf"):
        with pytest.raises(SystemExit, match=f"--levels {text}: expected comma-separated numbers >= 0"):
            parse_levels(text)
