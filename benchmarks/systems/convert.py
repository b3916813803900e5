"""Memory and time of ``opformer convert`` on files of growing size: the memory a conversion adds must not grow
with the file (readers hand over chunks of samples, or a frame of every sample for MATLAB v7.3 files).

Run from the repository root: ``.venv/bin/python -m benchmarks.systems.convert``. Writes synthetic files in the
published layouts (PDEBench 2D CFD at 128^2 x 21 frames; FNO v7.3 .mat at 64^2 x 21 frames) into a temporary
folder, converts each while a thread samples the process's anonymous resident memory (``RssAnon``: what the
process allocated, not the page cache of the files), and writes benchmarks/results/systems/convert.json and .md.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from benchmarks.harness import (
    anonymous_rise, argument_parser, describe_machine, page, quantity_table, table_head, table_row, write_results)
from opformer.data.convert import convert_file
from opformer.data.readers.source import CHUNK_BYTES

CASES = [("pdebench-cfd", 40), ("pdebench-cfd", 100), ("fno-mat", 500), ("fno-mat", 1250)]


def write_source(layout: str, path: Path, samples: int) -> None:
    """A file of ``samples`` random samples in the published layout, written one sample at a time."""
    rng = np.random.default_rng(0)
    with h5py.File(path, "w", userblock_size=512) as f:
        if layout == "pdebench-cfd":
            for key in ("Vx", "Vy", "density", "pressure"):
                data = f.create_dataset(key, (samples, 21, 128, 128), np.float32)
                for i in range(samples):
                    data[i] = rng.standard_normal((21, 128, 128), np.float32)
            f["t-coordinate"] = np.linspace(0, 1, 22, dtype=np.float32)
            f["x-coordinate"] = f["y-coordinate"] = ((np.arange(128) + 0.5) / 128).astype(np.float32)
        else:  # MATLAB v7.3: every axis reversed, the samples fastest on disk
            f["a"] = rng.standard_normal((64, 64, samples), np.float32)
            u = f.create_dataset("u", (20, 64, 64, samples), np.float32)
            for t in range(20):
                u[t] = rng.standard_normal((64, 64, samples), np.float32)


def measure(layout: str, source: Path, out: Path) -> dict[str, Any]:
    """Convert ``source``; the peak rise of anonymous memory over the start, the seconds and the sizes."""
    begin = time.perf_counter()
    with anonymous_rise() as rise:
        convert_file(layout, source, out)
    seconds = time.perf_counter() - begin
    return {"layout": layout, "source_mib": source.stat().st_size / 2**20, "output_mib": out.stat().st_size / 2**20,
            "seconds": seconds, "anonymous_rise_mib": rise["mib"]}


def main() -> None:
    args = argument_parser(__doc__).parse_args()
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for layout, samples in CASES:
            source, out = Path(folder) / f"{layout}.h5", Path(folder) / "out.h5"
            write_source(layout, source, samples)
            rows.append({"samples": samples, **measure(layout, source, out)})
            print(rows[-1], flush=True)
            source.unlink()
            out.unlink()
    write_results(args.results, "convert", {"chunk_mib": CHUNK_BYTES / 2**20, "cases": rows}, markdown, load_before,
                  "numpy", "h5py")


def markdown(result: dict[str, Any]) -> str:
    """The result as markdown: one row per converted file."""
    md = ["# Memory and time of `opformer convert`", ""]
    md += quantity_table([
        ("machine", describe_machine(result["machine"])),
        ("load average before; after (1 min)", f"{result['loadavg_before'][0]:.2f}; {result['loadavg_after'][0]:.2f}"),
        ("chunk of samples per read", f"{result['chunk_mib']:.0f} MiB (v7.3 .mat: a frame of every sample)")])
    md += ["", *table_head("layout", "samples", "source MiB", "output MiB", "seconds", "anonymous memory added, MiB")]
    md += [table_row(r["layout"], r["samples"], f"{r['source_mib']:.0f}", f"{r['output_mib']:.0f}",
                     f"{r['seconds']:.1f}", f"{r['anonymous_rise_mib']:.0f}") for r in result["cases"]]
    return page(md,
                "The memory added is the peak of the process's anonymous resident memory during the conversion over "
                "its value before (sampled every 5 ms); the files' pages in the page cache are not counted (the kernel "
                "can drop them). The machine was shared with other jobs (load averages above).")


if __name__ == "__main__":
    main()
