"""One bench cell: its tensor peak and a peer whose package is missing."""

from __future__ import annotations

import sys

import pytest

from opformer.bench.cell import run_cell


@pytest.mark.slow
def test_cell_tensor_peak_counts_the_weights_and_adam_state():
    spec = {"preset": "gt_burgers", "implementation": "opformer", "resolution": 16, "batch": 1, "mode": "forward",
            "repeats": 1, "warmup": 0, "threads": 1, "device": "cpu"}
    forward, train = run_cell(spec), run_cell({**spec, "mode": "train"})
    weights = 4 * forward["parameters"]
    # the weights (allocated before tracking) under both; training adds gradients and Adam's two moments
    assert weights < forward["peak_tensor_bytes"] < 2 * weights
    assert 4 * weights < train["peak_tensor_bytes"] < 4 * weights + forward["peak_tensor_bytes"]
    assert train["peak_tensor_bytes"] < train["peak_memory_bytes"]
    # the processor time of the steps (one thread: at most their wall time) beside it, for a shared machine
    assert 0 < train["cpu_seconds_median"] <= 1.5 * train["seconds_median"] + 0.01


def test_missing_peer_package_marks_its_rows(monkeypatch):
    monkeypatch.setitem(sys.modules, "galerkin_transformer.model", None)  # import fails
    spec = {"preset": "gt_burgers", "implementation": "galerkin-transformer", "resolution": 16, "batch": 1,
            "mode": "forward", "repeats": 1, "warmup": 0, "threads": 1, "device": "cpu"}
    result = run_cell(spec)
    assert result["status"].startswith("peer unavailable: cannot import galerkin_transformer")
