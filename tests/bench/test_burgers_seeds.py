"""The Burgers benchmark's seeds: a row without one has its config's; models with two seeds or more get their mean
and sample standard deviation per resolution."""

from benchmarks.papers.galerkin.burgers import RESOLUTIONS, seed_of, seed_spread


def row(model: str, errors: list[float], seed: int | None = None) -> dict:
    out = {"model": model, "results": [{"resolution": n, "relative_l2": e} for n, e in zip(RESOLUTIONS, errors)]}
    return out if seed is None else {**out, "seed": seed}


def test_a_row_without_a_seed_has_its_configs():
    assert seed_of(row("gt", [1e-3] * 3)) == 1127802
    assert seed_of(row("gt", [1e-3] * 3, seed=2)) == 2


def test_the_spread_is_over_the_seeds_of_a_model_and_a_single_seed_gets_none():
    rows = [row("gt", [1e-3, 2e-3, 3e-3]), row("gt", [2e-3, 2e-3, 5e-3], seed=1), row("gt", [3e-3, 2e-3, 4e-3], seed=2),
            row("ft", [1e-3] * 3)]
    lines = seed_spread(rows)
    assert lines[-1] == "| gt | 1127802, 1, 2 | 2.000 +- 1.000 | 2.000 +- 0.000 | 4.000 +- 1.000 |"
    assert not any(line.startswith("| ft") for line in lines)
    assert seed_spread(rows[3:]) == []
