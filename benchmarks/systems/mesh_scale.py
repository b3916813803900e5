"""Measure 3 of issue 68: one training step of the GT on meshes and of Transolver at 10^4, 10^5 and 10^6 points on
this CPU: time per point and peak memory. Both models are linear in the points, so the time per point at 10^6 should
be within 1.3x of that at 10^5.

Run from the repository root: ``python -m benchmarks.systems.mesh_scale --profile`` (about ten minutes on 2 shared
cores; writes benchmarks/results/systems/mesh_scale.json and .md). ``--profile`` adds, for each model, the operators
that take the most processor time in one step at the two largest sizes (torch.profiler), to say where a ratio above
1.3 comes from. The C library keeps freed memory for reuse, as the trainer has it by default
(``train.retain_freed_memory``, :func:`opformer.runtime.retain_freed_memory`); ``--release-freed-memory`` measures
the C library's default instead (each large tensor a fresh memory map, its pages faulted in and zeroed anew at every
step), written as ``mesh_scale_released``.

Each cell (model, points) runs in a fresh process (its memory its own): one sample of ``n`` random points in the unit
square with random positive quadrature weights and a random target, the training step forward -> the
quadrature-weighted MSE -> backward -> Adam, ``--warmup`` steps, then the median of ``--repeats`` timed steps (wall
and processor seconds; under load read the processor seconds), ``--threads`` threads. Memory: the peak rise of the
process's anonymous resident memory from before the model and the sample are made to the end of the steps
(:func:`benchmarks.harness.anonymous_rise`: the sample, the model, Adam's state and the step's activations), and the
process's peak RSS (the interpreter and torch included). Small widths (stated in the results) keep the 10^6-point
steps within this machine's memory; the scaling in the points is what is measured.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

import torch

from benchmarks.harness import ROOT, anonymous_rise, argument_parser, describe_load, describe_machine, table_head, \
    write_results
from opformer.models.registry import build_model
from opformer.runtime import retain_freed_memory

#: model -> its config (small widths; the input is the coordinates and one field)
MODELS = {
    "gt_mesh": {"name": "galerkin_transformer_mesh", "in_channels": 1, "d_model": 32, "n_head": 4, "n_layers": 2,
                "dim_ff": 64, "decoder_width": 32},
    "transolver": {"name": "transolver", "in_channels": 1, "n_hidden": 32, "n_head": 4, "n_layers": 2,
                   "slice_num": 16, "weighting": "quadrature"},
}
POINTS = (10_000, 100_000, 1_000_000)


def make_step(name: str, n: int) -> tuple[torch.nn.Module, Any]:
    """The model of ``name`` and its training step on one random sample of ``n`` points."""
    torch.manual_seed(0)
    model = build_model(MODELS[name])
    x, pos = torch.randn(1, n, 1), torch.rand(1, n, 2)
    weights = torch.rand(1, n) + 0.5
    weights = weights / weights.sum()
    mask, target = torch.ones(1, n, dtype=torch.bool), torch.randn(1, n, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = (weights.unsqueeze(-1) * (model(x, pos, weights, mask) - target).square()).sum()
        loss.backward()
        optimizer.step()

    return model, step


def cell(name: str, n: int, warmup: int, repeats: int, threads: int, profile: bool, retain: bool) -> dict[str, Any]:
    """Time one (model, points) cell in this process."""
    torch.set_num_threads(threads)
    if retain:
        retain_freed_memory()
    walls, cpus = [], []
    load = os.getloadavg()
    with anonymous_rise() as rise:
        model, step = make_step(name, n)
        for _ in range(warmup):
            step()
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            step()
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    row = {"model": name, "points": n, "parameters": sum(p.numel() for p in model.parameters()),
           "seconds_median": statistics.median(walls), "cpu_seconds_median": statistics.median(cpus),
           "seconds": walls, "cpu_seconds": cpus, "memory_rise_mib": rise["mib"],
           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "loadavg_before": list(load), "loadavg_after": list(os.getloadavg())}
    if profile:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            step()
        ops = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:8]
        row["profile"] = [{"op": e.key, "self_cpu_ms": e.self_cpu_time_total / 1e3, "calls": e.count} for e in ops]
    return row


def markdown(result: dict[str, Any]) -> str:
    """The results table and the ratios of the time per point."""
    lines = ["# One training step on a mesh: time per point and memory, 10^4 to 10^6 points, this CPU", "",
             f"{describe_machine(result['machine'])}; command `{result['command']}`; {result['threads']} thread(s); "
             f"freed memory {'kept for reuse (the trainer default)' if result['retain_freed_memory'] else 'returned'}; "
             f"{describe_load(result)}. The machine's 2 cores are shared with other jobs: read the processor seconds.",
             "", f"Models (small widths, so that 10^6 points fit): {json.dumps(result['models'])}.", "",
             f"Step: forward, quadrature-weighted MSE, backward, Adam; batch 1; median of {result['repeats']} steps "
             f"after {result['warmup']} warm-up steps.", "",
             *table_head("model", "points", "wall s/step", "CPU s/step", "CPU us/point", "wall us/point",
                         "memory rise (MiB)", "peak RSS (MiB)", "load (1 min)")]
    for row in result["cells"]:
        lines.append(f"| {row['model']} | {row['points']:,} | {row['seconds_median']:.3f} | "
                     f"{row['cpu_seconds_median']:.3f} | {1e6 * row['cpu_seconds_median'] / row['points']:.3f} | "
                     f"{1e6 * row['seconds_median'] / row['points']:.3f} | {row['memory_rise_mib']:.0f} | "
                     f"{row['peak_rss_mib']:.0f} | {row['loadavg_before'][0]:.2f} |")
    lines += ["", *table_head("model", "CPU time per point, 10^5 / 10^4", "10^6 / 10^5", "within 1.3x",
                              "memory rise per point, 10^6 / 10^5")]
    for name in result["models"]:
        rows = {row["points"]: row for row in result["cells"] if row["model"] == name}
        per = {n: rows[n]["cpu_seconds_median"] / n for n in rows}
        mem = {n: rows[n]["memory_rise_mib"] / n for n in rows}
        if len(per) == 3:
            a, b, c = sorted(per)
            lines.append(f"| {name} | {per[b] / per[a]:.2f} | {per[c] / per[b]:.2f} | "
                         f"{'yes' if per[c] / per[b] <= 1.3 else 'no'} | {mem[c] / mem[b]:.2f} |")
    profiled = [row for row in result["cells"] if "profile" in row]
    if profiled:
        lines += ["", "Profiles (one step; the operators of most processor time):", ""]
        for row in profiled:
            ops = "; ".join(f"{op['op']} {op['self_cpu_ms']:.0f} ms" for op in row["profile"])
            lines.append(f"- {row['model']} at {row['points']:,}: {ops}")
    if result.get("note"):
        lines += ["", result["note"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--points", default=",".join(str(n) for n in POINTS))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--profile", action="store_true", help="profile one step at the two largest sizes")
    parser.add_argument("--note", default="", help="a sentence for the results (what the profile showed)")
    parser.add_argument("--release-freed-memory", action="store_true",
                        help="the C library's default: freed memory returned to the system")
    parser.add_argument("--cell", default=None, help="internal: MODEL:POINTS, one cell in this process, as JSON")
    args = parser.parse_args()
    points = [int(v) for v in args.points.split(",")]
    if args.cell:
        name, n = args.cell.split(":")
        print(json.dumps(cell(name, int(n), args.warmup, args.repeats, args.threads,
                              args.profile and int(n) in sorted(points)[-2:], not args.release_freed_memory)))
        return
    load_before = os.getloadavg()
    cells = []
    for name in args.models.split(","):
        for n in points:
            command = [sys.executable, "-m", "benchmarks.systems.mesh_scale", "--cell", f"{name}:{n}",
                       "--threads", str(args.threads), "--warmup", str(args.warmup), "--repeats", str(args.repeats),
                       "--points", args.points] + (["--profile"] if args.profile else []) \
                + (["--release-freed-memory"] if args.release_freed_memory else [])
            out = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True).stdout
            cells.append(json.loads(out.strip().splitlines()[-1]))
            print(f"{name} {n}: {cells[-1]['cpu_seconds_median']:.3f} CPU s", flush=True)
    name = "mesh_scale_released" if args.release_freed_memory else "mesh_scale"
    write_results(args.results, name, {"threads": args.threads, "warmup": args.warmup, "repeats": args.repeats,
                                       "retain_freed_memory": not args.release_freed_memory, "models": MODELS,
                                       "cells": cells, "note": args.note}, markdown, load_before)


if __name__ == "__main__":
    main()
