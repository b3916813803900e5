"""Domain padding of the FNO on Darcy flow (issue 46): the existing FNO2d configs (configs/darcy/fno2d_141.yaml,
trained like the GT with the weighted H1 loss, and fno2d_l2_141.yaml, the plain relative L2 loss) trained without
padding and with it (``model.padding``: a fraction of each closed axis, 0.1 the default a run on closed data now
gets), on a short budget at a small grid; test errors at the training grid and zero-shot at the stored one.

Run from the repository root (runs resume where they stopped)::

    opformer generate darcy --samples 300 --resolution 85 --out data/darcy_85.h5
    python -m benchmarks.papers.fno.darcy_padding --data data/darcy_85.h5 --resolution 43 --epochs 10 --jobs 2 \\
        --threads 1

Writes benchmarks/results/papers/fno/darcy_padding.json and .md.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    ROOT, argument_parser, describe_load, page, run_record, table_head, table_row, train_all, write_results)

CONFIGS = {"fno2d": ROOT / "configs" / "darcy" / "fno2d_141.yaml",
           "fno2d_l2": ROOT / "configs" / "darcy" / "fno2d_l2_141.yaml"}


def main() -> None:
    parser = argument_parser(__doc__, parallel=True)
    parser.add_argument("--data", default="data/darcy_85.h5")
    parser.add_argument("--resolution", type=int, default=43, help="training grid (nodes of the stored one)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--n-train", type=int, default=200)
    parser.add_argument("--n-eval", type=int, default=50, help="validation and test samples each")
    parser.add_argument("--paddings", default="0,0.1", help="model.padding values, comma-separated")
    parser.add_argument("--runs", default="runs/padding-darcy", help="folder of the run directories")
    args = parser.parse_args()

    from opformer.data.store import read_info
    from opformer.eval.evaluate import evaluate_run

    stored = read_info(args.data).spatial_shape[0]
    paddings = [float(p) if "." in p else int(p) for p in args.paddings.split(",")]
    jobs = []
    for model, config in CONFIGS.items():
        for padding in paddings:
            sets = [f"data.path={args.data}", f"data.resolution={args.resolution}", f"train.epochs={args.epochs}",
                    f"data.n_train={args.n_train}", f"data.n_val={args.n_eval}", f"data.n_test={args.n_eval}",
                    f"model.padding={padding}"]
            jobs.append((model, padding, str(config), sets, str(Path(args.runs) / f"{model}-padding{padding}")))
    load_before = os.getloadavg()
    start = time.perf_counter()
    summaries = train_all([(config, sets, run) for *_, config, sets, run in jobs], args.jobs, args.threads)
    wall = time.perf_counter() - start
    rows = [{"model": model, "padding": padding, **run_record(summaries[run], config, sets),
             "test": evaluate_run(run, args.data, [args.resolution, stored])}
            for model, padding, config, sets, run in jobs]
    result = {"data": args.data, "resolution": args.resolution, "stored": stored, "epochs": args.epochs,
              "n_train": args.n_train, "n_eval": args.n_eval, "wall_seconds": wall, "runs": rows}
    write_results(args.results, "darcy_padding", result, markdown, load_before)


def markdown(result: dict[str, Any]) -> str:
    """The runs as a table: test relative L2 at the training grid and zero-shot at the stored grid."""
    n, stored = result["resolution"], result["stored"]
    lines = ["# Domain padding of FNO2d on Darcy flow (issue 46)", "",
             f"Command: `{result['command']}`. Data: {result['data']} ({stored}^2 nodes); trained at {n}^2 for "
             f"{result['epochs']} epochs of {result['n_train']} samples (batch 4, the configs' OneCycle), selected on "
             f"{result['n_eval']} validation samples, tested on {result['n_eval']}; {stored}^2 is zero-shot; "
             f"{describe_load(result)}. Wall time {result['wall_seconds'] / 60:.1f} min.", "",
             "`padding` 0: no padding (the FFT treats the closed square as periodic, as before); 0.1: zeros appended "
             "to 10% of each axis after the lifting, cropped before the projection (the default of a run on closed "
             "data since issue 46).", "",
             *table_head("config", "padding", "parameters", f"rel. L2 (test) at {n}", f"at {stored} (zero-shot)",
                         "s/step", "threads", "best epoch")]
    for row in result["runs"]:
        at = {r["resolution"]: r["relative_l2"] for r in row["test"]}
        lines.append(table_row(row["config"], row["padding"], f"{row['parameters']:,}", f"{at[n]:.3e}",
                               f"{at[stored]:.3e}", f"{row['seconds_per_step']:.3f}", row["threads"],
                               f"{row['best_epoch']}/{row['epochs']}"))
    return page(lines)


if __name__ == "__main__":
    main()
