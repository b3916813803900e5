"""The convergence criterion of ``benchmarks/papers/curves.py`` on small synthetic validation histories, and its
summary and plot of a run's metrics.csv."""

import pytest

from benchmarks.papers.curves import (CRITERION, converged, improvement_of_last_fifth, planned_epochs, read_metrics,
                                      summary, verdict)


def test_the_last_fifth_is_judged_against_the_best_before_it():
    # 10 epochs: the last fifth is epochs 9-10; the best before them 0.50, the best overall 0.48: 4% better
    history = [1.0, 0.8, 0.7, 0.6, 0.55, 0.52, 0.51, 0.50, 0.49, 0.48]
    assert improvement_of_last_fifth(history) == pytest.approx(0.04)
    assert converged(history)
    # the same but 0.47 last: 6% better, still improving
    assert improvement_of_last_fifth(history[:-1] + [0.47]) == pytest.approx(0.06)
    assert not converged(history[:-1] + [0.47])


def test_a_last_fifth_that_gets_worse_has_converged_and_short_histories_are_not_judged():
    assert improvement_of_last_fifth([0.5, 0.4, 0.3, 0.2, 0.9]) == 0.0
    assert converged([0.5, 0.4, 0.3, 0.2, 0.9])
    assert improvement_of_last_fifth([0.5, 0.4, 0.3, 0.2]) is None and not converged([0.5, 0.4, 0.3, 0.2])
    # 7 epochs: the last fifth rounds up to 2 epochs
    assert improvement_of_last_fifth([1, 1, 1, 1, 1, 0.9, 1]) == pytest.approx(0.1)
    assert "last fifth" in CRITERION and "5%" in CRITERION


def test_a_runs_summary_from_its_metrics_csv(tmp_path):
    (tmp_path / "metrics.csv").write_text("epoch,train_loss,val_relative_l2,lr,seconds\n"
                                          + "".join(f"{e},{1 / e},{v},0.001,1.0\n"
                                                    for e, v in enumerate([0.9, 0.5, 0.3, 0.31, 0.299], 1)))
    row = summary("run", read_metrics(tmp_path))
    assert (row["epochs"], row["best_epoch"], row["best_val"]) == (5, 5, 0.299)
    assert row["last_fifth_gain"] == pytest.approx(0.001 / 0.3) and row["converged"] and verdict(row) == "yes"
    assert verdict(summary("empty", {"epoch": [], "train_loss": [], "val_relative_l2": []})) == "too short"
    # a run that collapses after its best epoch ends flat, but has diverged, not converged
    collapsed = {"epoch": list(range(1, 11)), "val_relative_l2": [0.9, 0.5, 0.3, 0.02] + [1.0] * 6}
    row = summary("collapsed", collapsed)
    assert (row["best_epoch"], row["diverged"], row["converged"], verdict(row)) == (4, True, False, "diverged")
    assert not summary("run", {"epoch": [1, 2, 3, 4, 5], "val_relative_l2": [0.9, 0.5, 0.3, 0.2, 0.39]})["diverged"]
    # one that collapses to the zero prediction (relative error 1) from a best above half of it, too
    row = summary("run", {"epoch": list(range(1, 11)), "val_relative_l2": [0.9, 0.61] + [1.0] * 8})
    assert (row["diverged"], verdict(row)) == (True, "diverged")
    # one never below the zero prediction has not learned, however flat it ends
    row = summary("run", {"epoch": list(range(1, 11)), "val_relative_l2": [1.6, 15.0, 26.0, 10.2] + [1.0] * 6})
    assert (row["learned"], row["diverged"], row["converged"], verdict(row)) == (False, False, False, "not learned")
    # a run still short of its config's epochs is not judged, however flat its last fifth
    (tmp_path / "config.yaml").write_text("train:\n  epochs: 100\n")
    row = summary("run", read_metrics(tmp_path), planned_epochs(tmp_path))
    assert (row["finished"], row["converged"], verdict(row)) == (False, False, "unfinished")


def test_a_folder_without_metrics_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="metrics.csv: no such file"):
        read_metrics(tmp_path)
