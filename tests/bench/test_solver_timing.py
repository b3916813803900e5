"""``opformer bench --solver``: the solver names it takes."""

from __future__ import annotations

import pytest

from opformer.bench.solver_timing import SOLVER_SURROGATES, solver_comparison
from opformer.bench.sweep import BenchSettings
from opformer.errors import ConfigError


def test_unknown_solver_is_a_one_line_config_error():
    settings = BenchSettings(models=["gt_burgers"], resolutions=[16])
    with pytest.raises(ConfigError, match=r"^--solver: unknown solver 'heat'; valid: burgers$"):
        solver_comparison(settings, "heat", progress=lambda line: None)
    assert SOLVER_SURROGATES == {"burgers": "gt_burgers"}


def test_the_solver_comparison_alone_renders_as_markdown():
    from opformer.bench.report import to_markdown

    report = {"settings": {}, "machine": {}, "cells": [], "slopes": {},
              "solver": {"solver": "burgers", "surrogate": "gt_burgers",
                         "rows": [{"resolution": 512, "solver_seconds_per_sample": 0.5,
                                   "surrogate_seconds_per_sample": 0.001, "speedup": 500.0}]}}
    assert to_markdown(report, "opformer bench --solver burgers").splitlines() == [
        "# opformer bench", "", "Command: `opformer bench --solver burgers`", "",
        "Solver (burgers) versus surrogate (gt_burgers) inference, per sample:", "",
        "| n | solver s/sample | surrogate s/sample | speedup |", "|---|---|---|---|", "| 512 | 0.5 | 0.001 | 500.0x |"]
