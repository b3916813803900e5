"""Shared by the training benchmarks: train runs in fresh processes (so each peak RSS is its own), resumably."""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import platform
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opformer.io import write_atomic


def exit_with_parent(parent: int, poll_seconds: float = 2.0) -> None:
    """End this worker process once the benchmark process ``parent`` is gone, however it died (even SIGKILL):
    an orphaned training run would hold a core for hours. Checkpoints are written atomically, so the run
    resumes from its last epoch."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def train_one(config: str, sets: list[str], run_dir: str, threads: int, parent: int) -> dict[str, Any]:
    """Train (or resume) one run in this (fresh) process; its summary with the peak RSS and threads."""
    import torch

    from opformer.config import load_config
    from opformer.train.trainer import train

    exit_with_parent(parent)
    torch.set_num_threads(threads)
    resume = (Path(run_dir) / "config.yaml").exists()
    summary = train(load_config(config, sets), run_dir, resume=resume)
    summary["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    summary["threads"] = threads
    return summary


def add_parallel_arguments(parser: argparse.ArgumentParser) -> None:
    """``--jobs`` (runs trained at once) and ``--threads`` (per run; default: the cores shared out)."""
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at once")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads per run (default: cores / jobs; give 1 when another job shares the cores)")


def train_all(jobs: list[tuple[str, list[str], str]], parallel: int, threads: int | None = None
              ) -> dict[str, dict[str, Any]]:
    """Train ``(config, overrides, run_dir)`` jobs, ``parallel`` at a time, each with ``threads`` threads (default:
    the machine's cores shared out) in a process of its own; return the summaries by run directory."""
    context = multiprocessing.get_context("spawn")
    threads = threads or max(1, (os.cpu_count() or 1) // parallel)
    with concurrent.futures.ProcessPoolExecutor(parallel, mp_context=context, max_tasks_per_child=1) as pool:
        futures = {pool.submit(train_one, config, sets, run, threads, os.getpid()): run for config, sets, run in jobs}
        return {futures[f]: f.result() for f in concurrent.futures.as_completed(futures)}


def per_model_epochs(text: str, models: list[str]) -> dict[str, int]:
    """The ``--epochs`` of a benchmark: ``"40"`` -> 40 for every model; ``"fno2d=60,ffno=4"`` -> those (every
    model must be given)."""
    if "=" not in text:
        return dict.fromkeys(models, int(text))
    epochs = {name: int(value) for name, value in (item.split("=") for item in text.split(","))}
    missing = [model for model in models if model not in epochs]
    if missing:
        raise SystemExit(f"--epochs: no budget for {', '.join(missing)} (expected model=N for every model)")
    return epochs


def machine() -> dict[str, Any]:
    """What the results were measured on."""
    import torch

    return {"cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__}


def run_record(summary: dict[str, Any], config: str, sets: list[str], root: Path) -> dict[str, Any]:
    """What a results table reports of a trained run: its config, size, budget, speed and memory."""
    return {"config": str(Path(config).relative_to(root)), "overrides": sets, "parameters": summary["parameters"],
            "epochs": summary["epochs"], "best_epoch": summary["best_epoch"],
            "seconds_per_step": summary["seconds_per_step"], "train_hours": summary["train_seconds"] / 3600,
            "peak_rss_gib": summary["peak_rss_gib"], "threads": summary["threads"],
            "best_val_relative_l2": summary["best_val_relative_l2"]}


def write_results(results: Path, name: str, result: dict[str, Any], markdown: Callable[[dict[str, Any]], str],
                  load_before: tuple[float, float, float]) -> None:
    """Add the command, machine and load to ``result``; write ``name``.json and ``name``.md; print the table."""
    result.update({"command": f"python benchmarks/{name}.py " + " ".join(sys.argv[1:]), "machine": machine(),
                   "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg())})
    results.mkdir(parents=True, exist_ok=True)
    write_atomic(results / f"{name}.json", json.dumps(result, indent=2) + "\n")
    write_atomic(results / f"{name}.md", markdown(result))
    print(markdown(result))
