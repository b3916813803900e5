"""Learning curves and convergence of training runs: each run's ``metrics.csv`` (the trainer's record of every
epoch) plotted (training loss and validation error per epoch, log scale) into ``NAME.png``, and per run its epochs,
best epoch, best validation error and whether it converged, into ``NAME.json`` and ``NAME.md``.

The criterion (:data:`CRITERION`): a run has converged when the last fifth of its epochs improves the best
validation error by under 5%, i.e. ``(best before them - best overall) / best before them < 0.05``. A run of fewer
than 5 epochs has no last fifth to judge by, and a run short of its config's ``train.epochs`` (still training) is
judged only once finished; neither is called converged.

Run from the repository root::

    python -m benchmarks.papers.curves /root/runs/burgers/st /root/runs/burgers/lt --name burgers_curves
"""

from __future__ import annotations

import csv
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from benchmarks.harness import argument_parser, table_head, write_results

FRACTION = 0.2
TOLERANCE = 0.05
MIN_EPOCHS = 5
#: a finished run whose last validation error is above this multiple of its best has diverged, not converged
DIVERGED = 2.0
#: the relative error of the zero prediction: a run ending at it or above (after being below) has collapsed, one
#: never below it has not learned
ZERO = 1.0
CRITERION = ("converged: the last fifth of the epochs improves the best validation error by under 5% "
             "(a run still short of its config's epochs, or of 5 epochs, is not judged; one that ends above twice "
             "its best validation error, or at the zero prediction's relative error 1 after being below it, has "
             "diverged; one never below 1 has not learned)")
VALIDATION = "val_relative_l2"


def improvement_of_last_fifth(validation: Sequence[float], fraction: float = FRACTION) -> float | None:
    """How much the last ``fraction`` of the epochs (at least one) lowered the best validation error, relative to
    the best before them; ``None`` for a history shorter than :data:`MIN_EPOCHS`."""
    if len(validation) < MIN_EPOCHS:
        return None
    last = max(1, math.ceil(fraction * len(validation)))
    before = min(validation[:-last])
    return (before - min(validation)) / before


def converged(validation: Sequence[float], fraction: float = FRACTION, tolerance: float = TOLERANCE) -> bool:
    """Whether a validation history meets :data:`CRITERION`: its last fifth improves its best by under 5%."""
    gain = improvement_of_last_fifth(validation, fraction)
    return gain is not None and gain < tolerance


def read_metrics(run: Path) -> dict[str, list[float]]:
    """The columns ``epoch``, ``train_loss`` and the validation error of ``run/metrics.csv`` as floats."""
    path = run / "metrics.csv"
    if not path.is_file():
        raise ValueError(f"{path}: no such file; expected a run directory the trainer has written")
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    missing = [c for c in ("epoch", "train_loss", VALIDATION) if rows and c not in rows[0]]
    if missing:
        raise ValueError(f"{path}: no column {', '.join(missing)}; expected the trainer's metrics.csv")
    return {column: [float(row[column]) for row in rows] for column in ("epoch", "train_loss", VALIDATION)}


def planned_epochs(run: Path) -> int | None:
    """The ``train.epochs`` of ``run/config.yaml``; ``None`` without one."""
    path = run / "config.yaml"
    if not path.is_file():
        return None
    config = yaml.safe_load(path.read_text()) or {}
    return (config.get("train") or {}).get("epochs")


def summary(name: str, metrics: dict[str, list[float]], planned: int | None = None) -> dict[str, Any]:
    """One run's row: its epochs (of ``planned``), best epoch and validation error, the last fifth's improvement,
    whether it learned (its best below :data:`ZERO`), whether it diverged (ended above :data:`DIVERGED` times its
    best, or at :data:`ZERO` or above after being below) and whether it converged (never while it is short of
    ``planned``, nor when it diverged or did not learn)."""
    validation = metrics[VALIDATION]
    finished = planned is None or len(validation) >= planned
    if not validation:
        return {"run": name, "epochs": 0, "planned_epochs": planned, "best_epoch": None, "best_val": None,
                "last_fifth_gain": None, "finished": finished, "learned": False, "diverged": False,
                "converged": False}
    best = min(range(len(validation)), key=validation.__getitem__)
    learned = validation[best] < ZERO
    diverged = validation[-1] > DIVERGED * validation[best] or (learned and validation[-1] >= ZERO)
    return {"run": name, "epochs": len(validation), "planned_epochs": planned,
            "best_epoch": int(metrics["epoch"][best]), "best_val": validation[best],
            "last_fifth_gain": improvement_of_last_fifth(validation), "finished": finished, "learned": learned,
            "diverged": diverged, "converged": finished and learned and not diverged and converged(validation)}


def plot(curves: dict[str, dict[str, list[float]]], path: Path) -> None:
    """Training loss and validation error per epoch of every run, side by side on log axes, into ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (train, val) = plt.subplots(1, 2, figsize=(11, 4))
    for name, metrics in curves.items():
        train.plot(metrics["epoch"], metrics["train_loss"], label=name)
        val.plot(metrics["epoch"], metrics[VALIDATION], label=name)
    for axis, title in ((train, "training loss"), (val, "validation relative L2")):
        axis.set_yscale("log")
        axis.set_xlabel("epoch")
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
    val.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def markdown(result: dict[str, Any]) -> str:
    """The results markdown: the criterion, then one row per run."""
    lines = [f"# Learning curves: {result['name']}", "", f"Criterion: {result['criterion']}.", "",
             f"Curves: `{result['plot']}`.", "",
             *table_head("run", "epochs", "best epoch", "best validation error", "last fifth's gain", "converged")]
    for row in result["runs"]:
        gain = "" if row["last_fifth_gain"] is None else f"{100 * row['last_fifth_gain']:.1f}%"
        best = "" if row["best_val"] is None else f"{row['best_val']:.4g}"
        epochs = row["epochs"] if row["planned_epochs"] is None else f"{row['epochs']}/{row['planned_epochs']}"
        lines.append(f"| {row['run']} | {epochs} | {row['best_epoch'] or ''} | {best} | {gain} | "
                     f"{verdict(row)} |")
    return "\n".join(lines) + "\n"


def verdict(row: dict[str, Any]) -> str:
    """A row's converged column: yes, no, "diverged", "not learned" (never below the zero prediction's error),
    "unfinished" (short of its planned epochs) or "too short" (fewer than :data:`MIN_EPOCHS` epochs)."""
    if row.get("diverged"):  # rows written before the divergence check have no such key
        return "diverged"
    if not row["finished"]:
        return "unfinished"
    if row["last_fifth_gain"] is None:
        return "too short"
    if not row.get("learned", True):  # rows written before the check have no such key
        return "not learned"
    return "yes" if row["converged"] else "no"


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("runs", nargs="+", help="run directories, each with its metrics.csv")
    parser.add_argument("--name", default="curves", help="the results' name: NAME.json, NAME.md, NAME.png")
    args = parser.parse_args()
    load_before = os.getloadavg()
    curves, planned = {}, {}
    for run in map(Path, args.runs):
        label = run.name if run.name not in curves else f"{run.parent.name}/{run.name}"
        try:
            curves[label], planned[label] = read_metrics(run), planned_epochs(run)
        except (ValueError, KeyError, yaml.YAMLError) as error:  # a missing file or column, a bad value
            print(f"error: {error}", file=sys.stderr)
            sys.exit(2)
    image = Path(args.results) / f"{args.name}.png"
    plot(curves, image)
    result = {"name": args.name, "criterion": CRITERION, "plot": image.name,
              "runs": [summary(name, metrics, planned[name]) for name, metrics in curves.items()]}
    write_results(args.results, args.name, result, markdown, load_before)


if __name__ == "__main__":
    main()
