"""Surrogate versus solver (issue 26, section 3): seconds per sample of opformer's built-in solvers against the
batched inference of the surrogates the repository trains on their data, on this CPU.

For each PDE, ``opformer bench --solver NAME``'s comparison (:mod:`opformer.bench.solver_timing`): the data
generator of the PDE registry with its defaults and ``workers`` = ``--threads``, producing what the surrogate
predicts (Burgers u(., 1) at n; Darcy u on 421^2 nodes, which the 141 and 85 grids subsample; FNO-nu 1e-3 40
frames on 64^2; Kolmogorov 16 frames on 64^2 solved on 256^2), against forward cells of ``opformer bench`` (a fresh
process each, ``--threads`` threads) at the batch size fastest per sample, a rollout counted as its model calls.

Run from the repository root::

    .venv/bin/python -m benchmarks.solvers.solver_vs_surrogate --threads 1

Each (PDE, threads) comparison replaces only its own entry of benchmarks/results/solvers/solver_vs_surrogate.json, with
its command and the load averages around it, so PDEs and thread counts can be measured in separate invocations.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from benchmarks.harness import argument_parser, command, describe_load, describe_machine, listed, write_results
from opformer.bench.report import comparison_table
from opformer.bench.solver_timing import SOLVER_CASES, solver_comparison
from opformer.bench.sweep import BenchSettings

NAME = "solver_vs_surrogate"


def markdown(result: dict[str, Any]) -> str:
    """The results table, one row per surrogate, with the range of solver / surrogate ratios per PDE."""
    lines = ["# Surrogate versus solver on this CPU, seconds per sample", "",
             f"{describe_machine(result['machine'])}; {describe_load(result)} (the last invocation; each "
             "comparison's own command and load averages are below).", "", result["note"], "",
             *([result["remark"], ""] if result.get("remark") else [])]
    for threads in sorted({c["threads"] for c in result["comparisons"]}):
        comparisons = [c for c in result["comparisons"] if c["threads"] == threads]
        lines += [f"## {threads} thread{'s' if threads > 1 else ''} (solver workers = surrogate threads)", "",
                  *comparison_table(comparisons), ""]
        for comparison in comparisons:
            spans = []
            for key in ("speedup", "cpu_speedup"):
                ratios = sorted((row[key] for row in comparison["rows"] if row[key] is not None))
                spans.append("n/a" if not ratios else f"{ratios[0]:.3g}x" if len(ratios) == 1
                             else f"{ratios[0]:.3g}x to {ratios[-1]:.3g}x")
            lines.append(f"- {comparison['solver']}: solver / surrogate {spans[0]} (processor time {spans[1]}); "
                         f"{describe_load(comparison)}; `{comparison['command']}`")
        lines.append("")
    return "\n".join(lines)


NOTE = ("Solver: the PDE registry's data generator with its defaults (what `opformer generate NAME` runs) and "
        "`workers` = the thread count, timed end to end (random inputs included, a negligible share) over one block "
        "of samples per worker (Burgers 128, Darcy 8, Navier-Stokes 50, Kolmogorov 8: the generators' batches), "
        "median of up to 3 runs within 60 s, in wall and in processor seconds (this process and its worker "
        "processes); trajectories start at the last given frame (no spin-up: the cost per step is the same). "
        "Darcy's solver must solve on 421^2: the surrogates' 141 and 85 grids are subsamples of that solve, which is "
        "what makes the data accurate. Surrogate: `opformer bench` forward cells (inference mode, a fresh process "
        "per batch size, untrained weights: inference costs the same trained or not) at batch 1, 4, 16, ... until "
        "one takes no less processor time per sample; that one is reported, wall and processor time. With one "
        "thread per job on a machine shared with other jobs, the processor time is the cost that depends least on "
        "the others' load. A rollout of F frames is ceil(F / t_out) model calls (the context shift between calls "
        "not timed). solver / surrogate < 1 means the solver is faster. GFLOP/sample counts matrix products and "
        "convolutions only (FFTs not counted).")


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--solvers", default=",".join(SOLVER_CASES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--resolutions", default="512,8192", help="Burgers grids")
    parser.add_argument("--repeats", type=int, default=5, help="timed surrogate steps per cell")
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    solvers = listed(args.solvers, list(SOLVER_CASES), "--solvers")
    path = Path(args.results) / f"{NAME}.json"
    comparisons = json.loads(path.read_text())["comparisons"] if path.exists() else []
    load_before = os.getloadavg()
    for solver in solvers:
        models = list(SOLVER_CASES[solver].surrogates)
        settings = BenchSettings(models=models, resolutions=[int(v) for v in args.resolutions.split(",")],
                                 mode="forward", repeats=args.repeats, warmup=args.warmup, threads=args.threads)
        settings.validate()
        before = os.getloadavg()
        comparison = solver_comparison(settings, solver)
        comparison.update(command=command(), loadavg_before=list(before), loadavg_after=list(os.getloadavg()))
        comparisons = [c for c in comparisons if (c["solver"], c["threads"]) != (solver, args.threads)]
        comparisons.append(comparison)
        comparisons.sort(key=lambda c: (c["threads"], list(SOLVER_CASES).index(c["solver"])))
        write_results(args.results, NAME, {"note": NOTE, "comparisons": comparisons}, markdown, load_before,
                      "numpy", "scipy")


if __name__ == "__main__":
    main()
