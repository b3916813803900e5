"""``opformer bench``: time, memory and FLOPs per step across resolutions, and the solvers against surrogates."""

from __future__ import annotations

import argparse
import json
import sys

from opformer.cli.options import DEVICE_HELP, AddCommand, output_path, parse_names
from opformer.errors import ConfigError

EXAMPLES = {
    "bench": "opformer bench --models gt_burgers,fno1d_burgers --resolutions 512,2048,8192 --batch 4 --mode train "
             "--peers --json bench.json --markdown bench.md --plot bench.png\n"
             "  opformer bench --solver burgers --resolutions 512,2048 --mode forward",
}


def cmd_bench(args: argparse.Namespace) -> int:
    """``opformer bench``: measure the cells, print the table, write JSON / markdown / plot."""
    from opformer.bench.report import plot_bench, to_markdown
    from opformer.bench.solver_timing import solver_case, solver_comparison
    from opformer.bench.sweep import BenchSettings, run_bench
    from opformer.runtime import resolve_device
    from opformer.io import write_atomic

    try:
        resolutions = [int(v) for v in args.resolutions.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"--resolutions {args.resolutions!r}: expected comma-separated integers") from None
    outputs = {name: output_path(f"--{name}", getattr(args, name)) for name in ("json", "markdown", "plot")}
    models = parse_names(args.models or "gt_burgers,ft_burgers,st_burgers,lt_burgers,fno1d_burgers")
    settings = BenchSettings(models=models, resolutions=resolutions, batch=args.batch,
                             mode=args.mode, repeats=args.repeats, warmup=args.warmup, peers=args.peers,
                             rounds=args.rounds, precision=args.precision, cuda_graphs=args.cuda_graphs,
                             matmul_precision=args.matmul_precision, device=str(resolve_device(args.device)))
    if args.threads is not None:
        settings.threads = args.threads
    if args.time_budget is not None:
        settings.time_budget = args.time_budget
    if args.memory_budget is not None:
        settings.memory_budget = args.memory_budget * 1024**3
    settings.validate()
    if args.solver is not None:
        solver_case(args.solver)
    report = solver = None
    if args.solver is None or args.models is not None:
        report = run_bench(settings)
    if args.solver is not None:
        solver = solver_comparison(settings, args.solver)
        if report is None:
            report = {"settings": vars(settings), "machine": {}, "cells": [], "slopes": {}}
        report["solver"] = solver
    command = "opformer bench " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["bench"] else ""
    report["command"] = command
    if report["cells"]:
        print(to_markdown(report, command))
    if outputs["json"]:
        write_atomic(outputs["json"], json.dumps(report, indent=2) + "\n")
    if outputs["markdown"]:
        write_atomic(outputs["markdown"], to_markdown(report, command))
    if outputs["plot"]:
        print(f"wrote {plot_bench(report, outputs['plot'])}")
    return 0


def add_parsers(add: AddCommand) -> None:
    """The parser of ``bench``."""
    p = add("bench", "Time, memory and FLOPs per step of models across resolutions (peers side by side).")
    p.add_argument("--models", default=None, metavar="PRESETS",
                   help="comma-separated model presets or run directories (trained or imported: their model) "
                        "(default gt_burgers,ft_burgers,st_burgers,lt_burgers,fno1d_burgers)")
    p.add_argument("--resolutions", default="512,2048,8192", help="comma-separated grid sizes per axis")
    p.add_argument("--batch", type=int, default=4, help="samples per step (default 4)")
    p.add_argument("--mode", default="train", choices=["forward", "train"],
                   help="forward: inference; train: forward + backward + Adam step (default)")
    p.add_argument("--repeats", type=int, default=10, help="timed steps per cell (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's default)")
    p.add_argument("--device", default="cpu", help=f"{DEVICE_HELP} (default cpu: timings are per device)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                   help="autocast of the steps, as train.precision (default fp32)")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="replay opformer's training steps as CUDA graphs, as train.cuda_graphs (CUDA only)")
    p.add_argument("--matmul-precision", default="highest", choices=["highest", "high"],
                   help="float32 products: highest, or high (TF32 on CUDA), as train.matmul_precision")
    p.add_argument("--time-budget", type=float, default=None,
                   help="seconds per cell; longer cells are skipped (predicted) or stopped (default 300)")
    p.add_argument("--memory-budget", type=float, default=None,
                   help="GiB per cell; larger cells are skipped or stopped (default 75%% of the RAM)")
    p.add_argument("--peers", action="store_true",
                   help="also run the published implementations (pip install 'opformer[peers]')")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure every cell this many times, each in a fresh process, an opformer cell and its peer's "
                        "back to back in alternating order; times are the medians over the rounds and the time ratio "
                        "the median of the per-round ratios (default 1)")
    p.add_argument("--solver", default=None, metavar="PDE",
                   help="time the built-in solver of burgers, darcy, navier-stokes or kolmogorov per sample against "
                        "its surrogates' batched inference (docs/bench.md)")
    p.add_argument("--json", help="write the full results as JSON")
    p.add_argument("--markdown", help="write the table as markdown")
    p.add_argument("--plot", help="write the log-log time/memory plot (PNG)")
    p.set_defaults(func=cmd_bench)
