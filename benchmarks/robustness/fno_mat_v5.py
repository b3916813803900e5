"""MATLAB v5 ``.mat`` files read in a child process (``opformer.data.readers.matv5``): how often a one-byte change
crashes scipy's reader, and what the child costs on intact files.

Run from the repository root: ``.venv/bin/python -m benchmarks.robustness.fno_mat_v5``. (1) Writes a small FNO-layout
v5 file (``u`` (2, 4, 3, 2), ``a``, ``t``; uncompressed and compressed), changes each byte in turn to each of
0x00, 0xFF, 0x7F and its bitwise complement, its top bit and its lowest bit flipped, and reads every changed file
with ``scipy.io.loadmat`` in a forked process: the changes that kill the process by a signal. (2) Times
``loadmat`` in the process against ``load_v5`` (a child process, the arrays through ``.npy`` files) on intact
files of 64^2 x 20 frames. Writes benchmarks/results/robustness/fno_mat_v5.json and .md.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import scipy
import scipy.io

from benchmarks.harness import (
    argument_parser, describe_machine, page, quantity_table, table_head, table_row, write_results)
from opformer.data.readers.matv5 import load_v5

NAMES = ("a", "u", "t")
SAMPLES = (10, 200)  # intact files timed: samples of 64^2 x 20 frames


def fno_file(path: Path, samples: int, grid: tuple[int, int] = (64, 64), frames: int = 20,
             compress: bool = False) -> Path:
    rng = np.random.default_rng(0)
    scipy.io.savemat(path, {"u": rng.standard_normal((samples, *grid, frames), np.float32),
                            "a": rng.standard_normal((samples, *grid), np.float32),
                            "t": np.arange(1, frames + 1, dtype=np.float32)[None]}, do_compression=compress)
    return path


def crashes(path: Path) -> dict[str, Any]:
    """Every one-byte change of the file read by loadmat in a forked process: how many end in which signal."""
    intact = path.read_bytes()
    changed = path.with_name("changed.mat")
    outcomes: Counter = Counter()
    examples = {}
    for offset, byte in enumerate(intact):
        for value in sorted({0x00, 0xFF, 0x7F, byte ^ 0xFF, byte ^ 0x80, byte ^ 0x01} - {byte}):
            changed.write_bytes(intact[:offset] + bytes([value]) + intact[offset + 1:])
            pid = os.fork()
            if pid == 0:
                os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
                try:
                    scipy.io.loadmat(changed, variable_names=NAMES)
                except BaseException:
                    os._exit(1)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            outcome = signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else \
                ("read" if os.WEXITSTATUS(status) == 0 else "raised")
            outcomes[outcome] += 1
            if outcome not in ("read", "raised"):
                examples.setdefault(outcome, f"offset {offset}: {byte:#04x} -> {value:#04x}")
    return {"bytes": len(intact), "changes": sum(outcomes.values()), "outcomes": dict(outcomes),
            "examples": examples}


def timed(function, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        begin = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - begin)
    return best


def main() -> None:
    args = argument_parser(__doc__).parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        hunt = {label: crashes(fno_file(folder / f"{label}.mat", 2, (4, 3), 2, compress=label == "compressed"))
                for label in ("uncompressed", "compressed")}
        print(hunt, flush=True)
        costs = []
        for samples in SAMPLES:
            path = fno_file(folder / f"ns_{samples}.mat", samples)
            direct = timed(lambda: scipy.io.loadmat(path, variable_names=NAMES))
            child = timed(lambda: load_v5(path, NAMES, "u and a"))
            costs.append({"samples": samples, "mib": path.stat().st_size / 2**20, "in_process_s": direct,
                          "child_s": child})
            print(costs[-1], flush=True)
    write_results(args.results, "fno_mat_v5", {"scipy": scipy.__version__, "crashes": hunt, "costs": costs},
                  markdown, load_before, "numpy", "scipy")


def markdown(result: dict[str, Any]) -> str:
    md = ["# MATLAB v5 `.mat` files: scipy's crashes and the child process that contains them", "",]
    md += quantity_table([
        ("machine", describe_machine(result["machine"])),
        ("load average before; after (1 min)", f"{result['loadavg_before'][0]:.2f}; {result['loadavg_after'][0]:.2f}")])
    md += ["", f"## One-byte changes read by scipy {result['scipy']}'s `loadmat` (a forked process each)", "",
           *table_head("file", "bytes", "changes", "read", "raised", "killed by a signal", "example")]
    for label, row in result["crashes"].items():
        outcomes = row["outcomes"]
        killed = ", ".join(f"{n} {name}" for name, n in outcomes.items() if name not in ("read", "raised")) or "0"
        example = "; ".join(f"{name}: {text}" for name, text in row["examples"].items()) or "-"
        md.append(f"| {label} | {row['bytes']} | {row['changes']} | {outcomes.get('read', 0)} | "
                  f"{outcomes.get('raised', 0)} | {killed} | {example} |")
    md += ["", "## What the child process costs on intact files (best of 3)", "",
           *table_head("samples (64^2 x 20 frames)", "file MiB", "loadmat in the process, s", "child process, s",
                       "ratio")]
    md += [table_row(r["samples"], f"{r['mib']:.1f}", f"{r['in_process_s']:.3f}", f"{r['child_s']:.3f}",
                     f"{r['child_s'] / r['in_process_s']:.1f}") for r in result["costs"]]
    return page(md,
                "The child imports numpy and scipy (not torch), reads the file and writes each array as a `.npy` "
                "file into a temporary folder, which the parent loads; its start is the fixed cost, the copy the part "
                "that grows with the file. The machine was shared with other jobs (load averages above).")


if __name__ == "__main__":
    main()
