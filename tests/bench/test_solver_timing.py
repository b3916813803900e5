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
