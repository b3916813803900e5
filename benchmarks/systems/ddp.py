"""Data-parallel training speed: samples/s of GT-Burgers (n = 512) and FNO2d-Darcy (85^2) training, batch 8, with
1 process and with N processes (``opformer train --nproc N``), 1 thread each.

Run from the repository root: ``.venv/bin/python -m benchmarks.systems.ddp`` (``--data`` is where the two small data
sets are generated with ``opformer generate``; ``--epochs``, ``--samples`` size the runs). The first epoch is a
warm-up; the rate is the global samples per second of the training steps of the others (validation excluded).
Writes benchmarks/results/systems/ddp.json and .md.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, argument_parser, describe_load, describe_machine, table_head, write_results

#: name -> (config, PDE, resolution of the generated set)
JOBS = {"gt_burgers_512": ("configs/burgers/gt.yaml", "burgers", 512),
        "fno2d_darcy_85": ("configs/darcy/fno2d_141.yaml", "darcy", 85)}
BATCH = 8


def generate(pde: str, resolution: int, samples: int, folder: Path) -> Path:
    """A small data set made by ``opformer generate`` (kept between calls)."""
    path = folder / f"{pde}_{resolution}.h5"
    if not path.exists():
        subprocess.run([sys.executable, "-m", "opformer", "generate", pde, "--samples", str(samples),
                        "--resolution", str(resolution), "--out", str(path)], check=True)
    return path


def train(config: str, data: Path, resolution: int, processes: int, samples: int, epochs: int,
          folder: Path) -> dict[str, Any]:
    """Train one run in ``processes`` processes of one thread; its samples/s after the first epoch."""
    run = folder / f"run_{Path(config).stem}_{processes}"
    n_val = 8
    sets = [f"data.path={data}", f"data.resolution={resolution}", f"data.n_train={samples - 2 * n_val}",
            f"data.n_val={n_val}", f"data.n_test={n_val}", f"train.epochs={epochs}", f"train.batch_size={BATCH}",
            "train.num_threads=1"]
    command = [sys.executable, "-m", "opformer", "train", str(ROOT / config), "--out", str(run),
               *[arg for value in sets for arg in ("--set", value)]]
    if processes > 1:
        command += ["--nproc", str(processes)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    load = os.getloadavg()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(run / "metrics.csv") as f:
        seconds = [float(row["seconds"]) for row in csv.DictReader(f)][1:]
    steps = -(-(samples - 2 * n_val) // BATCH) * len(seconds)
    return {"processes": processes, "steps_timed": steps, "seconds": sum(seconds),
            "samples_per_second": (samples - 2 * n_val) * len(seconds) / sum(seconds),
            "loadavg_before": list(load), "loadavg_after": list(os.getloadavg())}


def markdown(result: dict[str, Any]) -> str:
    """The results table."""
    lines = ["# Data-parallel training (torchrun DDP, gloo) on this CPU", "",
             f"{describe_machine(result['machine'])}; command `{result['command']}`; "
             f"{describe_load(result)}.", "",
             f"Global batch {BATCH}, 1 thread per process; samples/s of the training steps after a warm-up epoch. "
             "Scaling efficiency = (rate with N processes / rate with 1) / N.", "",
             *table_head("model", "processes", "steps timed", "samples/s", "speed-up", "efficiency",
                         "load avg before (1 min)")]
    for name, rows in result["runs"].items():
        base = rows[0]["samples_per_second"]
        for row in rows:
            speedup = row["samples_per_second"] / base
            lines.append(f"| {name} | {row['processes']} | {row['steps_timed']} | {row['samples_per_second']:.1f} | "
                         f"{speedup:.2f}x | {speedup / row['processes']:.0%} | {row['loadavg_before'][0]:.2f} |")
    lines += ["", result["note"], ""]
    return "\n".join(lines)


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--data", default=str(Path(tempfile.gettempdir()) / "opformer_ddp_bench"))
    parser.add_argument("--samples", type=int, default=80, help="samples per data set (16 of them validation/test)")
    parser.add_argument("--epochs", type=int, default=5, help="epochs per run (the first is not timed)")
    parser.add_argument("--nproc", type=int, default=2, help="processes of the data-parallel runs")
    args = parser.parse_args()
    folder = Path(args.data)
    folder.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {}
    for name, (config, pde, resolution) in JOBS.items():
        data = generate(pde, resolution, args.samples, folder)
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            runs[name] = [train(config, data, resolution, processes, args.samples, args.epochs, Path(scratch))
                          for processes in (1, args.nproc)]
    note = (f"The machine has {os.cpu_count()} cores shared with other jobs: N processes of one thread each get "
            "N cores only when nothing else runs (see the load averages); every process also loads the data set "
            "and all-reduces the gradients (gloo over TCP) at each step.")
    write_results(args.results, "ddp", {"batch": BATCH, "epochs": args.epochs, "samples": args.samples,
                                        "runs": runs, "note": note}, markdown, load_before)


if __name__ == "__main__":
    main()
