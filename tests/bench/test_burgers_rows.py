"""The Burgers benchmark (benchmarks/papers/galerkin/burgers.py) reads runs a queue trained to their end."""

import json

import yaml

from benchmarks.harness import earlier
from benchmarks.papers.galerkin.burgers import finished


def test_a_finished_run_is_read_and_an_unfinished_one_is_not(tmp_path):
    run = tmp_path / "st"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"train": {"epochs": 100, "num_threads": 1}}))
    assert finished(run) is None  # still training: no summary yet
    summary = {"epochs": 100, "best_epoch": 100, "best_val_relative_l2": 1.6e-3, "parameters": 530305,
               "train_seconds": 13350.0, "seconds_per_step": 1.04}
    (run / "summary.json").write_text(json.dumps(summary))
    assert finished(run) == {**summary, "peak_rss_gib": None, "threads": 1}


def test_earlier_results_are_read_back_or_empty(tmp_path):
    assert earlier(tmp_path, "burgers") == {}
    (tmp_path / "burgers.json").write_text(json.dumps({"models": [{"model": "gt"}]}))
    assert earlier(tmp_path, "burgers") == {"models": [{"model": "gt"}]}
