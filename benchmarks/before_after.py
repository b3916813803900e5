"""Step time and peak RSS of model presets from two source trees, alternating fresh processes.

    git archive <old commit> src | tar -x -C /tmp/before
    python benchmarks/before_after.py --before /tmp/before/src --presets gt_burgers --resolutions 512,8192 --rounds 3

Each measurement is one ``opformer.bench.cell`` run (a fresh interpreter, so its peak RSS is its own) with
the tree's own code: ``--repeats`` timed steps after one warm-up, the median reported. A training step is
forward + backward + the trainer's optimiser. The rounds alternate before/after so both see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path


def measure(src: str, spec: dict[str, object]) -> dict[str, float]:
    """One fresh-process cell with ``src`` first on the module path."""
    env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS=str(spec["threads"]))
    module = "opformer.bench.cell" if (Path(src) / "opformer" / "bench" / "cell.py").exists() \
        else "opformer.eval.bench_cell"  # a tree from before opformer.bench
    out = subprocess.run([sys.executable, "-m", module, json.dumps(spec)], env=env,
                         capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["status"] != "ok":
        raise SystemExit(f"{src}: {spec['preset']} at {spec['resolution']}: {result['status']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="src folder of the old tree")
    parser.add_argument("--after", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--presets", default="gt_burgers", help="comma-separated model presets")
    parser.add_argument("--resolutions", default="512,8192")
    parser.add_argument("--mode", default="train", choices=["train", "forward"])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print("| preset | n | before s/step | after s/step | after/before | before peak RSS (GiB) | "
          "after peak RSS (GiB) |")
    print("|---|---|---|---|---|---|---|")
    for name in args.presets.split(","):
        for n in (int(v) for v in args.resolutions.split(",")):
            spec = {"preset": name, "implementation": "opformer", "resolution": n, "batch": args.batch,
                    "mode": args.mode, "repeats": args.repeats, "warmup": 1, "threads": args.threads,
                    "device": "cpu"}
            runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
            for _ in range(args.rounds):
                for tree in ("before", "after"):
                    runs[tree].append(measure(getattr(args, tree), spec))
            t = {k: statistics.median(r["seconds_median"] for r in v) for k, v in runs.items()}
            m = {k: max(r["peak_memory_bytes"] for r in v) / 2**30 for k, v in runs.items()}
            print(f"| {name} | {n} | {t['before']:.4g} | {t['after']:.4g} | {t['after'] / t['before']:.2f} "
                  f"| {m['before']:.3g} | {m['after']:.3g} |", flush=True)


if __name__ == "__main__":
    main()
