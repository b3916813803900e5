"""GT Figures 9-11: a run's drawn test samples, their errors (the test split's first) and its curve's verdict."""

import pytest

from benchmarks.papers.galerkin.samples import markdown, measure
from opformer.config import config_from_dict
from opformer.eval.evaluate import evaluate_run
from opformer.train.trainer import train


def test_the_drawn_samples_are_the_first_of_the_test_split_and_their_mean_is_shown(tmp_path, darcy_file,
                                                                                 darcy_config):
    run = tmp_path / "inv"
    train(config_from_dict(darcy_config(darcy_file, epochs=1, inverse=True)), run)
    results = tmp_path / "results"
    row = measure(str(run), str(darcy_file), 11, 2, results)
    (full,) = evaluate_run(run, darcy_file, [9], per_sample=True)
    assert full["samples"] == len(full["per_sample_relative_l2"]) == 2
    assert full["relative_l2"] == pytest.approx(sum(full["per_sample_relative_l2"]) / 2, rel=1e-6)
    assert row["drawn"] == full["per_sample_relative_l2"] and row["test_mean"] == full["relative_l2"]
    assert row["input_noise"] == 0.01 and row["model"] == "gt" and row["curve"] == "too short"
    assert (results / "samples_inv.png").stat().st_size > 0
    assert sorted(p.name for p in results.iterdir()) == ["samples_inv.png"]  # the plot's folder is gone
    line = next(line for line in markdown({"runs": [row]}).splitlines() if line.startswith("| 11 | inv |"))
    mean = sum(row["drawn"]) / 2
    assert f"| {mean:.3e} | {row['test_mean']:.3e} (2) |" in line
    assert "0.0160 / 0.0292 / 0.0885" in line
