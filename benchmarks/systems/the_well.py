"""``opformer convert the-well`` against the publisher's own reader, ``the_well``'s ``WellDataset``.

Run from the repository root: ``.venv/bin/python -m benchmarks.systems.the_well`` (needs the ``dev`` extra's
``the-well``). Writes files in The Well's layout into a temporary folder with the tests' writer
(``tests/foreign_formats.py``'s ``write_well_file``: scalar, vector and rank-2 tensor fields, a field constant in time,
one varying along one axis, one the same in every sample; periodic, wall and open boundaries; non-square grids)
and the file ``the_well.utils.dummy_data`` writes, converts each, and compares every channel of every frame of
every trajectory with what ``WellDataset`` returns (one-step windows: ``input_fields``, the last frame from
``output_fields``, ``constant_fields``): the largest absolute difference per field. Then times the conversion
of a larger file (seconds per GB of the source, the memory it adds) beside reading the same trajectories whole
through ``WellDataset`` (``full_trajectory_mode``). Writes benchmarks/results/systems/the_well.json and .md.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import (
    anonymous_rise, argument_parser, describe_machine, page, quantity_table, table_head, write_results)
from opformer.data.convert import convert_file
from opformer.data.store import read_block, read_info
from tests.foreign_formats import write_well_file  # the tests' writer of The Well's layout

#: name -> (grid, boundary per axis, trajectories per file, frames): the compared files (two files each).
CASES = {
    "2d 24x16 periodic/wall": ((24, 16), ("periodic", "wall"), 3, 8),
    "3d 12x10x8 periodic/wall/open": ((12, 10, 8), ("periodic", "wall", "open"), 2, 6),
}
#: The timed file: 2D 128x96, 50 frames, 10 channels, 20 trajectories (0.49 GB of float32).
TIMED = ((128, 96), ("periodic", "wall"), 20, 50)


def compare(root: Path, out: Path) -> dict[str, Any]:
    """Convert every file of ``root/data/train`` and compare it with WellDataset, field by field."""
    from the_well.data import WellDataset

    convert_file("the-well", sorted((root / "data" / "train").glob("*.hdf5")), out)
    info, fields = read_info(out), read_block(out, "fields", ())
    well = WellDataset(path=str(root), well_split_name="train", n_steps_input=1, n_steps_output=1)
    meta = well.metadata
    variable = [n for order in range(3) for n in meta.field_names[order]]
    constant = [n for order in range(3) for n in meta.constant_field_names[order]]
    samples, frames = fields.shape[:2]
    ours = np.empty_like(fields)  # WellDataset's values in opformer's layout
    for sample in range(samples):
        for frame in range(frames - 1):
            item = well[sample * (frames - 1) + frame]
            ours[sample, frame, ..., :len(variable)] = item["input_fields"][0].numpy()
            ours[sample, frame, ..., len(variable):] = item["constant_fields"].numpy()
            if frame == frames - 2:
                ours[sample, frame + 1, ..., :len(variable)] = item["output_fields"][0].numpy()
                ours[sample, frame + 1, ..., len(variable):] = item["constant_fields"].numpy()
    difference = np.abs(fields.astype(np.float64) - ours).reshape(-1, fields.shape[-1]).max(axis=0)
    return {"shape": list(fields.shape), "channels_match": info.input_channels == variable + constant,
            "channels": info.input_channels, "max_abs_difference": {c: float(d) for c, d in
                                                                    zip(info.input_channels, difference)},
            "boundaries": info.domain["boundaries"], "grid": info.domain["grid"]}


def timed(folder: Path) -> dict[str, Any]:
    """Seconds and memory of converting one larger file, beside WellDataset reading its trajectories whole."""
    from the_well.data import WellDataset

    shape, boundaries, samples, frames = TIMED
    root = folder / "timed"
    source = write_well_file(root / "data" / "train" / "big.hdf5", samples=samples, frames=frames, shape=shape,
                             boundaries=boundaries)
    gb = source.stat().st_size / 1e9
    out = folder / "timed.h5"
    begin = time.perf_counter()
    with anonymous_rise() as rise:
        convert_file("the-well", [source], out)
    convert_s = time.perf_counter() - begin
    well = WellDataset(path=str(root), well_split_name="train", n_steps_input=1, full_trajectory_mode=True)
    begin = time.perf_counter()
    for index in range(len(well)):
        well[index]
    well_s = time.perf_counter() - begin
    begin = time.perf_counter()
    read_block(out, "fields", ())
    read_s = time.perf_counter() - begin
    return {"shape": [samples, frames, *shape, 10], "source_gb": gb, "output_gb": out.stat().st_size / 1e9,
            "convert_s": convert_s, "convert_s_per_gb": convert_s / gb, "anonymous_rise_mib": rise["mib"],
            "well_dataset_read_s_per_gb": well_s / gb, "opformer_read_s_per_gb": read_s / gb}


def main() -> None:
    args = argument_parser(__doc__).parse_args()
    load_before = os.getloadavg()
    from the_well.utils.dummy_data import write_dummy_data

    rows = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as name:
        folder = Path(name)
        for case, (shape, boundaries, samples, frames) in CASES.items():
            root = folder / case.split()[0]
            for i, reynolds in enumerate((100.0, 400.0)):
                write_well_file(root / "data" / "train" / f"re{i}.hdf5", samples=samples, frames=frames, shape=shape,
                                boundaries=boundaries, seed=i, params={"Reynolds": reynolds})
            rows[case] = compare(root, folder / f"{case.split()[0]}.h5")
            print(case, rows[case]["max_abs_difference"], flush=True)
        np.random.seed(0)
        (folder / "dummy" / "data" / "train").mkdir(parents=True)
        write_dummy_data(str(folder / "dummy" / "data" / "train" / "dummy.hdf5"))
        rows["the_well.utils.dummy_data"] = compare(folder / "dummy", folder / "dummy.h5")
        speed = timed(folder)
        print(speed, flush=True)
    write_results(args.results, "the_well", {"cases": rows, "timed": speed}, markdown, load_before,
                  "numpy", "h5py", "the_well")


def markdown(result: dict[str, Any]) -> str:
    """The comparison per file and field, and the speed."""
    speed = result["timed"]
    md = ["# `opformer convert the-well` against `the_well`'s `WellDataset`", "",]
    md += quantity_table([
        ("machine", describe_machine(result["machine"])),
        ("load average before; after (1 min)", f"{result['loadavg_before'][0]:.2f}; {result['loadavg_after'][0]:.2f}")])
    md += ["", "## Every channel of every frame of every trajectory, against WellDataset", "",
           *table_head("file", "stored (N, T, *grid, C)", "channels as WellDataset's", "grid kinds (boundaries)",
                       "largest absolute difference per field")]
    for case, row in result["cases"].items():
        worst = ", ".join(f"{c} {d:.1g}" for c, d in row["max_abs_difference"].items())
        kinds = ", ".join(f"{g} ({'/'.join(b)})" for g, b in zip(row["grid"], row["boundaries"]))
        md.append(f"| {case} | {tuple(row['shape'])} | {'yes' if row['channels_match'] else 'NO'} | {kinds} | "
                  f"{worst} |")
    md += ["", "## Speed (one file, page cache warm; seconds per GB of the source file)", ""]
    md += quantity_table([
        ("file", f"{tuple(speed['shape'])} float32, {speed['source_gb']:.2f} GB"),
        ("`opformer convert the-well`", f"{speed['convert_s']:.1f} s, {speed['convert_s_per_gb']:.1f} s per GB "
                                        f"(output {speed['output_gb']:.2f} GB, checksummed: a field constant "
                                        "along an axis is stored whole)"),
        ("memory the conversion adds", f"{speed['anonymous_rise_mib']:.0f} MiB"),
        ("WellDataset reading every trajectory whole", f"{speed['well_dataset_read_s_per_gb']:.1f} s per GB"),
        ("opformer reading the converted file whole", f"{speed['opformer_read_s_per_gb']:.1f} s per GB")])
    return page(md,
                "Two files per case (parameters 100 and 400), converted as one file. The machine was shared with "
                "other jobs (load averages above).")


if __name__ == "__main__":
    main()
