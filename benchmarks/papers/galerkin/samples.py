"""Test samples of trained runs beside the truth (Cao 2021, appendix Figures 9-11).

The paper's Figure 9 shows 4 test samples of Burgers' equation (Example 5.1; their mean relative error 1.079e-3),
Figure 10 one interface Darcy sample (Example 5.2; its caption prints 6.454e-2) and Figure 11 the same sample's
inverse coefficient (Example 5.3) at matched training and evaluation noise eps = 0, 0.01, 0.1 (0.0160, 0.0292,
0.0885). This script draws a finished run's first SAMPLES test samples with ``opformer plot``'s prediction figure
(input, truth, prediction and the error) into ``samples_RUN.png``, and records each drawn sample's relative L2 error,
the mean over the whole test split, and the run's learning-curve verdict (:mod:`benchmarks.papers.curves`). Rows are
kept by run folder name: invocations over different runs fill one table. Run from the repository root::

    .venv/bin/python -m benchmarks.papers.galerkin.samples --figure 9 --data data/burgers.h5 --runs runs/burgers/st

Writes benchmarks/results/papers/galerkin/samples.{json,md} and samples_RUN.png.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from benchmarks.harness import argument_parser, kept_rows, page, table_head, table_row, write_results
from benchmarks.papers.curves import planned_epochs, read_metrics, summary, verdict
from benchmarks.papers.galerkin.noise_mismatch import model_name

#: each figure's example and the paper's relative L2 errors of its samples, as its caption gives them
PAPER = {9: ("Burgers, 4 test samples", "mean 1.079e-3"), 10: ("Darcy, 1 test sample", "6.454e-2"),
         11: ("inverse Darcy, 1 test sample at eps = 0 / 0.01 / 0.1", "0.0160 / 0.0292 / 0.0885")}


def main() -> None:
    parser = argument_parser(__doc__, runs="Burgers or Darcy")
    parser.add_argument("--figure", type=int, choices=sorted(PAPER), required=True)
    parser.add_argument("--samples", type=int, default=None,
                        help="test samples to draw (default the figure's: 4 for Figure 9, else 1)")
    args = parser.parse_args()
    count = args.samples or (4 if args.figure == 9 else 1)
    if count < 1:
        raise SystemExit(f"--samples {count}: expected a count >= 1")
    load_before = os.getloadavg()
    rows = {Path(run).name: measure(run, args.data, args.figure, count, Path(args.results))
            for run in args.runs}
    runs = kept_rows(args.results, "samples", rows, order=lambda row: (row["figure"], row["name"]))
    write_results(args.results, "samples", {"runs": runs}, markdown, load_before)


def measure(run_dir: str, data: str, figure: int, count: int, results: Path) -> dict[str, Any]:
    """One finished run's drawn samples (``samples_RUN.png`` in ``results``), their errors and its curve."""
    from opformer.eval.evaluate import evaluate_run
    from opformer.eval.run_plots import plot_test_predictions
    from opformer.runs import Run

    run = Run(run_dir)
    config = run.config
    (row,) = evaluate_run(run, data, [config.data.resolution], per_sample=True)
    name = run.path.name
    image = f"samples_{name}.png"
    results.mkdir(parents=True, exist_ok=True)
    plot_test_predictions(run, data, results / image, count)
    curve = summary(name, read_metrics(run.path), planned_epochs(run.path))
    return {"name": name, "figure": figure, "run": str(run_dir),
            "model": model_name(config.model),
            "resolution": row["resolution"], "input_noise": config.data.input_noise,
            "drawn": row["per_sample_relative_l2"][:count], "test_mean": row["relative_l2"],
            "test_samples": row["samples"], "best_epoch": curve["best_epoch"], "curve": verdict(curve),
            "image": image}


def markdown(result: dict[str, Any]) -> str:
    """A row per run: its figure, the drawn samples' errors and their mean beside the test split's and the paper's."""
    lines = ["# Test samples beside the truth (Cao 2021, Figures 9-11)", "",
             "Each run's first test samples, drawn as `opformer plot RUN` draws them (input, truth, prediction and the "
             "error), with their relative L2 errors; the test mean is over the whole test split. The curve column is "
             "the run's learning-curve verdict (`benchmarks/papers/curves.py`: converged when the last fifth of the "
             "epochs improves the best validation error by under 5%).", "",
             *table_head("figure", "run", "model", "n", "input noise", "drawn samples' errors", "their mean",
                         "test mean (samples)", "paper", "best epoch", "curve", "image")]
    for row in result["runs"]:
        drawn = row["drawn"]
        lines.append(table_row(
            row["figure"], row["name"], row["model"], row["resolution"], f"{row['input_noise']:g}",
            " / ".join(f"{e:.3e}" for e in drawn), f"{sum(drawn) / len(drawn):.3e}",
            f"{row['test_mean']:.3e} ({row['test_samples']})", f"{PAPER[row['figure']][0]}: {PAPER[row['figure']][1]}",
            row["best_epoch"], row["curve"], f"`{row['image']}`"))
    return page(lines)


if __name__ == "__main__":
    main()
