"""The training loop on the CPU, this tree against an older one (issue 39: the loop that reads the device only at
its log points must not be slower than the one that read the loss every step), on the quickstart's run.

    git archive 4d29a11 src | tar -x -C /tmp/before
    .venv/bin/python -m benchmarks.systems.loop_cpu --before /tmp/before/src --rounds 3

Each round trains the quickstart's configuration (GT-Burgers at n = 512, 256 training samples, batch 8: 32 steps an
epoch) for 3 epochs with each tree in a fresh process, the order reversed every other round; an epoch's time is
the trainer's own (``seconds`` in metrics.csv, the steps only). Per variant the median over rounds of the median
epoch (the first epoch left out: warm-up). ``--streamed`` adds this tree with the training split read from disk
per batch by one worker (``data.memory_gb`` below the split; issue 38: no more than 5% slower than in memory).
Writes benchmarks/results/systems/loop_cpu.json and .md.
"""

from __future__ import annotations

import csv
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks.harness import ROOT, argument_parser, describe_load, describe_machine, page, table_head, write_results
from opformer.data.generate import generate_file
from opformer.quickstart.burgers import STORED, SAMPLES, quickstart_config


def epoch_seconds(src: str, config: Path, out: Path, threads: int) -> list[float]:
    """Train with the tree ``src``; the seconds of each epoch after the first."""
    env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS=str(threads))
    done = subprocess.run([sys.executable, "-m", "opformer", "train", str(config), "--out", str(out)], env=env,
                          capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"{src}: {done.stderr[-1000:]}")
    with open(out / "metrics.csv") as f:
        return [float(row["seconds"]) for row in csv.DictReader(f)][1:]


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--before", required=True, help="src folder of the older tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--streamed", action="store_true", help="also this tree with the split streamed")
    args = parser.parse_args()
    load_before = os.getloadavg()
    trees = {"before": args.before, "after": str(ROOT / "src")}
    if args.streamed:
        trees["after, streamed"] = trees["after"]
    seconds: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "burgers.h5"
        generate_file("burgers", data, sum(SAMPLES.values()), resolution=STORED, seed=0)
        configs = {}
        for name in trees:
            raw = quickstart_config(str(data))
            raw["train"].update(epochs=args.epochs, num_threads=args.threads)
            if name == "after, streamed":
                raw["data"].update(memory_gb=1e-6, workers=1)
            configs[name] = Path(folder) / f"config-{len(configs)}.yaml"
            configs[name].write_text(yaml.safe_dump(raw))
        for number in range(args.rounds):
            order = list(trees) if number % 2 == 0 else list(trees)[::-1]
            for name in order:
                epochs = epoch_seconds(trees[name], configs[name], Path(folder) / f"run{len(seconds[name])}{name}",
                                       args.threads)
                seconds[name].append(statistics.median(epochs))
                print(name, number, epochs, os.getloadavg()[0], flush=True)
    result = {"trees": trees, "threads": args.threads, "epochs": args.epochs, "epoch_seconds": seconds,
              "median": {name: statistics.median(values) for name, values in seconds.items()}}
    result["ratio_after_before"] = result["median"]["after"] / result["median"]["before"]
    if args.streamed:
        result["ratio_streamed_memory"] = result["median"]["after, streamed"] / result["median"]["after"]
    write_results(args.results, "loop_cpu", result, markdown, load_before, "torch")


def markdown(result: dict[str, Any]) -> str:
    """The two trees' epoch times."""
    lines = ["# The training loop on the CPU: this tree against an older one", "",
             f"{describe_machine(result['machine'])}; {describe_load(result)}; {result['threads']} threads. "
             f"`{result['command']}`.", "",
             "The quickstart's run (GT-Burgers, n = 512, 32 steps an epoch); per round the median epoch after the "
             "first, in fresh processes, the trees alternating.", "",
             *table_head("tree", "src", "seconds per epoch, each round", "median")]
    for name, values in result["epoch_seconds"].items():
        lines.append(f"| {name} | `{result['trees'][name]}` | {', '.join(f'{v:.2f}' for v in values)} | "
                     f"{result['median'][name]:.2f} |")
    lines.append(f"\nafter / before: **{result['ratio_after_before']:.3f}**")
    if "ratio_streamed_memory" in result:
        lines.append(f"\nafter, streamed / after (in memory): **{result['ratio_streamed_memory']:.3f}**")
    return page(lines)


if __name__ == "__main__":
    main()
