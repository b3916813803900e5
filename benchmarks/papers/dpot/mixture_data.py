"""Describe the DPOT pre-training mixture that benchmarks/papers/dpot/generate_mixture.sh wrote: one row per member
(PDE, channels, frames, grid, size on disk, generation time with the load it ran under) and one PNG grid with a frame of
every channel of every member (sample 0 at the middle frame).

Run from the repository root: ``.venv/bin/python -m benchmarks.papers.dpot.mixture_data`` (``--data data/mixture``).
Writes benchmarks/results/papers/dpot/mixture_data.json, .md and .png. Members still being generated are listed as
missing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import (
    argument_parser, describe_load, describe_machine, page, table_head, timing_log, write_results)
from opformer.data.store import read_fields, read_info
from opformer.grids import axis_kinds
from opformer.io import atomic_replace

#: The members, in the order of benchmarks/papers/dpot/generate_mixture.sh.
MEMBERS = ("dr", "swe", "fno_nu1e-3", "smoke", "smoke_conditioned", "cns_m1_eta0.1", "fno_nu1e-4", "fno_nu1e-5")


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--data", default="data/mixture")
    args = parser.parse_args()
    load_before = os.getloadavg()
    folder = Path(args.data)
    times = timing_log(folder / "generation.log")
    rows, frames = [], []
    for member in MEMBERS:
        path = folder / f"{member}.h5"
        if not path.exists():
            rows.append({"member": member, "missing": True})
            continue
        info = read_info(path)
        middle = len(info.times) // 2
        frames.append((member, info.input_channels, read_fields(path, slice(0, 1))[0, middle], info.times[middle]))
        rows.append({"member": member, "pde": info.pde.get("name"), "channels": info.input_channels,
                     "samples": info.n_samples, "frames": len(info.times), "t_last": info.times[-1],
                     "grid": list(info.spatial_shape), "kinds": list(axis_kinds(info.domain)),
                     "lengths": info.domain["lengths"], "mib": path.stat().st_size / 2**20,
                     "solve_resolution": info.solver.get("solve_resolution"), "generation": times.get(member)})
    png = Path(args.results) / "mixture_data.png"
    plot_frames(frames, png)
    write_results(args.results, "mixture_data", {"data": str(folder), "rows": rows, "png": png.name}, markdown,
                  load_before, "numpy")


def plot_frames(frames: list[tuple[str, list[str], np.ndarray, float]], out: Path) -> None:
    """One panel per (member, channel): the frame's field on its grid, each with its own colour bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = max(len(channels) for _, channels, _, _ in frames)
    fig, axes = plt.subplots(len(frames), columns, figsize=(2.6 * columns, 2.3 * len(frames)), squeeze=False)
    for row, (member, channels, field, time) in enumerate(frames):
        for column in range(columns):
            ax = axes[row, column]
            if column >= len(channels):
                ax.axis("off")
                continue
            image = ax.imshow(field[..., column].T, origin="lower", cmap="viridis")  # x across, y up
            ax.set_title(f"{member}: {channels[column]} (t = {time:g})", fontsize=8)
            ax.set_xlabel("x", fontsize=7)
            ax.set_ylabel("y", fontsize=7)
            ax.tick_params(labelsize=6)
            fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=6)
    fig.tight_layout()
    with atomic_replace(out) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


def markdown(result: dict[str, Any]) -> str:
    """The members as a markdown table, with the generation times and their loads."""
    md = ["# The DPOT pre-training mixture at 64^2", "",
          *table_head("member", "PDE", "channels", "trajectories", "frames (last t)", "grid (kind, length)",
                      "solve grid", "MiB", "generation s (s / trajectory)", "load average at start; end")]
    total = 0.0
    for row in result["rows"]:
        if row.get("missing"):
            md.append(f"| {row['member']} | not generated yet | | | | | | | | |")
            continue
        gen = row["generation"]
        if gen:
            total += gen["seconds"]
        timing = f"{gen['seconds']:.0f} ({gen['seconds'] / gen['samples']:.2f})" if gen else "not logged"
        loads = (f"{' / '.join(f'{v:.1f}' for v in gen['load_start'])}; "
                 f"{' / '.join(f'{v:.1f}' for v in gen['load_end'])}") if gen else ""
        grid = "x".join(str(n) for n in row["grid"])
        md.append(f"| {row['member']} | {row['pde']} | {', '.join(row['channels'])} | {row['samples']} | "
                  f"{row['frames']} ({row['t_last']:g}) | {grid} ({row['kinds'][0]}, {row['lengths'][0]:g}) | "
                  f"{row['solve_resolution'] or grid.split('x')[0]} | {row['mib']:.0f} | {timing} | {loads} |")
    md += ["", f"Generation time of the members listed: {total / 60:.1f} min. The machine (2 cores) was shared "
           "with other jobs during generation (load averages in the table: the times are upper bounds of the "
           "cost on an idle machine, each member's own benchmark in benchmarks/results/solvers/ gives its "
           "per-trajectory cost).", "",
           f"![a frame of every member]({result['png']})", "",
           f"Machine: {describe_machine(result['machine'])}; {describe_load(result)} (this description only)."]
    return page(md)


if __name__ == "__main__":
    main()
