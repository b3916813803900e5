"""``opformer quickstart dpot``: DPOT's pre-training in miniature, end to end in a few minutes on a laptop CPU.

A tiny mixture of three built-in solvers at 32^2 (FitzHugh-Nagumo diffusion-reaction, shallow water, FNO-nu
Navier-Stokes), a nano DPOT trained one step at a time with input noise on windows drawn from it (the recipe of
``configs/mixture/``), each member's rollout error beside persistence, and a plot of a rollout per member.
A rerun continues where the last one stopped (files made are kept, the run resumes).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from opformer.config import config_from_dict
from opformer.data.generate import generate_file
from opformer.data.store import read_info
from opformer.eval.members import evaluate_mixture
from opformer.eval.report import plot_run
from opformer.io import write_atomic
from opformer.runtime import resolve_device
from opformer.train.trainer import train

#: name -> (PDE of `opformer generate`, its flags): short trajectories that solve in seconds at 32^2.
MEMBERS: dict[str, tuple[str, dict[str, Any]]] = {
    "diffusion_reaction": ("diffusion-reaction", {"t_final": 1.0}),  # 21 frames, u and v
    "shallow_water": ("shallow-water", {}),                          # 101 frames, h
    "navier_stokes": ("navier-stokes", {"nu": 1e-3, "t_final": 15.0}),  # 16 frames, vorticity
}
SAMPLES = {"n_train": 8, "n_val": 2, "n_test": 2}  # trajectories per member
RESOLUTION = 32
T_IN, EVAL_FRAMES = 5, 10  # given frames; frames rolled out in validation, test and the plots
EPOCHS, WINDOWS, BATCH = 10, 160, 8
MODEL = {"preset": "dpot_nano"}  # the quickstart's grid and channels are added in dpot_config


def dpot_config(paths: dict[str, str], channels: int) -> dict[str, Any]:
    """The run config: a nano DPOT on the mixture of ``paths`` (member name -> file) with ``channels`` channels,
    trained one step at a time with input noise of 0.2 of the RMS, as ``configs/mixture/`` does."""
    return {
        "seed": 1127802,
        "model": {**MODEL, "in_channels": channels, "grid_size": RESOLUTION},
        "data": {"mixture": [{"path": path, "name": name} for name, path in paths.items()],
                 "resolution": RESOLUTION, "windows_per_epoch": WINDOWS, **SAMPLES},
        "loss": {"name": "relative_l2"},
        "optim": {"name": "adamw", "lr": 1e-3, "weight_decay": 1e-6, "betas": [0.9, 0.9]},
        "schedule": {"name": "onecycle", "pct_start": 0.2},
        "rollout": {"t_in": T_IN, "t_out": 1, "strategy": "one_step", "noise": 0.2, "eval_frames": EVAL_FRAMES},
        "train": {"epochs": EPOCHS, "batch_size": BATCH, "grad_clip": 1.0},
    }


def generate_members(out: Path) -> dict[str, str]:
    """Each member's file in ``out``, generated unless it is there; returns member name -> path."""
    paths = {}
    for name, (pde, flags) in MEMBERS.items():
        path = out / f"{name}.h5"
        if not path.is_file():
            print(f"      {pde} -> {path}")
            generate_file(pde, path, sum(SAMPLES.values()), resolution=RESOLUTION, seed=0, **flags)
        paths[name] = str(path)
    return paths


def member_errors(run: Path, device: str) -> list[dict[str, Any]]:
    """Each member's L2RE (space-time, real channels, its stored grid) of ``EVAL_FRAMES``-frame rollouts of the
    run's best surrogate and of persistence, on the validation and test trajectories (``opformer evaluate``'s
    rows with the split added)."""
    return [{"split": split, **row} for split in ("val", "test")
            for row in evaluate_mixture(run, split=split, frames=EVAL_FRAMES, device=device)]


def format_rows(rows: list[dict[str, Any]]) -> str:
    """The table of :func:`member_errors`."""
    lines = [f"{'member':<20} {'split':<5} {'trajectories':>12} {'DPOT L2RE':>10} {'persistence':>11}"]
    lines += [f"{r['member']:<20} {r['split']:<5} {r['samples']:>12} {r['l2re']:>10.4f} "
              f"{r['persistence_l2re']:>11.4f}" for r in rows]
    return "\n".join(lines)


def quickstart_dpot(out: str | os.PathLike = "runs/quickstart-dpot", device: str = "auto") -> list[dict[str, Any]]:
    """Generate the mixture, pre-train a nano DPOT on it, print each member's error beside persistence, plot
    a rollout per member; ``out`` holds the files, the run ``dpot/``, ``results.json`` and the plots."""
    resolve_device(device)  # a device this machine lacks is refused before anything is made
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    print(f"[1/4] generating {len(MEMBERS)} data sets of {sum(SAMPLES.values())} trajectories at "
          f"{RESOLUTION}^2 (kept if there)")
    paths = generate_members(out)
    channels = max(len(read_info(path).input_channels) for path in paths.values())
    config = config_from_dict(dpot_config(paths, channels))
    config.train.device = device
    run = out / "dpot"
    resume = (run / "config.yaml").exists()
    print(f"[2/4] training a nano DPOT on the mixture -> {run}" + (" (resuming)" if resume else ""))
    train(config, run, resume=resume)
    print(f"[3/4] rolling out {EVAL_FRAMES} frames from {T_IN} per member (relative L2, space-time)")
    rows = member_errors(run, device)
    print(format_rows(rows))
    write_atomic(out / "results.json", json.dumps(rows, indent=2) + "\n")
    paths = plot_run(run, out_dir=out, device=device)
    print("[4/4] plots: " + ", ".join(str(p) for p in paths))
    print(f"done in {time.perf_counter() - start:.0f} s")
    return rows
