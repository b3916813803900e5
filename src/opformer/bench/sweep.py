"""The sweep of ``opformer bench``: every model x implementation x resolution cell, timed within budgets.

Every cell (preset x implementation x resolution) runs in a fresh child process
(:mod:`opformer.bench.cell`), so its peak memory is its own. The parent predicts each cell's time
and memory from the smaller resolutions already measured and skips a cell that would exceed a budget;
a child that still goes over (or dies) is stopped and its cell marked, never the whole run.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from opformer.errors import ConfigError
from opformer.bench.cell import model_config
from opformer.bench.flops import matmul_peak
from opformer.bench.peers import OPFORMER, PEER_OF_PRESET
from opformer.train.step import check_graphs
from opformer.models.registry import PRESETS
from opformer.runs import CONFIG

GIB = 1024**3
#: Attention types whose cost grows like N^2; the growth assumed before two resolutions are measured.
QUADRATIC_ATTENTION = ("fourier", "softmax")


def total_memory() -> int:
    """Physical memory in bytes (Linux ``/proc/meminfo``; 16 GiB if unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 16 * GIB


@dataclass
class BenchSettings:
    """What ``opformer bench`` measures and its budgets (per cell)."""

    models: list[str]
    resolutions: list[int]
    batch: int = 4
    mode: str = "train"
    repeats: int = 10
    warmup: int = 2
    threads: int = field(default_factory=torch.get_num_threads)
    device: str = "cpu"
    precision: str = "fp32"  # autocast of the steps (fp32 | bf16 | fp16), as train.precision
    cuda_graphs: bool = False  # opformer's training steps replayed as CUDA graphs, as train.cuda_graphs
    matmul_precision: str = "highest"  # as train.matmul_precision
    peers: bool = False
    rounds: int = 1
    time_budget: float = 300.0
    memory_budget: float = field(default_factory=lambda: 0.75 * total_memory())

    def validate(self) -> None:
        """Raise ``ConfigError`` (one line) for unknown models or non-positive sizes."""
        unknown = [m for m in self.models if m not in PRESETS and not (Path(m) / CONFIG).is_file()]
        if unknown or not self.models:
            raise ConfigError(f"--models: unknown preset {', '.join(unknown) or '(none)'} (nor a run directory); "
                              f"valid: {', '.join(sorted(PRESETS))}")
        if not self.resolutions or min(self.resolutions) < 1:
            raise ConfigError(f"--resolutions: expected positive grid sizes, got {self.resolutions}")
        for name in ("batch", "repeats", "threads", "rounds"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name}: expected a positive integer, got {getattr(self, name)}")
        if self.warmup < 0 or self.time_budget <= 0 or self.memory_budget <= 0:
            raise ConfigError("--warmup must be >= 0 and the budgets positive")
        if self.mode not in ("forward", "train"):
            raise ConfigError(f"--mode: expected forward or train, got {self.mode!r}")
        if self.cuda_graphs:
            check_graphs(torch.device(self.device), self.precision, "--cuda-graphs")
            if self.mode != "train":
                raise ConfigError("--cuda-graphs: captures training steps; use it with --mode train")


def _growth(previous: list[dict[str, Any]], key: str, preset_name: str) -> tuple[float, float, int] | None:
    """``(value, exponent, resolution)`` to extrapolate ``key`` from the measured cells of one row."""
    measured = [r for r in previous if r["status"] == "ok"]
    if not measured:
        return None
    last = measured[-1]
    if len(measured) >= 2 and measured[-2]["resolution"] < last["resolution"]:
        before = measured[-2]
        exponent = math.log(last[key] / before[key]) / math.log(last["resolution"] / before["resolution"])
        exponent = max(exponent, 0.0)
    else:
        exponent = 2.0 if model_config(preset_name).get("attention_type") in QUADRATIC_ATTENTION else 1.0
    return last[key], exponent, last["resolution"]


def predict_skip(previous: list[dict[str, Any]], preset_name: str, resolution: int,
                 settings: BenchSettings) -> str | None:
    """The skip mark of a cell whose extrapolated time or memory exceeds a budget, else None."""
    steps = settings.warmup + settings.repeats + 1
    time_growth = _growth(previous, "seconds_median", preset_name)
    if time_growth is not None:
        value, exponent, base = time_growth
        if value * (resolution / base) ** exponent * steps > settings.time_budget:
            return "skipped: time budget (predicted)"
    memory_growth = _growth(previous, "peak_memory_bytes", preset_name)
    if memory_growth is not None:
        value, exponent, base = memory_growth
        if value * (resolution / base) ** exponent > settings.memory_budget:
            return "skipped: memory budget (predicted)"
    return None


def _rss(pid: int) -> int:
    """Current resident set of a process in bytes (0 if unknown)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@contextlib.contextmanager
def interrupts_held() -> Iterator[list[int]]:
    """Hold SIGINT and SIGTERM (in the main thread) until the block ends; yields the signals that arrived."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    previous = {s: signal.signal(s, lambda signum, frame: held.append(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield held
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run_child(spec: dict[str, Any], settings: BenchSettings) -> dict[str, Any]:
    """Run one cell in a fresh interpreter; stop it at the time or memory budget."""
    env = dict(os.environ, OMP_NUM_THREADS=str(spec["threads"]), MKL_NUM_THREADS=str(spec["threads"]))
    command = [sys.executable, "-m", "opformer.bench.cell", json.dumps(spec)]
    start = time.monotonic()
    child: subprocess.Popen[str] | None = None
    try:  # interrupted or terminated at any point once the child exists: it must not outlive the bench
        with interrupts_held() as held:  # an interrupt inside Popen() would leave the started child running
            child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        # a signal that reached the interpreter during Popen() but ran its handler only once the held handlers
        # were restored raises here, inside this try (a try opened after the hold left that moment uncovered)
        if held:
            signal.raise_signal(held[0])  # to the handler it was held from (the CLI's: exit 130 / 143)
            raise KeyboardInterrupt  # where that handler does not raise
        status = None
        while child.poll() is None:
            if time.monotonic() - start > settings.time_budget:
                status = f"skipped: time budget (stopped after {settings.time_budget:g} s)"
            elif _rss(child.pid) > settings.memory_budget:
                status = f"skipped: memory budget (stopped above {settings.memory_budget / GIB:.3g} GiB)"
            if status:
                child.kill()
                child.communicate()
                return {"status": status}
            time.sleep(0.05)
        out, err = child.communicate()
    except BaseException:
        if child is not None:
            child.kill()
            child.communicate()  # reaped and its pipes closed here, before the bench unwinds further
        raise
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        return {"status": failure(child.returncode, err)}
    return json.loads(lines[-1])


def failure(returncode: int, stderr: str) -> str:
    """The status of a cell whose process failed: the signal that killed it, else its last error line."""
    if returncode < 0:
        name = signal.Signals(-returncode).name
        return f"failed: killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    errors = [line for line in stderr.strip().splitlines() if not line.startswith("USDT:")]  # profiler chatter
    return f"failed: {(errors or [f'exit code {returncode}'])[-1][:200]}"


def plan_rows(settings: BenchSettings) -> list[tuple[str, str]]:
    """``(preset, implementation)`` rows: every model, and its peer after it when peers are on."""
    rows = []
    for name in settings.models:
        rows.append((name, OPFORMER))
        if settings.peers and name in PEER_OF_PRESET:
            rows.append((name, PEER_OF_PRESET[name][0]))
    return rows


def fit_slope(cells: list[dict[str, Any]], key: str) -> float | None:
    """Least-squares slope of log(key) against log(resolution) over the measured cells."""
    points = [(math.log(c["resolution"]), math.log(c[key])) for c in cells if c["status"] == "ok" and c[key] > 0]
    if len(points) < 2 or len({p[0] for p in points}) < 2:
        return None
    mean_x = sum(p[0] for p in points) / len(points)
    mean_y = sum(p[1] for p in points) / len(points)
    sxx = sum((p[0] - mean_x) ** 2 for p in points)
    return sum((p[0] - mean_x) * (p[1] - mean_y) for p in points) / sxx


#: the timing fields of a cell that are medians over its rounds (:func:`combine_rounds`)
ROUND_FIELDS = ("seconds_median", "cpu_seconds_median", "product_seconds")


def _round_ratios(cell: dict[str, Any], peer: dict[str, Any], key: str) -> list[float]:
    """``cell[key] / peer seconds`` of every round in which both cells were measured."""
    return [own[key] / other["seconds_median"] for own, other in zip(cell["rounds"], peer["rounds"])
            if own["status"] == other["status"] == "ok" and own.get(key) is not None]


def add_ratios(cells: list[dict[str, Any]]) -> None:
    """Set ``ratio_to_peer`` (opformer time / peer time) on opformer cells whose peer cell was measured, and
    ``floor_ratio_to_peer`` (opformer's matrix-product seconds / peer time: the ratio with every operation but
    the products gone) where the products were timed. Cells measured in several rounds get the median of the
    per-round ratios (each round's pair ran back to back) and their spread, ``ratio_rounds``."""
    peers = {(c["model"], c["resolution"]): c for c in cells if c["implementation"] != OPFORMER}
    for cell in cells:
        peer = peers.get((cell["model"], cell["resolution"]))
        if cell["implementation"] != OPFORMER or not peer or not cell["status"] == peer["status"] == "ok":
            continue
        cell["memory_ratio_to_peer"] = cell["peak_memory_bytes"] / peer["peak_memory_bytes"]
        if len(cell.get("rounds", ())) > 1:
            cell["ratio_rounds"] = _round_ratios(cell, peer, "seconds_median")
            floors = _round_ratios(cell, peer, "product_seconds")
            cell["ratio_to_peer"] = statistics.median(cell["ratio_rounds"])
            if floors:
                cell["floor_ratio_to_peer"] = statistics.median(floors)
            continue
        cell["ratio_to_peer"] = cell["seconds_median"] / peer["seconds_median"]
        if cell.get("product_seconds") is not None:
            cell["floor_ratio_to_peer"] = cell["product_seconds"] / peer["seconds_median"]


def combine_rounds(cell: dict[str, Any]) -> None:
    """Give a cell measured in several rounds the medians of its rounds' :data:`ROUND_FIELDS` and, as
    ``seconds_q1``/``seconds_q3``, the quartiles of the rounds' median step times."""
    rounds = [r for r in cell.get("rounds", ()) if r["status"] == "ok"]
    if len(rounds) < 2:
        return
    for key in ROUND_FIELDS:
        values = [r[key] for r in rounds if r.get(key) is not None]
        if values:
            cell[key] = statistics.median(values)
    medians = [r["seconds_median"] for r in rounds]
    cell["seconds_q1"], _, cell["seconds_q3"] = statistics.quantiles(medians, n=4, method="inclusive")
    cell["seconds_min"] = min(r["seconds_min"] for r in rounds)
    cell["seconds_max"] = max(r["seconds_max"] for r in rounds)
    cell["samples_per_second"] = cell["batch"] / cell["seconds_median"]
    cell["flop_rate"] = cell["flops_per_step"] / cell["seconds_median"]


def _round_summary(result: dict[str, Any]) -> dict[str, Any]:
    """What a round keeps of a cell's result: its status, timings and the load beside them."""
    keys = ("status", "seconds_min", "seconds_max", *ROUND_FIELDS)
    return {**{k: result[k] for k in keys if k in result}, "loadavg": list(os.getloadavg())}


def _cell_spec(preset_name: str, implementation: str, resolution: int, settings: BenchSettings) -> dict[str, Any]:
    """The JSON spec of one cell for :mod:`opformer.bench.cell`."""
    return {"preset": preset_name, "implementation": implementation, "resolution": resolution,
            "batch": settings.batch, "mode": settings.mode, "repeats": settings.repeats,
            "warmup": settings.warmup, "threads": settings.threads, "device": settings.device,
            "precision": settings.precision, "cuda_graphs": settings.cuda_graphs,
            "matmul_precision": settings.matmul_precision}


def _more_rounds(cells: list[dict[str, Any]], settings: BenchSettings, progress: Any) -> None:
    """Rounds 2.. of the cells measured in the first, in its order (per grid and model, the opformer cell and its
    peer's back to back) but with the peer first in every other round, so that a drift of the load favours neither."""
    for number in range(2, settings.rounds + 1):
        for resolution in sorted(settings.resolutions):
            for preset_name in settings.models:
                pair = [c for c in cells if c["model"] == preset_name and c["resolution"] == resolution
                        and c["status"] == "ok"]
                for cell in pair[::-1] if number % 2 == 0 else pair:
                    spec = _cell_spec(preset_name, cell["implementation"], resolution, settings)
                    result = _round_summary(run_child(spec, settings))
                    cell["rounds"].append(result)
                    progress(f"round {number}/{settings.rounds}: {cell['model']} [{cell['implementation']}] "
                             f"n={resolution}: " + (f"{result['seconds_median']:.4g} s/step" if result["status"] == "ok"
                                                    else result["status"]))


def run_bench(settings: BenchSettings, progress: Any = print) -> dict[str, Any]:
    """Measure every cell; returns the JSON-serialisable report (settings, machine, cells, slopes)."""
    settings.validate()
    load_before = list(os.getloadavg())  # the machine's load beside the timings (1, 5, 15 minutes)
    peak = matmul_peak(settings.threads, device=settings.device)
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {row: [] for row in plan_rows(settings)}
    for resolution in sorted(settings.resolutions):  # a model's cell and its peer's at one grid back to back
        for (preset_name, implementation), row in rows.items():
            spec = _cell_spec(preset_name, implementation, resolution, settings)
            unavailable = next((c["status"] for c in row if c["status"].startswith("peer unavailable")), None)
            skip = unavailable or predict_skip(row, preset_name, resolution, settings)
            result = {"status": skip} if skip else run_child(spec, settings)
            cell = {"model": preset_name, "implementation": implementation, "resolution": resolution,
                    "batch": settings.batch, "mode": settings.mode, **result}
            if cell["status"] == "ok":
                cell["peak_fraction"] = cell["flop_rate"] / peak
                cell["rounds"] = [_round_summary(result)]
            row.append(cell)
            progress(format_cell(cell))
    cells = [cell for row in rows.values() for cell in row]
    _more_rounds(cells, settings, progress)
    for cell in cells:
        combine_rounds(cell)
        if cell["status"] == "ok":
            cell["peak_fraction"] = cell["flop_rate"] / peak
    add_ratios(cells)
    slopes = {}
    for preset_name, implementation in plan_rows(settings):
        row = [c for c in cells if c["model"] == preset_name and c["implementation"] == implementation]
        slopes[f"{preset_name}/{implementation}"] = {"time": fit_slope(row, "seconds_median"),
                                                     "memory": fit_slope(row, "peak_memory_bytes")}
    return {
        "settings": {k: v for k, v in vars(settings).items()},
        "machine": {"torch": torch.__version__, "python": platform.python_version(),
                    "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                    "threads": settings.threads, "device": settings.device, "matmul_peak_flops": peak,
                    "loadavg_before": load_before, "loadavg_after": list(os.getloadavg())},
        "cells": cells,
        "slopes": slopes,
    }


def format_cell(cell: dict[str, Any]) -> str:
    """One progress line of a cell."""
    label = f"{cell['model']} [{cell['implementation']}] n={cell['resolution']}"
    if cell["status"] != "ok":
        return f"{label}: {cell['status']}"
    return (f"{label}: {cell['seconds_median']:.4g} s/step, {cell['peak_memory_bytes'] / GIB:.3g} GiB, "
            f"{cell['flop_rate'] / 1e9:.3g} GFLOP/s ({100 * cell['peak_fraction']:.0f}% of peak)")
