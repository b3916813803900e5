"""``opformer quickstart`` (``burgers``, the default): a Galerkin Transformer on Burgers, end to end in a few
minutes on a laptop CPU."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from opformer.config import config_from_dict
from opformer.data.generate import generate_file
from opformer.eval.evaluate import evaluate_run, format_table
from opformer.eval.run_plots import plot_run
from opformer.models.registry import preset
from opformer.runtime import resolve_device
from opformer.io import write_atomic
from opformer.train.trainer import train

# A small Burgers set (the paper's PDE, viscosity and GRF) stored at n = 2048, trained at n = 512.
SAMPLES = {"n_train": 256, "n_val": 32, "n_test": 64}
STORED, TRAINED = 2048, 512


def quickstart_config(data_path: str, seed: int = 1127802) -> dict:
    """The run config of the quickstart: the paper's Burgers Galerkin Transformer, a shorter schedule."""
    return {
        "seed": seed,
        "model": preset("gt_burgers"),
        "data": {"path": data_path, "resolution": TRAINED, **SAMPLES},
        "loss": {"name": "h1_relative", "gamma": 0.1},
        "optim": {"name": "adam", "lr": 1e-3},
        "schedule": {"name": "onecycle", "div_factor": 1e4, "final_div_factor": 1e4, "pct_start": 0.2},
        "train": {"epochs": 30, "batch_size": 8, "grad_clip": 1.0},
    }


def quickstart(out: str | os.PathLike = "runs/quickstart", device: str = "auto", seed: int = 1127802) -> list[dict]:
    """Generate data, train a Galerkin Transformer, evaluate at two resolutions, print a table, write plots;
    ``seed``: the run's seed (the data's is fixed)."""
    resolve_device(device)  # a device this machine lacks is refused before anything is made
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = out / "burgers.h5"
    start = time.perf_counter()
    if not data.is_file():
        print(f"[1/4] generating {sum(SAMPLES.values())} Burgers samples at n = {STORED} -> {data}")
        generate_file("burgers", data, sum(SAMPLES.values()), resolution=STORED, seed=0)
    run = out / "gt"
    config = config_from_dict(quickstart_config(str(data), seed))
    config.train.device = device
    resume = (run / "config.yaml").exists()
    print(f"[2/4] training the Galerkin Transformer at n = {TRAINED} -> {run}" + (" (resuming)" if resume else ""))
    train(config, run, resume=resume)
    print("[3/4] evaluating on the test split")
    rows = evaluate_run(run, data, [TRAINED, STORED], device=device)
    print(format_table(rows, "Galerkin Transformer on Burgers (relative L2, test split)"))
    write_atomic(out / "results.json", json.dumps(rows, indent=2) + "\n")
    paths = plot_run(run, data, out_dir=out, device=device)
    print("[4/4] plots: " + ", ".join(str(p) for p in paths))
    print(f"done in {time.perf_counter() - start:.0f} s")
    return rows
