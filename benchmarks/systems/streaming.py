"""Data at the size users have (issue 38 §3): memory and start-up of `opformer train` on trajectory files of about
1, 4 and 16 GB, streamed and held in memory; loader throughput; training speed of the two paths; an 8-member
mixture of large files; the write path.

Run from the repository root (from a frozen copy of the tree: it takes a while and writes ~45 GB to --work):
``.venv/bin/python -m benchmarks.systems.streaming --work /tmp/streaming``. Steps are resumable: each finished
measurement is kept in WORK/measurements.json and not run again. Writes benchmarks/results/systems/streaming.json and
.md.

- Files: 256^2 frames, 20 frames per trajectory, 1 channel (5 MiB a trajectory): 200, 800 and 3200 trajectories,
  made as a memory-mapped ``.npy`` and written by ``opformer convert arrays`` (the write path: the anonymous
  memory it adds is recorded, and must not grow with the file).
- Training: FNO2d-time (``configs/navier_stokes/fno2d.yaml``) at ``data.resolution: 64``, ``n_train`` 64, one epoch
  of random windows; streamed (``data.memory_gb: 0.01``, below every split here) and in memory (the default 8 GB
  budget); the peak RSS of the training processes and the time from the command to the first step (the trainer's
  ``first step done`` line); with 2 processes (``--nproc 2``), each process's peak RSS.
- Loader: windows per second of the streamed split alone (``t_in`` 10, batch 8, 2 workers, warm page cache), at 64^2
  and 128^2.
- Training speed streamed against in memory: ``python -m benchmarks.systems.loop_cpu --streamed`` (the quickstart's run).
- Mixture: 8 members made of the three files (names a..h), weights 1..8: one epoch streamed (peak RSS) and the
  measured frequency of each member in 10,000 draws against its probability.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from benchmarks.harness import (
    ROOT, anonymous_rise, argument_parser, describe_load, describe_machine, page, table_head, write_results)
from opformer.data.convert import convert_file
from opformer.data.mixture import Mixture, MixtureMember, MixtureSpec
from opformer.io import write_atomic

SIZES = {"1GB": 200, "4GB": 800, "16GB": 3200}  # trajectories of 20 frames at 256^2 (5 MiB each)
FRAMES, N = 20, 256
STREAM_GB = 0.01  # a budget below every training split here: the streamed runs stream
PYTHON = sys.executable


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")


def make_file(work: Path, name: str, trajectories: int) -> dict[str, Any]:
    """``WORK/NAME.h5``: a memory-mapped array of smooth fields (a fixed block of 16 random trajectories, shifted
    by the trajectory's index) converted by ``opformer convert arrays``; its peak RSS and seconds."""
    out = work / f"{name}.h5"
    raw = work / f"{name}.npy"
    rng = np.random.default_rng(0)
    x = np.arange(N) / N
    base = np.zeros((16, FRAMES, N, N), np.float32)
    for k in range(1, 4):
        phase = rng.uniform(0, 2 * np.pi, (16, FRAMES, 1, 1))
        base += np.sin(2 * np.pi * k * (x[:, None] + x[None, :]) + phase).astype(np.float32) / k
    array = np.lib.format.open_memmap(raw, mode="w+", dtype=np.float32, shape=(trajectories, FRAMES, N, N))
    for start in range(0, trajectories, 16):
        count = min(16, trajectories - start)
        array[start:start + count] = base[:count] + 0.01 * np.arange(start, start + count, dtype=np.float32)[:, None,
                                                                                                             None, None]
    array.flush()
    del array
    out.unlink(missing_ok=True)
    # the conversion in this process, its anonymous memory sampled (the memory map's pages are the file's, which
    # the kernel can drop, and would count in the RSS of any reader of a memory map)
    begin = time.perf_counter()
    with anonymous_rise() as rise:
        convert_file("arrays", raw, out, kind="trajectory", lengths=[1.0, 1.0])
    seconds = time.perf_counter() - begin
    raw.unlink()
    return {"gb": out.stat().st_size / 1e9, "convert_seconds": seconds, "convert_anonymous_rise_mb": rise["mib"],
            "loadavg": list(os.getloadavg())}


#: runs a command and prints, last on stderr, the largest peak RSS (KiB) of the processes of its tree
WRAPPER = ("import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:]); "
           "print('maxrss', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)")


def _run(command: list[str], timeout: float = 3600) -> dict[str, Any]:
    """Run a command in a fresh process tree: exit code, seconds, the largest peak RSS of its processes (MB)."""
    start = time.perf_counter()
    done = subprocess.run([PYTHON, "-c", WRAPPER, *command], env=_env(), capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    seconds = time.perf_counter() - start
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    peak = re.findall(r"^maxrss (\d+)$", done.stderr, re.M)
    return {"rc": done.returncode, "seconds": seconds, "peak_rss_mb": int(peak[-1]) / 1024 if peak else None,
            "loadavg": list(os.getloadavg())}


def train_config(work: Path, data: str, streamed: bool, **data_keys: Any) -> Path:
    """An FNO2d-time config on ``data`` at 64^2: n_train 64, one epoch of random windows."""
    raw = yaml.safe_load((ROOT / "configs/navier_stokes/fno2d.yaml").read_text())
    raw["data"].update(path=data, resolution=64, n_train=64, n_val=4, n_test=4, **data_keys)
    if streamed:
        raw["data"].update(memory_gb=STREAM_GB, workers=2)
    raw["rollout"]["eval_frames"] = 2
    raw["train"].update(epochs=1, batch_size=8, eval_batch_size=4)
    path = work / f"config-{Path(data).stem}-{'streamed' if streamed else 'memory'}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def train_run(work: Path, config: Path, nproc: int = 1) -> dict[str, Any]:
    """``opformer train CONFIG`` in a fresh folder: peak RSS (largest process), seconds to the first step."""
    out = work / "runs" / f"{config.stem}-{nproc}"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    result = _run([PYTHON, "-m", "opformer", "train", str(config), "--out", str(out), "--nproc", str(nproc)])
    log = (out / "train.log").read_text() if (out / "train.log").exists() else ""
    first = re.search(r"first step done ([\d.]+) s", log)
    return {"rc": result["rc"], "seconds": result["seconds"], "peak_rss_mb": result["peak_rss_mb"],
            "first_step_seconds": float(first.group(1)) if first else None, "loadavg": result["loadavg"],
            "streamed": "read from disk per batch" in log}


def loader_throughput(path: Path, resolution: int, batches: int = 40) -> dict[str, Any]:
    """Windows per second of a streamed split (t_in 10, batch 8, 2 workers), after one warm-up pass."""
    from opformer.config import config_from_dict
    from opformer.train.distributed import Context
    from opformer.train.pipeline import Pipeline
    from opformer.train.tasks import make_task

    raw = yaml.safe_load(train_config(path.parent, str(path), True).read_text())
    raw["data"]["resolution"] = resolution
    raw["data"]["n_train"] = batches * 8
    task = make_task(config_from_dict(raw))
    assert task.streamed, "the loader's split must stream"
    pipeline = Pipeline(task, Context(torch.device("cpu")), workers=2)
    rates = []
    for epoch in range(2):  # the first warms the page cache
        start, count = time.perf_counter(), 0
        for batch in pipeline.epoch(epoch, torch.Generator().manual_seed(epoch)):
            count += batch.size
        rates.append(count / (time.perf_counter() - start))
    return {"windows_per_second": rates[-1], "cold_windows_per_second": rates[0], "loadavg": list(os.getloadavg())}


def mixture_frequencies(paths: list[Path]) -> dict[str, Any]:
    """Member frequencies of 10,000 draws of an 8-member streamed mixture against its probabilities."""
    members = [MixtureMember(str(paths[k % len(paths)]), weight=float(k + 1), name="abcdefgh"[k]) for k in range(8)]
    spec = MixtureSpec(members=members, resolution=64, t_in=10, t_out=1, windows_per_epoch=10_000, n_train=64,
                       n_val=4, n_test=4)
    mixture = Mixture(spec, memory_gb=STREAM_GB)
    counts = torch.bincount(mixture.draws(0)[:, 0], minlength=8).double() / 10_000
    probabilities = mixture.probabilities()
    return {"streamed": mixture.streamed, "frequency": counts.tolist(), "probability": probabilities.tolist(),
            "largest_difference": float((counts - probabilities).abs().max())}


def mixture_run(work: Path, paths: list[Path]) -> dict[str, Any]:
    """One epoch of DPOT-nano pre-training on the 8-member mixture, streamed: peak RSS, first step."""
    raw = yaml.safe_load((ROOT / "configs/navier_stokes/fno2d.yaml").read_text())
    raw["data"] = {"mixture": [{"path": str(paths[k % len(paths)]), "weight": float(k + 1), "name": "abcdefgh"[k]}
                               for k in range(8)],
                   "resolution": 64, "n_train": 64, "n_val": 2, "n_test": 2, "windows_per_epoch": 256,
                   "memory_gb": STREAM_GB, "workers": 2}
    raw["rollout"] = {"t_in": 10, "t_out": 1, "eval_frames": 2}
    raw["model"] = {"preset": "dpot_nano"}
    raw["optim"] = {"name": "adamw", "lr": 1e-3}
    raw["train"] = {"epochs": 1, "batch_size": 8, "eval_batch_size": 2}
    path = work / "config-mixture.yaml"
    path.write_text(yaml.safe_dump(raw))
    return train_run(work, path)


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--work", default="/tmp/streaming", help="folder of the files (about 45 GB) and runs")
    parser.add_argument("--sizes", default=",".join(SIZES), help="which files, of " + ",".join(SIZES))
    parser.add_argument("--larger-than-ram", type=int, default=0, metavar="TRAJECTORIES",
                        help="also convert a file of this many trajectories (5400: 28 GB, more than this machine's "
                             "24 GB), record its write path and delete it")
    args = parser.parse_args()
    load_before = os.getloadavg()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    store = work / "measurements.json"
    done: dict[str, Any] = json.loads(store.read_text()) if store.exists() else {}

    def measure(key: str, fn: Any, *a: Any) -> Any:
        if key not in done:
            print(f"{key} ...", flush=True)
            done[key] = fn(*a)
            write_atomic(store, json.dumps(done, indent=1))
            print(f"{key}: {done[key]}", flush=True)
        return done[key]

    sizes = args.sizes.split(",")
    for name in sizes:
        measure(f"file {name}", make_file, work, name, SIZES[name])
    paths = [work / f"{name}.h5" for name in sizes]
    for name, path in zip(sizes, paths):
        measure(f"train {name} streamed", train_run, work, train_config(work, str(path), True))
        measure(f"train {name} memory", train_run, work, train_config(work, str(path), False))  # 64 trajectories fit
    measure(f"train {sizes[1]} streamed, 2 processes", train_run, work, train_config(work, str(paths[1]), True), 2)
    for resolution in (64, 128):
        measure(f"loader {resolution}", loader_throughput, paths[1], resolution)
    if args.larger_than_ram:
        def larger() -> dict[str, Any]:
            row = make_file(work, "larger", args.larger_than_ram)
            (work / "larger.h5").unlink()
            return {**row, "ram_gb": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9}

        measure(f"file {args.larger_than_ram} trajectories (larger than RAM)", larger)
    measure("mixture frequencies", mixture_frequencies, paths)
    measure("mixture train", mixture_run, work, paths)
    write_results(args.results, "streaming", {"measurements": done, "stream_gb": STREAM_GB}, markdown, load_before,
                  "numpy", "h5py")


def markdown(result: dict[str, Any]) -> str:
    """The measurements as tables."""
    m = result["measurements"]
    lines = ["# Streaming data: memory, start-up and throughput", "",
             f"{describe_machine(result['machine'])}; {describe_load(result)}. `{result['command']}`.", "",
             "## Files (256^2, 20 frames, 1 channel; written by `opformer convert arrays` from a memory map)", "",
             *table_head("file", "GB", "convert s", "anonymous memory added by convert, MB")]
    for key, row in m.items():
        if key.startswith("file "):
            lines.append(f"| {key[5:]} | {row['gb']:.2f} | {row['convert_seconds']:.0f} | "
                         f"{row['convert_anonymous_rise_mb']:.0f} |")
    lines += ["", "## `opformer train` (FNO2d-time at 64^2, n_train 64, one epoch)", "",
              *table_head("run", "streamed", "peak RSS MB", "first step s", "total s", "load (1 min)")]
    for key, row in m.items():
        if key.startswith("train ") or key == "mixture train":
            rss = f"{row['peak_rss_mb']:.0f}" if row.get("peak_rss_mb") else "-"
            first = f"{row['first_step_seconds']:.1f}" if row.get("first_step_seconds") else "-"
            lines.append(f"| {key} | {'yes' if row.get('streamed') else 'no'} | {rss} | {first} | "
                         f"{row['seconds']:.0f} | {row['loadavg'][0]:.1f} |")
    lines += ["", "## Loader alone (streamed, t_in 10, batch 8, 2 workers)", "",
              *table_head("grid", "windows/s (warm)", "windows/s (first pass)")]
    for key, row in m.items():
        if key.startswith("loader "):
            lines.append(f"| {key[7:]}^2 | {row['windows_per_second']:.1f} | {row['cold_windows_per_second']:.1f} |")
    if "mixture frequencies" in m:
        row = m["mixture frequencies"]
        lines += ["", "## Mixture of 8 members (weights 1..8), 10,000 draws", "",
                  *table_head("member", "probability", "frequency")]
        lines += [f"| {'abcdefgh'[k]} | {p:.4f} | {f:.4f} |" for k, (p, f) in
                  enumerate(zip(row["probability"], row["frequency"]))]
        lines.append(f"\nLargest difference {row['largest_difference']:.4f} (streamed: {row['streamed']}).")
    return page(lines)


if __name__ == "__main__":
    main()
