"""FNO-nu = 1e-3 rollout benchmark (issue 4): FNO2d, F-FNO and Dil-ResNet, one-step versus pushforward training.

Each model is trained with its config in configs/navier_stokes/ (10 given frames -> the next one), once with
teacher forcing (one_step) and once with pushforward (one extra call without gradient), in a fresh process per
run; runs resume where they stopped. Evaluation rolls every test trajectory out from its first 10 frames to
frame 50 and reports the relative L2 averaged over the 40 predicted frames and at the last one.

Run from the repository root::

    .venv/bin/opformer generate navier-stokes --samples 1200 --nu 1e-3 --out data/ns_1e-3.h5
    .venv/bin/python -m benchmarks.papers.fno.navier_stokes --data data/ns_1e-3.h5 --epochs 500 --n-train 1000

``--epochs`` is one number for every model or a budget per model (``fno2d=60,ffno=4,dil_resnet=1``): the
models differ ~150x in cost per training sample, so on a CPU a fixed epoch count is either nothing for FNO2d
or days for Dil-ResNet.

Writes benchmarks/results/papers/fno/navier_stokes.json and benchmarks/results/papers/fno/navier_stokes.md.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    ROOT, argument_parser, gib, page, per_model_epochs, run_record, table_head, train_all, write_results)

MODELS = ("fno2d", "ffno", "dil_resnet")
STRATEGIES = {"one_step": [], "pushforward": ["rollout.strategy=pushforward", "rollout.unroll_steps=2"]}


def main() -> None:
    parser = argument_parser(__doc__, parallel=True)
    parser.add_argument("--data", default="data/ns_1e-3.h5")
    parser.add_argument("--epochs", default="500", help="N, or model=N,... per model")
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--n-val", type=int, default=100, help="validation trajectories (rolled out every epoch)")
    parser.add_argument("--n-test", type=int, default=100)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--runs", default="runs/navier-stokes-benchmark", help="folder of the run directories")
    args = parser.parse_args()

    from opformer.eval.evaluate import evaluate_run

    models = args.models.split(",")
    epochs = per_model_epochs(args.epochs, models)
    jobs = []
    for model in models:
        for strategy, extra in STRATEGIES.items():
            sets = [f"data.path={args.data}", f"train.epochs={epochs[model]}", f"data.n_train={args.n_train}",
                    f"data.n_val={args.n_val}", f"data.n_test={args.n_test}", *extra]
            config = ROOT / "configs" / "navier_stokes" / f"{model}.yaml"
            jobs.append((model, strategy, str(config), sets, str(Path(args.runs) / f"{model}-{strategy}")))
    load_before = os.getloadavg()
    start = time.perf_counter()
    summaries = train_all([(config, sets, run) for _, _, config, sets, run in jobs], args.jobs, args.threads)
    wall = time.perf_counter() - start
    rows = []
    for model, strategy, config, sets, run in jobs:
        started = time.perf_counter()
        (evaluation,) = evaluate_run(run, args.data, [None])
        seconds = time.perf_counter() - started
        rows.append({"model": model, "strategy": strategy, **run_record(summaries[run], config, sets),
                     "evaluation_seconds_per_trajectory": seconds / args.n_test, "test": evaluation})
    result = {
        "full_budget": set(epochs.values()) == {500} and args.n_train == 1000, "epochs": epochs,
        "n_train": args.n_train, "n_val": args.n_val, "n_test": args.n_test, "wall_seconds": wall,
        "runs": rows,
    }
    write_results(args.results, "navier_stokes", result, markdown, load_before)


def markdown(result: dict[str, Any]) -> str:
    """The results as a markdown table with the command and the budget."""
    budget = ("the FNO paper's budget (500 epochs, 1000 trajectories)" if result["full_budget"] else
              f"a REDUCED budget (epochs of one random window per trajectory: "
              f"{', '.join(f'{m} {e}' for m, e in result['epochs'].items())}; "
              f"{result['n_train']} training trajectories; the FNO paper trains 500 epochs on 1000)")
    lines = [
        "# FNO-nu = 1e-3 rollouts (64^2, 10 given frames, 40 rolled out) on this machine",
        "",
        f"Command: `{result['command']}`. Budget: {budget}; {result['n_val']} validation trajectories (model "
        f"selection by their rollout error, every epoch) and {result['n_test']} test trajectories. Load average before/after: "
        f"{result['loadavg_before'][0]:.2f} / {result['loadavg_after'][0]:.2f}; wall time "
        f"{result['wall_seconds'] / 60:.1f} min. The FNO paper reports about 1e-2 for FNO-2D with its full recipe.",
        "",
        *table_head("model", "training", "parameters", "traj. rel. L2 (test)", "final frame", "s/step", "train h",
                    "rollout s/traj", "peak RSS GiB", "best epoch"),
    ]
    for row in result["runs"]:
        test = row["test"]
        lines.append(f"| {row['model']} | {row['strategy']} | {row['parameters']:,} | {test['relative_l2']:.3e} | "
                     f"{test['final_relative_l2']:.3e} | {row['seconds_per_step']:.3f} | {row['train_hours']:.2f} | "
                     f"{row['evaluation_seconds_per_trajectory']:.3f} | {gib(row['peak_rss_gib'])} | "
                     f"{row['best_epoch']}/{row['epochs']} |")
    return page(lines,
                f"Seconds per step: batch 20, {result['runs'][0]['threads']} thread(s) per run; pushforward steps "
                "include the extra call without gradient.")


if __name__ == "__main__":
    main()
