"""Benchmarks over seeds: a row without a seed has its config's; models with two seeds or more get the mean and
sample standard deviation of each column (the Burgers table per resolution, FactFormer's Table 2 per field)."""

from pathlib import Path

from benchmarks.harness import seed_of, seed_runs, seed_spread
from benchmarks.papers.factformer import tables
from benchmarks.papers.galerkin.burgers import RESOLUTIONS, row_seed, training_jobs


def row(model: str, errors: list[float], seed: int | None = None) -> dict:
    out = {"model": model, "results": [{"resolution": n, "relative_l2": e} for n, e in zip(RESOLUTIONS, errors)]}
    return out if seed is None else {**out, "seed": seed}


def test_a_burgers_row_without_a_seed_has_its_configs():
    assert row_seed(row("gt", [1e-3] * 3)) == 1127802
    assert row_seed(row("gt", [1e-3] * 3, seed=2)) == 2


def test_burgers_seeds_train_beside_the_configs_seed_or_alone():
    jobs = training_jobs(["gt", "ft"], [1, 2], False, Path("d.h5"), 100, Path("runs"))
    assert list(jobs) == [("gt", None), ("gt", 1), ("gt", 2), ("ft", None), ("ft", 1), ("ft", 2)]
    config, sets, run = jobs["gt", 2]
    assert config.endswith("configs/burgers/gt.yaml") and sets[-1] == "seed=2" and run == str(Path("runs/gt_seed2"))
    assert not any(s.startswith("seed=") for s in jobs["gt", None][1]) and jobs["gt", None][2] == str(Path("runs/gt"))
    assert list(training_jobs(["gt"], [1, 2], True, Path("d.h5"), 100, Path("runs"))) == [("gt", 1), ("gt", 2)]


def test_a_configs_runs_over_seeds_are_itself_then_name_seed_s_with_the_override():
    assert seed_runs("m", [1, 2]) == [("m", None, []), ("m_seed1", 1, ["seed=1"]), ("m_seed2", 2, ["seed=2"])]
    assert seed_runs("m", [3], only_seeds=True) == [("m_seed3", 3, ["seed=3"])]
    assert seed_runs("m", []) == [("m", None, [])]


def test_the_spread_is_over_the_seeds_of_a_model_and_a_single_seed_gets_none():
    groups = {"gt": [(1127802, [1e-3, 2e-3, 3e-3]), (1, [2e-3, 2e-3, 5e-3]), (2, [3e-3, 2e-3, 4e-3])],
              "ft": [(1127802, [1e-3] * 3)]}
    lines = seed_spread(groups, ["a", "b", "c"], 3)
    assert lines[-1] == "| gt | 1127802, 1, 2 | 2.000 +- 1.000 | 2.000 +- 0.000 | 4.000 +- 1.000 |"
    assert "(x 1e-3)" in lines[1]
    assert not any(line.startswith("| ft") for line in lines)
    assert seed_spread({"ft": groups["ft"]}, ["a", "b", "c"], 3) == []


def test_factformer_rows_of_other_seeds_follow_their_run_in_seed_order():
    present = ["b_seed2", "a_seed10", "a_seed2", "c_seed1", "a", "a_seed2"]
    assert tables.with_seeds(["a", "b"], present) == ["a", "a_seed2", "a_seed10", "b", "b_seed2"]


def test_a_factformer_run_name_gives_its_config_and_seed():
    assert tables.config_of("turbulence3d_factformer_lm_seed12") == ("turbulence3d_factformer_lm", 12)
    assert tables.config_of("turbulence3d_factformer_lm") == ("turbulence3d_factformer_lm", None)
    assert tables.config_of("x_seedless") == ("x_seedless", None)


def test_a_factformer_row_without_a_seed_has_its_configs_with_its_overrides():
    config = "configs/factformer/turbulence3d_factformer_lm.yaml"
    assert seed_of({"config": config, "overrides": ["train.epochs=2"]}) == 1127802
    assert seed_of({"config": config, "overrides": ["seed=5"]}) == 5
    assert seed_of({"config": config, "overrides": [], "seed": 7}) == 7


def test_table_2_over_seeds_gives_each_fields_mean_and_spread():
    def fields(u: float, p: float) -> dict:
        return {"u": {"relative_l2": u, "final_relative_l2": 2 * u}, "p": {"relative_l2": p, "final_relative_l2": p}}

    runs = [{"name": name, "seed": seed, "fields": fields(u, p)}
            for name, seed, u, p in [("m", 0, 0.1, 0.3), ("m_seed1", 1, 0.2, 0.3), ("m_seed2", 2, 0.3, 0.3),
                                     ("n", 0, 0.1, 0.1)]]
    lines = tables._fields_spread(runs)
    assert lines[-1] == ("| m | 0, 1, 2 | 200.000 +- 100.000 | 400.000 +- 200.000 | 300.000 +- 0.000 | "
                         "300.000 +- 0.000 |")
    assert not any(line.startswith("| n ") for line in lines)
