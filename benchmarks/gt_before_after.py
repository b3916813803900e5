"""Train-step time and peak RSS of gt_burgers from two source trees, alternating fresh processes.

    git archive <old commit> src | tar -x -C /tmp/before
    python benchmarks/gt_before_after.py --before /tmp/before/src --resolutions 512,8192 --rounds 3

Each measurement is a fresh interpreter (so its peak RSS is its own) running ``--steps`` Adam steps after
one warm-up at batch 4; the rounds alternate before/after so both see the same machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, resource, sys, time, torch
torch.set_num_threads({threads})
from opformer.models import build_model, preset
model = build_model(preset("gt_burgers"))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
x = torch.randn({batch}, {n}, 1)
target = torch.randn({batch}, {n}, 1)
def step():
    optimizer.zero_grad(set_to_none=True)
    (model(x) - target).square().mean().backward()
    optimizer.step()
step()
times = []
for _ in range({steps}):
    start = time.perf_counter(); step(); times.append(time.perf_counter() - start)
print(json.dumps({{"seconds": sorted(times)[len(times) // 2],
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}}))
"""


def measure(src: str, n: int, batch: int, steps: int, threads: int) -> dict[str, float]:
    """One fresh-process measurement with ``src`` first on the module path."""
    env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS=str(threads))
    code = CHILD.format(threads=threads, batch=batch, n=n, steps=steps)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="src folder of the old tree")
    parser.add_argument("--after", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--resolutions", default="512,8192")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print("| n | before s/step | after s/step | after/before | before peak RSS (GiB) | after peak RSS (GiB) |")
    print("|---|---|---|---|---|---|")
    for n in (int(v) for v in args.resolutions.split(",")):
        runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            for name in ("before", "after"):
                runs[name].append(measure(getattr(args, name), n, args.batch, args.steps, args.threads))
        t = {k: statistics.median(r["seconds"] for r in v) for k, v in runs.items()}
        m = {k: max(r["rss"] for r in v) / 2**30 for k, v in runs.items()}
        print(f"| {n} | {t['before']:.4g} | {t['after']:.4g} | {t['after'] / t['before']:.2f} "
              f"| {m['before']:.3g} | {m['after']:.3g} |", flush=True)


if __name__ == "__main__":
    main()
