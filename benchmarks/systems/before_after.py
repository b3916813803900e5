"""Step time and peak RSS of model presets from two source trees, alternating fresh processes.

    git archive <old commit> src | tar -x -C /tmp/before
    python -m benchmarks.systems.before_after --before /tmp/before/src --presets gt_burgers --resolutions 512,8192 \\
        --rounds 3

Each measurement is one ``opformer.bench.cell`` run (a fresh interpreter, so its peak RSS is its own) with
the tree's own code: ``--repeats`` timed steps after one warm-up, the median reported (wall and processor
seconds: under load, read the processor seconds). A training step is
forward + backward + the trainer's optimiser. The rounds alternate before/after so both see the same load.
"""

from __future__ import annotations

import argparse
import statistics

from benchmarks.harness import GIB, ROOT, time_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="src folder of the old tree")
    parser.add_argument("--after", default=str(ROOT / "src"))
    parser.add_argument("--presets", default="gt_burgers", help="comma-separated model presets")
    parser.add_argument("--resolutions", default="512,8192")
    parser.add_argument("--mode", default="train", choices=["train", "forward"])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print("| preset | n | before s/step | after s/step | after/before | before CPU s/step | after CPU s/step | "
          "after/before (CPU) | before peak RSS (GiB) | after peak RSS (GiB) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.presets.split(","):
        for n in (int(v) for v in args.resolutions.split(",")):
            runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
            for _ in range(args.rounds):
                for tree in ("before", "after"):
                    runs[tree].append(time_step(name, n, args.batch, args.threads, args.mode, args.repeats,
                                                src=getattr(args, tree)))
            t = {k: statistics.median(r["seconds_median"] for r in v) for k, v in runs.items()}
            # trees from before opformer.bench recorded no processor time
            c = {k: statistics.median(r.get("cpu_seconds_median", float("nan")) for r in v) for k, v in runs.items()}
            m = {k: max(r["peak_memory_bytes"] for r in v) / GIB for k, v in runs.items()}
            print(f"| {name} | {n} | {t['before']:.4g} | {t['after']:.4g} | {t['after'] / t['before']:.2f} "
                  f"| {c['before']:.4g} | {c['after']:.4g} | {c['after'] / c['before']:.2f} "
                  f"| {m['before']:.3g} | {m['after']:.3g} |", flush=True)


if __name__ == "__main__":
    main()
