"""The benchmarks read runs trained to their end (by a resumable queue, across sessions) instead of training them."""

import json

import yaml

from benchmarks.harness import earlier, finished, kept_rows, to_measure, train_all


def test_a_finished_run_is_read_and_an_unfinished_one_is_not(tmp_path):
    run = tmp_path / "st"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"train": {"epochs": 100, "num_threads": 1}}))
    assert finished(run) is None  # still training: no summary yet
    summary = {"epochs": 100, "best_epoch": 100, "best_val_relative_l2": 1.6e-3, "parameters": 530305,
               "train_seconds": 13350.0, "seconds_per_step": 1.04}
    (run / "summary.json").write_text(json.dumps(summary))
    assert finished(run) == {**summary, "peak_rss_gib": None, "threads": 1, "read": True}


def test_earlier_results_are_read_back_or_empty(tmp_path):
    assert earlier(tmp_path, "burgers") == {}
    (tmp_path / "burgers.json").write_text(json.dumps({"models": [{"model": "gt"}]}))
    assert earlier(tmp_path, "burgers") == {"models": [{"model": "gt"}]}


def test_train_all_reads_a_finished_run_and_starts_no_process(tmp_path):
    run = tmp_path / "done"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"train": {"num_threads": 2}}))
    (run / "summary.json").write_text(json.dumps({"epochs": 3}))
    # the config does not exist: a job that were trained would fail
    assert train_all([("missing.yaml", [], str(run))], 1) == {str(run): {"epochs": 3, "peak_rss_gib": None,
                                                                         "threads": 2, "read": True}}


def test_kept_rows_replace_earlier_rows_of_the_same_name_and_keep_the_others(tmp_path):
    (tmp_path / "t.json").write_text(json.dumps({"cells": [{"name": "b", "v": 1}, {"name": "c", "v": 2}]}))
    rows = {"b": {"name": "b", "v": 3}, "a": {"name": "a", "v": 4}}
    assert kept_rows(tmp_path, "t", rows, "cells") == [{"name": "a", "v": 4}, {"name": "b", "v": 3},
                                                       {"name": "c", "v": 2}]
    assert [row["name"] for row in kept_rows(tmp_path, "t", rows, "cells", order=lambda row: -row["v"])] == \
        ["a", "b", "c"]
    assert kept_rows(tmp_path, "none", rows) == [rows["a"], rows["b"]]  # no earlier file


def test_a_read_run_keeps_its_row_and_a_trained_or_untabulated_one_is_measured():
    """A run read again keeps the row measured beside its training (its load and wall time); a run trained now,
    or read but never tabulated, is measured."""
    jobs = {"a": "runs/a", "b": "runs/b", "c": "runs/c"}
    summaries = {"runs/a": {"read": True}, "runs/b": {"read": True}, "runs/c": {"epochs": 3}}
    assert to_measure(jobs, summaries, ["a", "c"]) == ["b", "c"]
    assert to_measure(jobs, summaries, []) == ["a", "b", "c"]
