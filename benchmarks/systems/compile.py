"""Compiled versus eager training steps (``train.compile``): GT-Burgers at n = 512 (batch 8) and n = 8192 (batch
4), FNO2d-Darcy at 85^2 (batch 8), presets ``gt_burgers`` and ``fno2d_darcy``, on this CPU.

Run from the repository root: ``OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.systems.compile``. Each cell is the
training step of ``opformer bench`` (:func:`opformer.bench.cell.make_step`: forward, MSE loss, backward, the
trainer's Adam) on a fixed random input, once with the eager model and once with ``torch.compile(model)``
(default inductor backend, which builds C++ kernels; ``--compile-mode`` passes a mode such as
``max-autotune-no-cudagraphs``, which also tries inductor's C++ GEMM templates); the first compiled step (the
compilation) is timed alone, then ``--warmup`` steps, then the median of ``--repeats`` steps. Inductor's on-disk
caches live in a fresh temporary folder, so the compile time is a cold one. Writes
benchmarks/results/systems/compile.json and .md (``compile_<mode>.json`` and .md with a mode).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Any

#: a cold compile: inductor's caches in a folder of this run (set before torch is imported)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="opformer_compile_bench_"))

import torch

from benchmarks.harness import argument_parser, describe_load, describe_machine, table_head, write_results
from opformer.bench.cell import input_shape, make_step
from opformer.bench.peers import Peer
from opformer.models.registry import build_model, preset

#: name -> (preset, resolution, batch)
CELLS = {"gt_burgers_512": ("gt_burgers", 512, 8), "gt_burgers_8192": ("gt_burgers", 8192, 4),
         "fno2d_darcy_85": ("fno2d_darcy", 85, 8)}


def measure(name: str, compiled: bool, warmup: int, repeats: int, mode: str | None = None) -> dict[str, Any]:
    """Time the training step of one cell, eager or compiled; a failing compile is recorded, not raised."""
    preset_name, resolution, batch = CELLS[name]
    torch.manual_seed(0)
    model = build_model(preset(preset_name))
    forward = torch.compile(model, mode=mode) if compiled else model
    x = torch.randn(input_shape(model, batch, resolution))
    with torch.no_grad():
        target = torch.randn_like(model(x))
    step, _ = make_step(Peer(model, forward), x, target, "train", own=True)
    load = os.getloadavg()
    row: dict[str, Any] = {"compiled": compiled, "loadavg_before": list(load)}
    try:
        start = time.perf_counter()
        step()
        row["first_step_seconds"] = time.perf_counter() - start
    except Exception as exc:  # a backend that cannot compile this model: the failure is the result
        row.update(status=f"failed: {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}",
                   loadavg_after=list(os.getloadavg()))
        return row
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    row.update(status="ok", seconds_median=statistics.median(times), seconds_min=min(times),
               seconds_max=max(times), repeats=repeats, loadavg_after=list(os.getloadavg()))
    if compiled:
        torch._dynamo.reset()
    return row


def markdown(result: dict[str, Any]) -> str:
    """The results table."""
    mode = result.get("compile_mode") or "default"
    lines = [f"# Compiled (torch.compile, inductor, mode {mode}) versus eager training steps on this CPU", "",
             f"{describe_machine(result['machine'])}; command `{result['command']}`; {result['threads']} threads; "
             f"{describe_load(result)}.", "",
             f"Training step of `opformer bench` (forward, MSE, backward, Adam) on a fixed input; median of "
             f"{result['repeats']} steps after {result['warmup']} warm-up steps; the first compiled step (the "
             "cold compilation) timed alone.", "",
             *table_head("cell", "eager step (s)", "compiled step (s)", "compiled / eager", "compile (first step, s)",
                         "load avg (1 min) eager / compiled")]
    for name, (eager, compiled) in result["cells"].items():
        if compiled["status"] != "ok":
            lines.append(f"| {name} | {eager['seconds_median']:.4f} | {compiled['status']} | - | - | "
                         f"{eager['loadavg_before'][0]:.2f} / {compiled['loadavg_before'][0]:.2f} |")
            continue
        ratio = compiled["seconds_median"] / eager["seconds_median"]
        lines.append(f"| {name} | {eager['seconds_median']:.4f} | {compiled['seconds_median']:.4f} | {ratio:.2f} | "
                     f"{compiled['first_step_seconds']:.1f} | {eager['loadavg_before'][0]:.2f} / "
                     f"{compiled['loadavg_before'][0]:.2f} |")
    lines += ["", result["note"], ""]
    return "\n".join(lines)


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3, help="steps after the first, not timed")
    parser.add_argument("--repeats", type=int, default=20, help="timed steps")
    parser.add_argument("--cells", default=",".join(CELLS), help="comma-separated subset of " + ", ".join(CELLS))
    parser.add_argument("--compile-mode", default=None, help="torch.compile mode (default: inductor's default)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    cells = {name: [measure(name, compiled, args.warmup, args.repeats, args.compile_mode) for compiled in (False, True)]
             for name in args.cells.split(",")}
    note = (f"The machine has {os.cpu_count()} cores shared with other jobs (see the load averages). "
            "compiled / eager < 1 means the compiled step is faster.")
    name = "compile" if args.compile_mode is None else f"compile_{args.compile_mode}"
    write_results(args.results, name, {"threads": args.threads, "warmup": args.warmup, "repeats": args.repeats,
                                       "compile_mode": args.compile_mode, "cells": cells, "note": note},
                  markdown, load_before)


if __name__ == "__main__":
    main()
