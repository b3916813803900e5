"""Byte-flip fuzz of opformer's data files (issue 38 §2): does every byte a read depends on get checked as it is read?

Run from the repository root: ``.venv/bin/python -m benchmarks.robustness.store_fuzz``. Small files are written by the
store's own writers (an operator file, a trajectory file, a trajectory file whose 70 kB ``pde`` attribute HDF5 stores
outside its checked metadata, a file in the layout opformer wrote before chunk checksums, and a mesh file of three
samples of different point counts with cells and settings); then, for every byte
offset (every ``--stride``-th in the large and the old file), a copy with that byte flipped (``flip``: xor 0xFF;
``bit``: its lowest bit, which turns a digit into another digit) is read as training reads it: ``read_info`` and then
every sample of every dataset. Truncations (``cut``) are tried every 64 bytes.
Each read must either raise one line of ``DataError`` naming the file (and, for a byte inside a stored chunk,
the sample), or give back exactly the intact file's description and arrays; anything else (a different result,
another exception, a hang past ``--timeout`` seconds or a crash) is a failure. Cases run in worker processes,
so that a hang or a crash is seen and the next offset goes on.

Writes benchmarks/results/robustness/store_fuzz.json and .md (the load average before and after is recorded);
``--only mesh`` fuzzes the named files alone and writes store_fuzz_mesh.json and .md.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from benchmarks.harness import argument_parser, describe_load, describe_machine, page, write_results
from opformer.data import store
from opformer.errors import DataError

FILES = ("operator", "trajectory", "large_attribute", "legacy", "mesh")
#: Files whose every byte is flipped (the others: every ``--stride``-th).
EVERY_BYTE = ("operator", "trajectory")


def write_files(folder: Path) -> dict[str, Path]:
    """The fuzzed files (tiny: every byte of the first two is flipped)."""
    rng = np.random.default_rng(0)
    domain1, domain2 = {"lengths": [1.0], "periodic": [True]}, {"lengths": [1.0, 1.0], "periodic": [True, True]}
    files = {"operator": store.write_operator_dataset(
        folder / "operator.h5", rng.normal(size=(6, 16, 1)), rng.normal(size=(6, 16, 1)),
        pde={"name": "toy", "viscosity": 0.01}, solver={"name": "exact"}, domain=domain1, seed=3,
        input_channels=["a"], target_channels=["u"])}
    files["trajectory"] = store.write_trajectory_dataset(
        folder / "trajectory.h5", rng.normal(size=(3, 4, 6, 6, 1)), np.linspace(0.0, 1.5, 4),
        pde={"name": "toy", "per_sample": {"b": [0.1, 0.2, 0.3]}}, solver={"name": "exact"}, domain=domain2, seed=4,
        channels=["w"])
    files["large_attribute"] = store.write_trajectory_dataset(
        folder / "large_attribute.h5", rng.normal(size=(2, 3, 4, 4, 1)), np.arange(3.0),
        pde={"name": "toy", "per_sample": {"b": [round(0.001 * i, 3) for i in range(12000)]}},
        solver={"name": "exact"}, domain=domain2, seed=5, channels=["w"])
    legacy = folder / "legacy.h5"
    with h5py.File(legacy, "w", userblock_size=store.USERBLOCK) as f:  # as opformer wrote files before chunk checksums
        f.create_dataset("input", data=rng.normal(size=(6, 16, 1)).astype(np.float32), chunks=(1, 16, 1))
        f.create_dataset("target", data=rng.normal(size=(6, 16, 1)).astype(np.float32), chunks=(1, 16, 1))
        for key, value in {"format": "opformer", "format_version": 1, "kind": "operator", "seed": 0,
                           "opformer_version": "0.1", "created": "2025-01-01T00:00:00+00:00", "pde": '{"name": "toy"}',
                           "solver": "{}", "domain": json.dumps(domain1), "input_channels": '["a"]',
                           "target_channels": '["u"]'}.items():
            f.attrs[key] = value
    with open(legacy, "r+b") as f:
        f.write(store.CHECKSUM_MAGIC + store._file_digest(legacy).encode())
    files["legacy"] = legacy
    from scipy.spatial import Delaunay

    from opformer.meshes import MeshSample

    samples = []
    for n in (10, 14, 8):
        points = np.concatenate([[[0, 0], [1, 0], [0, 1], [1, 1]], rng.random((n - 4, 2))])
        samples.append(MeshSample(points=points, fields={"a": points[:, 0], "u": rng.normal(size=(n, 2))},
                                  cells=Delaunay(points).simplices, settings={"radius": n / 10}))
    files["mesh"] = store.write_mesh_dataset(folder / "mesh.h5", samples, inputs=["a"], targets=["u"], pde="toy",
                                             settings={"nu": 0.1}, seed=6)
    return files


def read_all(path: Path) -> tuple[Any, dict[str, np.ndarray]]:
    """What training reads: the description, then every sample of every dataset."""
    info = store.read_info(path)
    described = (info.kind, info.n_samples, info.spatial_shape, info.input_channels, info.target_channels, info.pde,
                 info.solver, info.domain, info.seed, info.times, info.extra)
    if info.kind == "trajectory":
        return described, {"fields": store.read_fields(path, slice(None))}
    if info.kind == "mesh":
        with store.MeshFile(path) as data:
            return described + (info.mesh,), {
                f"{i}/{name}": value for i in range(len(data)) for name, value in mesh_arrays(data.sample(i)).items()}
    x, y = store.read_arrays(path, slice(None))
    return described, {"input": x, "target": y}


def mesh_arrays(sample: Any) -> dict[str, np.ndarray]:
    """A mesh sample's arrays by name."""
    return {"points": sample.points, "weights": sample.weights, "cells": sample.cells,
            **{f"field {k}": v for k, v in sample.fields.items()},
            "settings": np.asarray(sorted(sample.settings.items()), dtype=object)}


def regions(path: Path) -> list[tuple[int, int, str]]:
    """(start, end, label) of the user block and of every stored chunk (label: dataset, sample, frame; in a mesh
    file's per-point datasets, the sample of the chunk's first row, the first whose read touches it)."""
    found = [(0, store.USERBLOCK, "user block")]
    with h5py.File(path, "r") as f:
        mesh = "offsets" in f
        rows = {"cells": f["cell_offsets"][:] if "cell_offsets" in f else None}
        for name, dataset in f.items():
            for i in range(dataset.id.get_num_chunks()):
                chunk = dataset.id.get_chunk_info(i)
                if mesh:
                    offsets = rows.get(name, f["offsets"][:])
                    per_point = name in ("points", "weights", "point_input", "point_target", "point_fields", "cells")
                    where = [f"sample {int(np.searchsorted(offsets, chunk.chunk_offset[0], 'right')) - 1}"] \
                        if per_point else []
                    found.append((chunk.byte_offset, chunk.byte_offset + chunk.size,
                                  f"chunk /{name} {', '.join(where)}"))
                    continue
                where = ([f"sample {chunk.chunk_offset[0]}"] if name in store.SAMPLE_DATASETS else []) + \
                    ([f"frame {chunk.chunk_offset[1]}"] if name == "fields" else [])
                found.append((chunk.byte_offset, chunk.byte_offset + chunk.size, f"chunk /{name} {', '.join(where)}"))
    return found


def region_of(offset: int, found: list[tuple[int, int, str]]) -> str:
    return next((label for start, end, label in found if start <= offset < end), "metadata or unused")


def worker(path: Path, offsets: list[int], fault: str) -> None:
    """Print one JSON line per offset: the outcome of reading a copy of ``path`` with that fault."""
    pristine = path.read_bytes()
    described, arrays = read_all(path)
    copy = path.with_name("fuzzed_" + path.name)
    for offset in offsets:
        raw = bytearray(pristine)
        if fault in ("flip", "bit"):
            raw[offset] ^= 0xFF if fault == "flip" else 0x01
        else:
            del raw[offset:]
        copy.write_bytes(bytes(raw))
        try:
            got, got_arrays = read_all(copy)
        except DataError as exc:
            text = str(exc)
            outcome = {"outcome": "error" if "\n" not in text and str(copy) in text else "error, not one line naming the file",
                       "message": text.replace(str(copy), "FILE")}
        except Exception as exc:  # noqa: BLE001 - what the fuzz is looking for
            outcome = {"outcome": f"other exception: {exc.__class__.__name__}", "message": str(exc)[:200]}
        else:
            same = got == described and got_arrays.keys() == arrays.keys() and all(
                (a is None and b is None) or np.array_equal(a, b) for a, b in
                ((got_arrays[k], arrays[k]) for k in arrays))
            outcome = {"outcome": "same" if same else "different"}
        print(json.dumps({"offset": offset, **outcome}), flush=True)


def fuzz(path: Path, offsets: list[int], fault: str, timeout: float) -> dict[int, dict[str, Any]]:
    """Outcomes by offset, the worker restarted after a hang (killed after ``timeout`` s) or a crash."""
    results: dict[int, dict[str, Any]] = {}
    todo = list(offsets)
    listing = path.with_name(f"offsets_{path.stem}.json")
    while todo:
        listing.write_text(json.dumps(todo))
        proc = subprocess.Popen([sys.executable, "-m", __spec__.name, "--worker", str(path), fault, str(listing)],
                                stdout=subprocess.PIPE, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        while True:
            if not selector.select(timeout):
                proc.kill()
                proc.wait()
                results[todo[0]] = {"outcome": "hang"}
                break
            line = proc.stdout.readline()
            if not line:
                proc.wait()
                if todo:
                    results[todo[0]] = {"outcome": f"crash (exit {proc.returncode})"}
                break
            record = json.loads(line)
            results[record.pop("offset")] = record
            todo.pop(0)
        todo = [o for o in offsets if o not in results]
        proc.stdout.close()
    return results


def summarise(path: Path, results: dict[int, dict[str, Any]], fault: str) -> dict[str, Any]:
    """Counts by outcome and by region; chunk flips that name their sample; the offsets that read back intact."""
    found = regions(path)
    by_region: dict[str, Counter] = {}
    named = unnamed = 0
    intact = []
    for offset, record in sorted(results.items()):
        region = region_of(offset, found)
        kind = region if not region.startswith("chunk") else "chunk /" + region.split()[1].lstrip("/")
        by_region.setdefault(kind, Counter())[record["outcome"]] += 1
        if fault != "cut" and region.startswith("chunk") and record["outcome"] == "error":
            where = region.split(" ", 2)[2]
            named, unnamed = (named + 1, unnamed) if where in record["message"] else (named, unnamed + 1)
        if record["outcome"] == "same" and region != "user block":
            intact.append(offset)
    spans = []
    for offset in intact:
        if spans and offset <= spans[-1][1] + 64:
            spans[-1][1] = offset
        else:
            spans.append([offset, offset])
    outcomes = Counter(record["outcome"] for record in results.values())
    messages = Counter(record.get("message", "").split(": ", 1)[-1] for record in results.values()
                       if record["outcome"] == "error")
    return {"file": path.name, "bytes": path.stat().st_size, "fault": fault, "cases": len(results),
            "outcomes": dict(outcomes), "by_region": {k: dict(v) for k, v in by_region.items()},
            "chunk_errors_naming_the_sample": named, "chunk_errors_not_naming_it": unnamed,
            "intact_outside_user_block": [f"{a}..{b}" for a, b in spans],
            "failures": {str(o): r for o, r in sorted(results.items())
                         if r["outcome"] not in ("same", "error")},
            "messages": dict(messages.most_common(8))}


def to_markdown(result: dict[str, Any]) -> str:
    lines = ["# Byte-flip fuzz of opformer's data files (issue 38 §2)", "",
             f"`python -m benchmarks.robustness.store_fuzz` on {describe_machine(result['machine'])}; "
             f"{describe_load(result)}; "
             f"{result['seconds']:.0f} s in all. h5py {result['h5py']}, HDF5 {result['hdf5']}.", "",
             "Each case flips one byte of a copy of the file (`flip`: xor 0xFF; `bit`: its lowest bit, a digit becomes "
             "another digit), or cuts the file there (`cut`), then reads it as training "
             "does (`read_info`, then every sample of every dataset). A case passes when the read raises one line of "
             "`DataError` naming the file or returns exactly the intact file's description and arrays; a different "
             "result, another exception, a hang or a crash fails it.", "",
             "| file | bytes | fault | cases | one-line DataError | intact result | failures | chunk errors naming "
             "their sample |", "|---|---|---|---|---|---|---|---|"]
    for s in result["runs"]:
        o = s["outcomes"]
        failures = s["cases"] - o.get("error", 0) - o.get("same", 0)
        chunk = s["chunk_errors_naming_the_sample"] + s["chunk_errors_not_naming_it"]
        lines.append(f"| {s['file']} | {s['bytes']} | {s['fault']} | {s['cases']} | {o.get('error', 0)} | "
                     f"{o.get('same', 0)} | {failures} | " + (f"{s['chunk_errors_naming_the_sample']}/{chunk}"
                                                             if s["fault"] != "cut" and chunk else "-") + " |")
    lines += ["", "## Where the intact results came from", "",
              "| file | fault | region | outcomes |", "|---|---|---|---|"]
    for s in result["runs"]:
        for region, counts in s["by_region"].items():
            lines.append(f"| {s['file']} | {s['fault']} | {region} | "
                         + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + " |")
    lines += ["", "Flipped bytes outside the user block that read back intact (offset spans):", ""]
    for s in result["runs"]:
        if s["fault"] != "cut":
            lines.append(f"- {s['file']}, {s['fault']}: {', '.join(s['intact_outside_user_block']) or 'none'}")
    lines += ["", "## The messages (most frequent, file shown as FILE)", ""]
    for s in result["runs"]:
        for message, count in s["messages"].items():
            lines.append(f"- {s['file']}, {s['fault']}, {count}x: `{message}`")
    failures = [(s["file"], s["fault"], o, r) for s in result["runs"] for o, r in s["failures"].items()]
    lines += ["", f"## Failures: {len(failures)}", ""]
    lines += [f"- {f} {fault} at {o}: {r['outcome']} {r.get('message', '')}" for f, fault, o, r in failures[:50]]
    return page(lines)


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:  # --worker FILE FAULT OFFSETS.json
        worker(Path(sys.argv[2]), json.loads(Path(sys.argv[4]).read_text()), sys.argv[3])
        return
    parser = argument_parser(__doc__)
    parser.add_argument("--stride", type=int, default=7, help="offsets of the large and the old file: every Nth")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds a case may take before it is a hang")
    parser.add_argument("--only", help=f"fuzz only these files, comma-separated ({', '.join(FILES)}); results "
                        "then go to store_fuzz_NAMES")
    args = parser.parse_args()
    load_before = os.getloadavg()
    tick = time.monotonic()
    runs = []
    with tempfile.TemporaryDirectory(prefix="opformer-fuzz-") as folder:
        files = write_files(Path(folder))
        chosen = FILES if not args.only else [name.strip() for name in args.only.split(",")]
        for name in chosen:
            path = files[name]
            size = path.stat().st_size
            step = 1 if name in EVERY_BYTE else args.stride
            every = list(range(0, size, step))
            for fault, offsets in (("flip", every), ("bit", every), ("cut", list(range(64, size, 64)))):
                results = fuzz(path, offsets, fault, args.timeout)
                runs.append(summarise(path, results, fault))
                print(f"{name} {fault}: {runs[-1]['outcomes']}", flush=True)
    result = {"runs": runs, "stride": args.stride, "timeout": args.timeout, "seconds": time.monotonic() - tick,
              "hdf5": h5py.version.hdf5_version, "h5py": h5py.version.version}
    write_results(args.results, "store_fuzz" + ("" if not args.only else "_" + "_".join(chosen)), result, to_markdown,
                  load_before, "h5py", "numpy")


if __name__ == "__main__":
    main()
