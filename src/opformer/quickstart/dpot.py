"""``opformer quickstart dpot``: DPOT's pre-training and fine-tuning in miniature, end to end in a few minutes on
a laptop CPU.

A tiny mixture of three built-in solvers at 32^2 (FNO-nu Navier-Stokes, the shallow-water dam break, buoyant
smoke), a nano DPOT trained on windows drawn from it one step at a time with input noise (the recipe of
``configs/mixture/``), each member's rollout error beside persistence (the last given frame repeated) and a
rollout plot per member; then the pre-trained model fine-tuned on a member the mixture lacks (Navier-Stokes at
a ten times smaller viscosity) beside the same model trained from scratch for the same steps.

Why these settings beat persistence (``docs/reproducing.md``, "Trying it"):

- every member's frames change substantially from one model step to the next, so copying the last frame is
  not nearly exact: the dam break is stored every 0.01 time units, in which its front crosses 1/14 of a cell
  at 32^2 (10 copied frames miss by 3%), so it is used every 6th frame (``time_stride``: under half a cell per
  step, 12%); Navier-Stokes (1 time unit) and smoke (1.5) change by 15-20% per stored frame already;
- patch 2 on 32^2 keeps the nano preset's 16^2 latent grid (patch 4 on 64^2): with patch 4 the 8^2 latent
  grid draws the dam break's rings as 4x4 blocks;
- 800 steps, enough for each member's own dynamics (after 200 steps the nano applied Navier-Stokes' diagonal
  forcing to every member);
- no member is white noise at the grid scale: PDEBench's diffusion-reaction starts from N(0, 1) in every cell
  and at 32^2 stays pixel noise for its first 15 frames, which a patch embedding cannot carry and
  persistence copies exactly, so it is not in this mixture.

A rerun continues where the last one stopped (files made are kept, the runs resume).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, NamedTuple

from opformer.config import config_from_dict
from opformer.data.generate import generate_file
from opformer.data.store import read_info
from opformer.eval.evaluate import evaluate_run, persistence_row
from opformer.eval.mixture import evaluate_mixture
from opformer.eval.run_plots import plot_run
from opformer.io import write_atomic
from opformer.runs import Run
from opformer.runtime import resolve_device
from opformer.train.trainer import train


class Member(NamedTuple):
    """A data set of the demo: the PDE of ``opformer generate``, its flags, its seed and the time stride used."""

    pde: str
    flags: dict[str, Any]
    time_stride: int = 1
    seed: int = 0


#: The pre-training mixture: name -> member (trajectories that solve in about a second each at 32^2).
MEMBERS: dict[str, Member] = {
    "navier_stokes": Member("navier-stokes", {"nu": 1e-3, "t_final": 20.0}),  # 21 frames 1 apart, vorticity
    "shallow_water": Member("shallow-water", {}, time_stride=6),  # 101 frames 0.01 apart, used 0.06 apart: 17
    "smoke": Member("smoke-conditioned", {}),  # 56 frames 1.5 apart; smoke, vx, vy
}
#: The member the mixture lacks, fine-tuned on (another seed: its initial vorticity differs from the mixture's).
HELD_OUT: dict[str, Member] = {
    "navier_stokes_nu1e-4": Member("navier-stokes", {"nu": 1e-4, "t_final": 20.0, "solve_resolution": 64}, seed=1),
}
SAMPLES = {"n_train": 16, "n_val": 4, "n_test": 4}  # trajectories per mixture member
HELD_OUT_SAMPLES = {"n_train": 8, "n_val": 4, "n_test": 4}  # few trajectories: where pre-training should help
RESOLUTION = 32
T_IN, EVAL_FRAMES = 5, 10  # given frames; frames rolled out in validation, test and the plots
EPOCHS, WINDOWS, BATCH = 40, 160, 8  # pre-training: 40 x 20 = 800 steps
FINETUNE_EPOCHS = 20  # fine-tuning and scratch: 20 x 16 = 320 steps each
MODEL = {"preset": "dpot_nano", "patch_size": 2}  # the quickstart's grid and channels are added in dpot_config
NOISE = 0.2  # input noise in pre-training, a fraction of the RMS (the authors' level, configs/mixture/)
SEED = 1127802
DOCS = "docs/reproducing.md, section DPOT"


def dpot_config(paths: dict[str, str], channels: int, seed: int = SEED) -> dict[str, Any]:
    """The pre-training config: a nano DPOT on the mixture of ``paths`` (member name -> file) with ``channels``
    channels, trained one step at a time with input noise of ``NOISE`` of the RMS, as ``configs/mixture/``."""
    return {
        "seed": seed,
        "model": {**MODEL, "in_channels": channels, "grid_size": RESOLUTION},
        "data": {"mixture": [{"path": path, "name": name, "time_stride": MEMBERS[name].time_stride}
                             for name, path in paths.items()],
                 "resolution": RESOLUTION, "windows_per_epoch": WINDOWS, **SAMPLES},
        "loss": {"name": "relative_l2"},
        "optim": {"name": "adamw", "lr": 1e-3, "weight_decay": 1e-6, "betas": [0.9, 0.9]},
        "schedule": {"name": "onecycle", "pct_start": 0.2},
        "rollout": {"t_in": T_IN, "t_out": 1, "strategy": "one_step", "noise": NOISE, "eval_frames": EVAL_FRAMES},
        "train": {"epochs": EPOCHS, "batch_size": BATCH, "grad_clip": 1.0},
    }


def finetune_config(path: str, channels: int, pretrained: str | None, seed: int = SEED) -> dict[str, Any]:
    """The held-out member's config: the pre-trained model's shapes (``channels``; the data's are zero-padded),
    every component copied from the run ``pretrained`` (``None``: from scratch), the authors' fine-tuning recipe
    (no input noise, every window each epoch; ``configs/kolmogorov/dpot_micro_finetune.yaml``)."""
    (name, member), = HELD_OUT.items()
    config = {
        "seed": seed,
        "model": {**MODEL, "in_channels": channels, "grid_size": RESOLUTION},
        "data": {"path": path, **HELD_OUT_SAMPLES},
        "loss": {"name": "relative_l2"},
        "optim": {"name": "adam", "lr": 1e-3, "weight_decay": 1e-6, "betas": [0.9, 0.9]},
        "schedule": {"name": "onecycle", "pct_start": 0.2},
        "rollout": {"t_in": T_IN, "t_out": 1, "strategy": "one_step", "windows": "all",
                    "time_stride": member.time_stride, "eval_frames": EVAL_FRAMES},
        "train": {"epochs": FINETUNE_EPOCHS, "batch_size": BATCH, "grad_clip": 1.0},
    }
    if pretrained is not None:
        config["init"] = {"checkpoint": pretrained}
    return config


def generate_members(out: Path, members: dict[str, Member], samples: int) -> dict[str, str]:
    """Each member's file in ``out``, generated unless it is there; returns member name -> path."""
    paths = {}
    for name, member in members.items():
        path = out / f"{name}.h5"
        if not path.is_file():
            print(f"      {member.pde} -> {path}")
            generate_file(member.pde, path, samples, resolution=RESOLUTION, seed=member.seed, **member.flags)
        paths[name] = str(path)
    return paths


def member_errors(run: Path, device: str) -> list[dict[str, Any]]:
    """Each member's L2RE (space-time, real channels, its stored grid) of ``EVAL_FRAMES``-frame rollouts of the
    run's best surrogate and of persistence, on the validation and test trajectories (``opformer evaluate``'s
    rows with the split and the time between the model's frames added)."""
    rows = []
    for split in ("val", "test"):
        for row in evaluate_mixture(run, split=split, frames=EVAL_FRAMES, device=device):
            times = read_info(row["path"]).times
            rows.append({"split": split, "frame_step": float(times[MEMBERS[row["member"]].time_stride] - times[0]),
                         **row})
    return rows


def held_out_errors(runs: dict[str, Path], path: str, device: str) -> list[dict[str, Any]]:
    """The held-out member's test L2RE of ``EVAL_FRAMES``-frame rollouts, per run (``init`` -> run directory),
    with persistence's on the same trajectories."""
    (name, _), = HELD_OUT.items()
    rows = []
    for init, run in runs.items():
        row = evaluate_run(run, path, [None], split="test", device=device, frames=EVAL_FRAMES)[0]
        baseline = persistence_row(run, path, frames=EVAL_FRAMES)
        rows.append({"member": name, "init": init, "samples": row["samples"], "frames": row["frames"],
                     "l2re": row["l2re"], "first_frame": row["per_frame_relative_l2"][0],
                     "persistence_l2re": baseline["l2re"],
                     "persistence_first_frame": baseline["per_frame_relative_l2"][0]})
    return rows


def parameters(run: Path) -> int:
    """The number of parameters of a run's model."""
    return sum(p.numel() for p in Run(run).surrogate.model.parameters())


def format_rows(rows: list[dict[str, Any]], n_parameters: int) -> str:
    """The table of :func:`member_errors` (test rows), headed by what the demo is and where the claims are."""
    steps = EPOCHS * -(-WINDOWS // BATCH)
    lines = [f"A demonstration at laptop scale, not the paper's accuracy: a nano DPOT ({n_parameters:,} parameters, "
             f"{steps} steps)",
             f"pre-trained on a tiny mixture ({len(MEMBERS)} PDEs x {SAMPLES['n_train']} trajectories at "
             f"{RESOLUTION}^2). The measured claims: {DOCS}.",
             f"Test trajectories rolled out {EVAL_FRAMES} frames from {T_IN}; L2RE (relative L2 over space and "
             "time, per channel):",
             f"{'member':<16} {'channels':<18} {'frame step':>10} {'trajectories':>12} {'DPOT':>7} "
             f"{'persistence':>11} {'ratio':>6}"]
    for r in rows:
        if r["split"] == "test":
            lines.append(f"{r['member']:<16} {', '.join(r['channels']):<18} {r['frame_step']:>10g} {r['samples']:>12} "
                         f"{r['l2re']:>7.4f} {r['persistence_l2re']:>11.4f} "
                         f"{r['l2re'] / r['persistence_l2re']:>6.2f}")
    return "\n".join(lines)


def format_held_out(rows: list[dict[str, Any]]) -> str:
    """The table of :func:`held_out_errors`."""
    lines = [f"{'init':<24} {'trajectories':>12} {'L2RE, ' + str(EVAL_FRAMES) + ' frames':>16} {'first frame':>11}"]
    for r in rows:
        lines.append(f"{r['init']:<24} {r['samples']:>12} {r['l2re']:>16.4f} {r['first_frame']:>11.4f}")
    r = rows[0]
    lines.append(f"{'persistence':<24} {r['samples']:>12} {r['persistence_l2re']:>16.4f} "
                 f"{r['persistence_first_frame']:>11.4f}")
    return "\n".join(lines)


def quickstart_dpot(out: str | os.PathLike = "runs/quickstart-dpot", device: str = "auto",
                    seed: int = SEED) -> dict[str, list[dict[str, Any]]]:
    """Generate the data, pre-train a nano DPOT on the mixture, print each member's error beside persistence,
    fine-tune on the held-out member beside scratch, plot a rollout per member; ``out`` holds the files, the
    runs ``dpot/``, ``finetune/``, ``scratch/``, ``results.json`` and the plots. ``seed``: the runs' seed."""
    resolve_device(device)  # a device this machine lacks is refused before anything is made
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    print(f"[1/5] generating {len(MEMBERS) + len(HELD_OUT)} data sets at {RESOLUTION}^2 (kept if there)")
    paths = generate_members(out, MEMBERS, sum(SAMPLES.values()))
    (held_out, held_path), = generate_members(out, HELD_OUT, sum(HELD_OUT_SAMPLES.values())).items()
    channels = max(len(read_info(path).input_channels) for path in paths.values())
    run = out / "dpot"
    _train(dpot_config(paths, channels, seed), run, device,
           f"[2/5] pre-training a nano DPOT on the mixture ({', '.join(MEMBERS)}) -> {run}")
    print(f"[3/5] each member's test rollouts, {EVAL_FRAMES} frames from {T_IN}, beside persistence")
    rows = member_errors(run, device)
    print(format_rows(rows, parameters(run)))
    runs = {"fine-tuned (pre-trained)": out / "finetune", "from scratch": out / "scratch"}
    print(f"[4/5] the held-out {held_out} ({HELD_OUT_SAMPLES['n_train']} training trajectories): fine-tuned from "
          f"the pre-trained model and from scratch, {FINETUNE_EPOCHS} epochs each")
    for init, run_dir in runs.items():
        pretrained = str(run) if init.startswith("fine") else None
        _train(finetune_config(held_path, channels, pretrained, seed), run_dir, device, f"      {init} -> {run_dir}")
    held = held_out_errors(runs, held_path, device)
    print(format_held_out(held))
    results = {"mixture": rows, "held_out": held}
    write_atomic(out / "results.json", json.dumps(results, indent=2) + "\n")
    plots = plot_run(run, out_dir=out, device=device)
    print("[5/5] plots: " + ", ".join(str(p) for p in plots))
    print(f"done in {time.perf_counter() - start:.0f} s")
    return results


def _train(config: dict[str, Any], run: Path, device: str, message: str) -> None:
    """Train (or resume) the run of ``config`` in ``run`` on ``device``, after printing ``message``."""
    resume = (run / "config.yaml").exists()
    print(message + (" (resuming)" if resume else ""))
    validated = config_from_dict(config)
    validated.train.device = device
    train(validated, run, resume=resume)
