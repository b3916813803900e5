"""``opformer export --format onnx``: every model family's graph in onnxruntime against torch eager on the same
inputs (float32, CPU): the relative L2 distance and the largest absolute difference of the outputs at batch 1 and 4,
on two grids where the model runs on any grid (one where its weights fix it: DPOT), for the small surrogates of
tests/imports/onnx_families.py (normalizers with statistics far from 0 and 1, baked into the graph). Also the export's
seconds and the graph's size; the load average beside every row. Results:
benchmarks/results/systems/onnx_equality.json, .md::

    PYTHONPATH=src:. python -m benchmarks.systems.onnx_equality [--families gt_1d,fno2d,...]
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import argument_parser, describe_load, describe_machine, page, table_head, table_row, \
    write_results
from tests.imports.onnx_families import FAMILIES, surrogate

BATCHES = (1, 4)
TOLERANCE = 1e-5


def measure(name: str, grid: tuple[int, ...], folder: Path) -> dict[str, Any]:
    """One family on one grid: export, then onnxruntime beside torch at every batch size."""
    import onnxruntime

    from opformer.imports.onnx_graph import input_shape, relative_l2, write_graph

    model = surrogate(name, grid)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    write_graph(model, folder / "model.onnx")
    seconds = time.perf_counter() - start
    session = onnxruntime.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    generator = torch.Generator().manual_seed(1)
    row: dict[str, Any] = {"family": name, "grid": list(grid), "model": model.spec["model"]["name"],
                           "parameters": sum(p.numel() for p in model.model.parameters()),
                           "export_s": seconds, "graph_bytes": (folder / "model.onnx").stat().st_size,
                           "load_1min": load, "batches": {}}
    for batch in BATCHES:
        x = model.input_normalizer.decode(torch.randn(input_shape(model, batch), generator=generator))
        with torch.no_grad():
            expected = model(x)
        got = torch.from_numpy(session.run(["y"], {"x": x.numpy()})[0])
        row["batches"][str(batch)] = {"relative_l2": relative_l2(got, expected),
                                      "max_abs": float((got - expected).abs().max())}
    return row


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated names of FAMILIES")
    args = parser.parse_args()
    load_before = os.getloadavg()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.families.split(","):
            for grid in FAMILIES[name][1]:
                rows.append(measure(name, grid, Path(scratch)))
                print(rows[-1], flush=True)
    worst = max(b["relative_l2"] for row in rows for b in row["batches"].values())
    write_results(args.results, "onnx_equality", {"tolerance": TOLERANCE, "worst_relative_l2": worst, "rows": rows},
                  markdown, load_before, "onnx", "onnxscript", "onnxruntime")


def markdown(r: dict[str, Any]) -> str:
    lines = ["# ONNX graphs in onnxruntime against torch, every model family", "",
             "onnxruntime's output against torch eager's on the same float32 inputs (physical units; the normalizers "
             f"are in the graph), batch {' and '.join(map(str, BATCHES))}; the small surrogates of "
             "tests/imports/onnx_families.py. Spectral layers are in their truncated DFT matrix form in the graph. "
             f"The worst relative L2 is {r['worst_relative_l2']:.2e} (the tests demand at most {r['tolerance']:g}).",
             "", *table_head("family", "model", "grid", "parameters",
                             *[f"rel. L2 (batch {b})" for b in BATCHES], *[f"max abs (batch {b})" for b in BATCHES],
                             "export (s)", "graph (KB)", "load (1 min)")]
    for row in r["rows"]:
        batches = [row["batches"][str(b)] for b in BATCHES]
        lines.append(table_row(row["family"], row["model"], "x".join(map(str, row["grid"])), f"{row['parameters']:,}",
                               *[f"{b['relative_l2']:.2e}" for b in batches], *[f"{b['max_abs']:.1e}" for b in batches],
                               f"{row['export_s']:.1f}", f"{row['graph_bytes'] / 1e3:.0f}", f"{row['load_1min']:.2f}"))
    return page(lines, f"One torch thread. Machine: {describe_machine(r['machine'])}, shared with other jobs; "
                       f"{describe_load(r)}.")


if __name__ == "__main__":
    main()
