"""The Darcy benchmark's rows: the inverse problem's noise levels (the paper's Table 3 columns eps = 0, 0.01, 0.1)
are rows of their own, each trained at its grid's peak rate or the one ``--lr`` gives, a row of its own too; a
finished run that an invocation only reads keeps the row measured beside its training."""

from benchmarks.harness import to_measure
from benchmarks.papers.galerkin.darcy import merged_rows, row_key, run_overrides, same_budget_rows


def row(eps_sets: list[str], error: float) -> dict:
    config, sets = run_overrides("gt", "inverse", (43, 15), "d.h5", 100, 1024)
    return {"problem": "inverse", "model": "gt", "grid": [43, 15], "config": str(config.relative_to(config.parents[2])),
            "overrides": sets + eps_sets, "test": [{"resolution": 43, "relative_l2": error}]}


def test_the_noise_level_and_the_grids_peak_rate_are_overrides():
    _, sets = run_overrides("gt", "inverse", (43, 15), "d.h5", 100, 1024, noise=0.1)
    assert "data.input_noise=0.1" in sets and "optim.lr=0.0005" in sets
    _, sets = run_overrides("gt", "inverse", (85, 29), "d.h5", 100, 1024)
    assert "optim.lr=0.00025" in sets and not any(s.startswith("data.input_noise") for s in sets)
    _, sets = run_overrides("gt", "forward", (85, 29), "d.h5", 100, 1024, noise=0.1)
    assert not any(s.startswith(("data.input_noise", "optim.lr")) for s in sets)
    _, sets = run_overrides("gt", "inverse", (43, 15), "d.h5", 100, 1024, noise=0.0, lr=2.5e-4)
    assert "data.input_noise=0.0" in sets and "optim.lr=0.00025" in sets and "optim.lr=0.0005" not in sets
    _, sets = run_overrides("fno2d", "inverse", (43, 15), "d.h5", 100, 1024, lr=2.5e-4)
    assert not any(s.startswith("optim.lr") for s in sets)


def test_a_row_of_another_eps_is_kept_and_one_of_the_same_eps_replaced():
    earlier_result = {"epochs": 100, "n_train": 1024, "runs": [row([], 0.044)]}
    noisier = row(["data.input_noise=0.1"], 0.07)
    assert [r["test"][0]["relative_l2"] for r in merged_rows(earlier_result, [noisier], 100, 1024)] == [0.044, 0.07]
    again = row(["data.input_noise=0.01"], 0.043)  # the configs' eps, stated
    assert [r["test"][0]["relative_l2"] for r in merged_rows(earlier_result, [again], 100, 1024)] == [0.043]


def test_a_row_at_another_peak_rate_is_kept_beside_the_grids_rate():
    earlier_result = {"epochs": 100, "n_train": 1024, "runs": [row([], 0.044)]}
    slower = row(["optim.lr=0.00025"], 0.041)  # after the grid's 5e-4: the later override wins
    merged = merged_rows(earlier_result, [slower], 100, 1024)
    assert [r["test"][0]["relative_l2"] for r in merged] == [0.041, 0.044]  # by peak rate within an eps


def test_a_read_run_with_a_row_of_the_same_budget_is_not_measured_again():
    earlier_result = {"epochs": 100, "n_train": 1024, "runs": [row([], 0.044)]}
    tabulated = [row_key(r) for r in same_budget_rows(earlier_result, 100, 1024)]
    keyed = {row_key(row([], 0.0)): "runs/eps0.01", row_key(row(["data.input_noise=0.1"], 0.0)): "runs/eps0.1"}
    read = {"runs/eps0.01": {"read": True}, "runs/eps0.1": {"read": True}}
    assert [keyed[k] for k in to_measure(keyed, read, tabulated)] == ["runs/eps0.1"]
    trained = {"runs/eps0.01": {}, "runs/eps0.1": {"read": True}}  # trained by this invocation: measured
    assert len(to_measure(keyed, trained, tabulated)) == 2
    assert same_budget_rows(earlier_result, 20, 1024) == []  # another budget's rows are not this one's
