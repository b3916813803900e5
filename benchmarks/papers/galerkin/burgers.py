"""The Burgers results of the Galerkin Transformer paper (Table 2a and the appendix's Table 8), on this machine.

Generates the paper-size data set (1024 train + 100 validation + 100 test at n = 8192) if missing, trains the chosen
configs with the paper's recipe (100 epochs, n = 512) as parallel single-threaded jobs (a run already trained to its
end in ``--runs``, by an earlier invocation or a resumable queue across sessions, is read), evaluates each at n =
512, 2048 and 8192, measures the peak memory of one GT training step at n = 8192 (batch 4) in a fresh process, and
writes benchmarks/results/papers/galerkin/burgers.{json,md}; the rows of models measured by earlier invocations and
not chosen now are kept. A model is a config of configs/burgers/: Table 2a's ``gt``, ``ft``, ``st``, ``lt`` and
their ``*_regular`` rows, ``fno1d``, and Table 8's ``table8_*`` (with ``gt`` and ``gt_regular``, which are two of
its rows); ``gt_kv_dropout`` is the GT with the authors' attention dropout. ``--seeds`` trains each model again with
other seeds (runs ``NAME_seedS``) and adds their mean and spread, for rows whose differences are within a seed's;
with ``--only-seeds`` it trains and measures only those runs and keeps the configs' own seeds' rows (and the step
profiles) from the earlier results.

    .venv/bin/python -m benchmarks.papers.galerkin.burgers [--models gt,ft,fno1d] [--jobs 2] [--epochs 100] [--seeds 1,2]
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    GIB, ROOT, add_only_seeds, argument_parser, chosen_seeds, command, describe_machine, earlier, run_record, seed_of,
    seed_runs, seed_spread, table_head, time_step, train_all, write_results)

PAPER = {  # Table 2a (x 1e-3) at n = 512, 2048, 8192
    "gt": [1.203, 1.150, 1.025], "ft": [1.135, 1.123, 1.071], "fno1d": [4.373, 4.126, 4.151],
    "fno1d_fno_recipe": [15.8, 14.6, 13.9],  # the FNO code's own recipe (the paper quotes [57])
    "st": [1.271, 1.266, 1.330], "lt": [1.139, 1.149, 1.221],
    "gt_regular": [2.181, 1.512, 2.747], "ft_regular": [1.400, 1.477, 1.172], "st_regular": [1.927, 2.307, 1.981],
    "lt_regular": [1.813, 1.770, 1.617],
    # the appendix's Table 8 (initialisation, layer norm, attention dropout); its last row is "gt"
    "table8_regular_xavier": [200.4, 208.4, 217.5], "table8_regular_xavier_dropout": [206.4, 205.9, 207.0],
    "table8_regular_eta": [1.406, 21.38, 17.75], "table8_regular_eta_dropout": [16.85, 11.19, 2.571],
    "table8_regular_eta_delta": [15.14, 1.512, 15.98], "table8_xavier": [10.06, 10.12, 9.129],
    "table8_eta": [1.927, 2.453, 1.689],
}
PAPER["gt_kv_dropout"] = PAPER["gt"]  # the GT with the authors' dropout of K^T V, which their code ran
RESOLUTIONS = [512, 2048, 8192]


def step_profile(preset_name: str, n: int, batch: int, threads: int) -> dict:
    """Peak resident memory (GiB) and median seconds of a training step (3 after a warm-up), in a fresh process."""
    cell = time_step(preset_name, n, batch, threads)
    return {"model": preset_name, "n": n, "batch": batch, "threads": threads,
            "peak_rss_gib": cell["peak_memory_bytes"] / GIB, "seconds_per_step": cell["seconds_median"]}


def markdown(report: dict) -> str:
    """The results as a markdown table."""
    lines = [
        "# Burgers (Cao 2021, Example 5.1) on this machine",
        "",
        f"Command: `{report['command']}`  ",
        f"Machine: {describe_machine(report['machine'])}; 1024 training samples at n = 512 for each row's epochs, "
        "model selected on 100 validation samples, errors on 100 test samples.",
        "",
        *table_head("model", "seed", "params", "n = 512", "n = 2048", "n = 8192", "paper (512/2048/8192)",
                    "best epoch / epochs", "training (h)",
                    "s/step in training (n = 512, 1 thread; batch 8, the FNO code's recipe 20)"),
    ]
    for row in report["models"]:
        errs = " | ".join(f"{r['relative_l2'] * 1e3:.3f}e-3" for r in row["results"])
        paper = "/".join(f"{v:.3f}" for v in PAPER.get(row["model"], [])) + "e-3"
        lines.append(f"| {row['model']} | {row_seed(row)} | {row['parameters']:,} | {errs} | {paper} | "
                     f"{row['best_epoch']}/{row['epochs']} | {train_hours(row):.2f} | {row['seconds_per_step']:.3f} |")
    groups: dict[str, list[tuple[int, list[float]]]] = {}
    for row in report["models"]:
        groups.setdefault(row["model"], []).append((row_seed(row), [r["relative_l2"] for r in row["results"]]))
    spread = seed_spread(groups, [f"n = {n}" for n in RESOLUTIONS], 3)
    if spread:
        spread += ["", "A seed whose best epoch is far before its last diverged there (as the paper reads the best "
                   "epochs of its Table 8); it counts with its best checkpoint's error."]
    lines += spread
    lines += ["", "Each row's command (a run trained by the resumable queue across sessions, shared with other jobs, "
              "reports its wall time and seconds per step at that load):", ""]
    lines += [f"- {row['model']} (seed {row_seed(row)}): `{row.get('command', report['command'])}`"
              for row in report["models"]]
    lines += ["", "Training steps measured in fresh processes (median of 3 after a warm-up):", "",
              *table_head("model", "n", "batch", "threads", "s/step", "peak RSS (GiB)")]
    for p in report["step_profiles"]:
        lines.append(f"| {p['model']} | {p['n']} | {p['batch']} | {p['threads']} | {p['seconds_per_step']:.3f} | "
                     f"{p['peak_rss_gib']:.2f} |")
    lines += ["", "For comparison, the authors' code on this machine: GT 0.109 s per step (b=8, n=512) and "
              "1.4 GiB peak for one GT step at n = 8192, b = 4.", ""]
    return "\n".join(lines)


def row_seed(row: dict[str, Any]) -> int:
    """A row's seed (rows from before ``--seeds`` hold none and no config path: their model's config's)."""
    return seed_of(row, ROOT / "configs" / "burgers" / f"{row['model']}.yaml")


def train_hours(row: dict) -> float:
    """Hours a row trained (rows before benchmarks/harness.py held the run's summary: ``train_seconds``)."""
    return row["train_hours"] if "train_hours" in row else row["train_seconds"] / 3600


def training_jobs(names: list[str], seeds: list[int], only_seeds: bool, data: Path, epochs: int, runs: Path
                  ) -> dict[tuple[str, int | None], tuple[str, list[str], str]]:
    """The runs to train, ``(model, seed) -> (config, overrides, run directory)``: each model with its config's
    seed (``None``; not with ``only_seeds``) and with each of ``seeds`` (runs ``NAME_seedS``)."""
    return {(name, seed): (str(ROOT / "configs" / "burgers" / f"{name}.yaml"),
                           [f"data.path={data}", f"train.epochs={epochs}", *sets],  # train_all records the threads
                           str(runs / run))
            for name in names for run, seed, sets in seed_runs(name, seeds, only_seeds)}


def main() -> None:
    parser = argument_parser(__doc__, parallel=True)
    parser.add_argument("--models", default="gt,ft,fno1d")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--data", default=str(ROOT / "data" / "burgers.h5"))
    parser.add_argument("--runs", default=str(ROOT / "runs" / "bench_burgers"))
    parser.add_argument("--seeds", default="",
                        help="comma-separated seeds to train each model with beside its config's (runs NAME_seedS)")
    add_only_seeds(parser)
    args = parser.parse_args()
    seeds = chosen_seeds(parser, args)

    from opformer.eval.evaluate import evaluate_run

    data, runs = Path(args.data), Path(args.runs)
    load_before = os.getloadavg()
    if not data.is_file():
        subprocess.run([sys.executable, "-m", "opformer", "generate", "burgers", "--samples", "1224",
                        "--resolution", "8192", "--out", str(data)], check=True)
    names, threads = args.models.split(","), args.threads or 1
    jobs = training_jobs(names, seeds, args.only_seeds, data, args.epochs, runs)
    summaries = train_all(list(jobs.values()), args.jobs, threads)
    rows = [{"model": name, "seed": row_seed({"model": name}) if seed is None else seed,
             **run_record(summaries[run], config, sets), "results": evaluate_run(run, data, RESOLUTIONS),
             "run": run, "command": command()} for (name, seed), (config, sets, run) in jobs.items()]
    from opformer.models.registry import PRESETS

    profiled = [] if args.only_seeds else [m for m in names if f"{m}_burgers" in PRESETS]  # a variant's: its preset's
    profiles = [step_profile(f"{m}_burgers", 512, 8, n_threads) for m in profiled for n_threads in (1, 2)]
    if "gt" in profiled:
        profiles.append(step_profile("gt_burgers", 8192, 4, 2))
    kept = earlier(args.results, "burgers")
    measured = {(row["model"], row["seed"]) for row in rows}
    rows = [{"command": kept["command"], **row} for row in kept.get("models", [])
            if (row["model"], row_seed(row)) not in measured] + rows
    profiles = [p for p in kept.get("step_profiles", []) if p["model"].removesuffix("_burgers") not in profiled
                and not (p["n"] == 8192 and "gt" in profiled)] + profiles
    report = {
        "epochs": args.epochs,
        "models": rows,
        "step_profiles": profiles,
        "paper_x1e-3": PAPER,
        "benchmark_peak_rss_gib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20,
    }
    write_results(args.results, "burgers", report, markdown, load_before)


if __name__ == "__main__":
    main()
