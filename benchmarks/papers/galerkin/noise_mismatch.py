"""Inverse Darcy with training and evaluation noise apart (Cao 2021, appendix Figure 12).

The paper's claim: a model trained on clean solutions is oversensitive to noise in evaluation (the inverse problem's
large Lipschitz constant, amplified by the network), so it recommends training with some noise. Its Figure 12
shows one test sample at (n_f, n_c) = (211, 71): trained at eps = 0 and evaluated at 0.01 and 0.015 (errors 0.194,
0.416); trained at 0.01 and evaluated at 0, 0.02, 0.05 (0.0235, 0.0754, 0.403); trained at 0.1 and evaluated at
0.05 (0.0691).

This script evaluates finished inverse Darcy runs (``benchmarks.papers.galerkin.darcy`` trains them, one per eps)
on the whole test split at every evaluation level of ``--levels``, with the seeded noise draw of
:func:`opformer.eval.evaluate.evaluate_run` scaled to each level, so every run and level sees the same draw. Rows
are kept by run folder name: invocations over different runs fill one table. Run from the repository root::

    .venv/bin/python -m benchmarks.papers.galerkin.noise_mismatch --data data/darcy_421.h5 \\
        --runs runs/darcy-benchmark/inverse-fno2d-43-15-eps0,runs/darcy-benchmark/inverse-fno2d-43-15-eps0.1

Writes benchmarks/results/papers/galerkin/noise_mismatch.{json,md,png}.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from benchmarks.harness import argument_parser, kept_rows, page, table_head, table_row, write_results

ATTENTION = {"galerkin": "gt", "fourier": "ft", "softmax": "st", "linear": "lt"}  # a transformer's row name
LEVELS = (0.0, 0.01, 0.015, 0.02, 0.05, 0.1)
# Figure 12 and Figure 11 (matched levels) of the paper: (trained eps, evaluated eps) -> relative L2 of one sample.
PAPER = {(0.0, 0.0): 0.0160, (0.0, 0.01): 0.194, (0.0, 0.015): 0.416, (0.01, 0.0): 0.0235, (0.01, 0.01): 0.0292,
         (0.01, 0.02): 0.0754, (0.01, 0.05): 0.403, (0.1, 0.05): 0.0691, (0.1, 0.1): 0.0885}


def main() -> None:
    parser = argument_parser(__doc__, runs="inverse Darcy")
    parser.add_argument("--levels", default=",".join(f"{v:g}" for v in LEVELS),
                        help="comma-separated evaluation noise levels eps")
    args = parser.parse_args()
    levels = parse_levels(args.levels)
    load_before = os.getloadavg()
    rows = {Path(run).name: measure(run, args.data, levels) for run in args.runs}
    result = {"paper": [{"trained_eps": t, "evaluated_eps": e, "relative_l2": v} for (t, e), v in PAPER.items()],
              "runs": kept_rows(args.results, "noise_mismatch", rows, order=lambda row: (
                  row["model"] != "gt", row["trained_eps"], row["name"]))}
    write_results(args.results, "noise_mismatch", result, markdown, load_before)
    plot(result, Path(args.results) / "noise_mismatch.png")


def parse_levels(text: str) -> list[float]:
    """``"0,0.01"`` as sorted distinct levels; anything but finite numbers >= 0 ends the script in one line."""
    try:
        levels = sorted({float(v) for v in text.split(",")})
    except ValueError:
        raise SystemExit(f"--levels {text}: expected comma-separated numbers >= 0") from None
    if any(not 0 <= v < float("inf") for v in levels):
        raise SystemExit(f"--levels {text}: expected comma-separated numbers >= 0")
    return levels


def measure(run_dir: str, data: str, levels: list[float]) -> dict[str, Any]:
    """One finished run's test error at each evaluation level, with what it was trained with."""
    from opformer.errors import ConfigError
    from opformer.eval.evaluate import evaluate_run
    from opformer.runs import Run

    run = Run(run_dir)
    config = run.config
    if config.data.direction != "inverse":
        raise ConfigError(f"{run_dir}: not an inverse problem (data.direction {config.data.direction})")
    errors = {}
    for level in levels:
        (row,) = evaluate_run(run, data, [config.data.resolution], input_noise=level)
        errors[f"{level:g}"] = {"relative_l2": row["relative_l2"], "std": row["relative_l2_std"]}
    return {"name": Path(run_dir).name, "model": model_name(config.model),
            "grid": [config.data.resolution, config.data.target_resolution], "trained_eps": config.data.input_noise,
            "samples": row["samples"], "errors": errors}


def model_name(model: dict[str, Any]) -> str:
    """A run's model in a table: a Galerkin-type transformer by its attention (gt, ft, st, lt; galerkin unless the
    config names another), any other model by its name."""
    if str(model.get("name", "")).startswith("galerkin_transformer"):
        return ATTENTION[model.get("attention_type", "galerkin")]
    return model.get("name", "?")


def markdown(result: dict[str, Any]) -> str:
    """The table: a row per run, a column per evaluation level; the paper's one-sample figures below."""
    levels = sorted({float(k) for row in result["runs"] for k in row["errors"]})
    lines = ["# Inverse Darcy, training and evaluation noise apart (Cao 2021, Figure 12)", "",
             "Relative L2 of the coefficient on the test split (mean over its samples) of each run, evaluated with "
             "input noise eps (on the pointwise-normalized solution, as in training: eps times the training "
             "samples' standard deviation at each point). The diagonal (evaluated at the trained level) is Table 3's "
             "setting. One seeded draw, scaled to each level.", "",
             *table_head("run", "model", "(n_f, n_c)", "trained eps", "samples",
                         *(f"eval eps {v:g}" for v in levels))]
    for row in result["runs"]:
        cells = [f"**{row['errors'][key]['relative_l2']:.4f}**" if float(key) == row["trained_eps"]
                 else f"{row['errors'][key]['relative_l2']:.4f}" if key in row["errors"] else "-"
                 for key in (f"{v:g}" for v in levels)]
        lines.append(table_row(row["name"], row["model"], f"({row['grid'][0]}, {row['grid'][1]})",
                               f"{row['trained_eps']:g}", row["samples"], *cells))
    lines += ["", "The paper's figures (one test sample, GT at (211, 71); Figure 11 for matched levels):", "",
              *table_head("trained eps", "evaluated eps", "relative L2"),
              *(table_row(f"{p['trained_eps']:g}", f"{p['evaluated_eps']:g}", p["relative_l2"])
                for p in result["paper"])]
    return page(lines, "Bold: evaluated at the trained level. The claim holds where a run trained at eps = 0 loses "
                       "more to small evaluation noise than a run trained with noise does.")


def plot(result: dict[str, Any], path: Path) -> None:
    """Error against the evaluation level, a line per run, the paper's points beside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from opformer.io import atomic_replace

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for row in result["runs"]:
        keys = sorted(row["errors"], key=float)
        ax.plot([float(k) for k in keys], [row["errors"][k]["relative_l2"] for k in keys], marker="o",
                label=f"{row['model']} trained at eps {row['trained_eps']:g}")
    for trained in sorted({p["trained_eps"] for p in result["paper"]}):
        points = [p for p in result["paper"] if p["trained_eps"] == trained]
        ax.plot([p["evaluated_eps"] for p in points], [p["relative_l2"] for p in points], "x--", alpha=0.6,
                label=f"paper GT trained at {trained:g} (one sample)")
    ax.set(xlabel="evaluation noise eps", ylabel="relative L2 (test)", yscale="log",
           title="Inverse Darcy: training vs evaluation noise")
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_replace(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
