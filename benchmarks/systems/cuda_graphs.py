"""Every preset of the model registry as a CUDA-graph training step (issue 39 §3): does its step capture, what
does capturing cost, and what does a replayed step take against the eager one (fp32, small grids, batch 4).

Run on a CUDA machine from the repository root (``benchmarks/systems/gpu.sh`` does):
``python -m benchmarks.systems.cuda_graphs --results DIR``. Each preset is measured in a fresh process (a failed capture leaves CUDA's random-number state
unusable in its process); a preset whose step cannot be captured is recorded with the one-line error the trainer
gives. Writes DIR/cuda_graphs.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import torch

from benchmarks.harness import argument_parser, describe_load, describe_machine, page, table_head, write_results
from opformer.bench.cell import input_shape
from opformer.config import OptimConfig
from opformer.errors import ConfigError
from opformer.models.registry import PRESETS, build_model, preset
from opformer.runtime import grad_scaler
from opformer.train.optim import build_optimizer
from opformer.train.step import WARMUP_STEPS, TrainStep
from opformer.train.strategies import StepDraws

#: grid points per axis by spatial dimension (kept small: the point is capture and launch cost)
RESOLUTION = {1: 512, 2: 64, 3: 16}
BATCH, STEPS = 4, 20


def _time(step: Any, steps: int) -> float:
    """Median seconds of ``steps`` calls of ``step`` (CUDA events)."""
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


def measure(name: str, device: torch.device) -> dict[str, Any]:
    """One preset: eager step time, then capture (its cost) and the replayed step's time, or why not."""
    row: dict[str, Any] = {}
    for graphs in (False, True):
        torch.manual_seed(0)
        model = build_model(preset(name)).to(device)
        model.train()
        resolution = RESOLUTION[int(getattr(model, "ndim", 1))]
        x = torch.randn(input_shape(model, BATCH, resolution), device=device)
        with torch.no_grad():
            target = torch.randn_like(model(x))
        optimizer = build_optimizer(model.parameters(), OptimConfig(lr=1e-4))
        runner = TrainStep(list(model.parameters()), optimizer, grad_scaler("fp32", device), "fp32", 1.0, device,
                           graphs=graphs, batch_size=BATCH, name=model.__class__.__name__)

        def loss_fn(batch: tuple[torch.Tensor, ...], draws: StepDraws) -> torch.Tensor:
            return (model(batch[0]) - batch[1]).square().mean()

        def step() -> None:
            runner(loss_fn, (x, target), StepDraws())

        row["resolution"] = resolution
        try:
            for _ in range(WARMUP_STEPS):
                step()
            torch.cuda.synchronize(device)
            start = time.perf_counter()
            step()  # eager, or the capture and first replay
            torch.cuda.synchronize(device)
            row["capture_seconds" if graphs else "first_seconds"] = time.perf_counter() - start
            row["graph_step_seconds" if graphs else "eager_step_seconds"] = _time(step, STEPS)
            row["status"] = "captured" if graphs else row.get("status", "")
        except ConfigError as exc:
            row["status"] = str(exc)
        del model, optimizer, runner
        torch.cuda.empty_cache()
    if "graph_step_seconds" in row:
        row["speedup"] = row["eager_step_seconds"] / row["graph_step_seconds"]
    return row


def markdown(result: dict[str, Any]) -> str:
    """The table of the presets."""
    lines = ["# Training steps as CUDA graphs, every preset", "",
             f"{result['device']}; {describe_machine(result['machine'])}; {describe_load(result)}. Batch {BATCH}, "
             f"fp32, grids {RESOLUTION[1]} (1D), {RESOLUTION[2]}^2, {RESOLUTION[3]}^3; median of {STEPS} steps "
             "(CUDA events). `python -m benchmarks.systems.cuda_graphs`, from `benchmarks/systems/gpu.sh`.", "",
             *table_head("preset", "n", "eager ms", "graph ms", "speed-up", "capture s", "status")]
    for name, row in result["presets"].items():
        def ms(key: str) -> str:
            return f"{row[key] * 1e3:.2f}" if key in row else "-"

        speedup = f"{row['speedup']:.1f}x" if "speedup" in row else "-"
        capture = f"{row['capture_seconds']:.2f}" if "capture_seconds" in row else "-"
        lines.append(f"| {name} | {row.get('resolution', '-')} | {ms('eager_step_seconds')} | "
                     f"{ms('graph_step_seconds')} | {speedup} | {capture} | {row['status']} |")
    return page(lines)


def main() -> None:
    """Measure every preset (or ``--presets``), each in a child process, and write the results."""
    parser = argument_parser(__doc__)
    parser.add_argument("--presets", default=",".join(sorted(PRESETS)), help="comma-separated presets")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child: measure this preset, print its JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, torch.device("cuda"))), flush=True)
        return
    load = os.getloadavg()
    presets = {}
    for name in args.presets.split(","):
        try:
            done = subprocess.run([sys.executable, "-m", __spec__.name, "--one", name], capture_output=True, text=True,
                                  timeout=120)
            lines = done.stdout.strip().splitlines()
            presets[name] = json.loads(lines[-1]) if done.returncode == 0 and lines else {
                "status": f"failed (exit {done.returncode}): {(done.stderr.strip().splitlines() or [''])[-1][:160]}"}
        except subprocess.TimeoutExpired:
            presets[name] = {"status": "failed: over 120 s"}
        print(name, presets[name], flush=True)
    result = {"device": torch.cuda.get_device_name(0), "presets": presets}
    write_results(args.results, "cuda_graphs", result, markdown, load, "torch")


if __name__ == "__main__":
    main()
