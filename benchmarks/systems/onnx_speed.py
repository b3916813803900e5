"""One forward pass per sample on this CPU: the exported ONNX graph in onnxruntime against torch eager, for FNO2d,
DPOT-Ti, GT 2D and FactFormer 2D at their papers' sizes (``opformer.models.PRESETS``), batch 1 and 16, 1 and 2
threads (torch's ``set_num_threads``, onnxruntime's ``intra_op_num_threads``). The graph is the whole surrogate
(normalizers inside) as ``opformer export --format onnx`` writes it, spectral layers in their truncated DFT matrix
form; torch runs the same surrogate under ``no_grad`` (its FFT form where that is torch's). Each figure is the median
of a few calls after a warm-up, divided by the batch; the 1-minute load average beside it. Results:
benchmarks/results/systems/onnx_speed.json, .md::

    PYTHONPATH=src:. python -m benchmarks.systems.onnx_speed [--models fno2d_darcy,...] [--repeats 3]
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import argument_parser, describe_load, describe_machine, median_seconds, page, table_head, \
    table_row, write_results
from opformer.models.registry import preset

# preset -> (grid, what the paper ran it on)
MODELS = {
    "fno2d_darcy": ((141, 141), "FNO2d, Darcy at 141^2 (Cao 2021's grid)"),
    "dpot_ti": ((128, 128), "DPOT-Ti, 10 frames of 4 fields at 128^2"),
    "gt_darcy": ((141, 141), "GT 2D, Darcy at 141^2, coarse grid 43^2"),
    "factformer_kolmogorov": ((128, 128), "FactFormer 2D, Kolmogorov flow, 10 frames at 128^2"),
}
BATCHES, THREADS = (1, 16), (1, 2)


def spec(name: str, grid: tuple[int, ...]) -> dict[str, Any]:
    """The surrogate spec of a preset: operator pairs of one field, or frames of the model's fields."""
    model = preset(name)
    channels = model.get("in_channels", 1)
    data: dict[str, Any] = {"stored_shape": list(grid), "periodic": [True] * len(grid), "lengths": [1.0] * len(grid),
                            "input_channels": [f"c{i}" for i in range(channels)]}
    if "t_in" in model:
        data.update(target_channels=data["input_channels"], t_in=model["t_in"], t_out=model.get("t_out", 1))
    else:
        data["target_channels"] = ["u"]
    return {"model": model, "normalize_input": "channel", "normalize_target": "channel", "data": data}


def measure(name: str, repeats: int, folder: Path) -> dict[str, Any]:
    import onnxruntime

    from opformer.imports.onnx_graph import input_shape, write_graph
    from opformer.models.surrogate import Surrogate

    grid, what = MODELS[name]
    torch.manual_seed(0)
    model = Surrogate(spec(name, grid)).eval()
    torch.set_num_threads(2)
    start = time.perf_counter()
    error = write_graph(model, folder / f"{name}.onnx")
    row: dict[str, Any] = {"model": name, "what": what, "grid": list(grid),
                           "parameters": sum(p.numel() for p in model.model.parameters()),
                           "export_s": time.perf_counter() - start, "export_relative_l2": error,
                           "graph_bytes": (folder / f"{name}.onnx").stat().st_size, "cells": []}
    for threads in THREADS:
        torch.set_num_threads(threads)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        session = onnxruntime.InferenceSession(str(folder / f"{name}.onnx"), options,
                                               providers=["CPUExecutionProvider"])
        for batch in BATCHES:
            x = torch.randn(input_shape(model, batch))
            cell: dict[str, Any] = {"threads": threads, "batch": batch}
            for runtime, call in (("torch", lambda: model(x)),
                                  ("onnxruntime", lambda: session.run(["y"], {"x": x.numpy()}))):
                cell[f"{runtime}_load_1min"] = os.getloadavg()[0]
                with torch.no_grad():
                    cell[f"{runtime}_s_per_sample"] = median_seconds(call, repeats if batch == 1 else
                                                                     max(1, repeats - 1)) / batch
            row["cells"].append(cell)
            print(name, cell, flush=True)
    return row


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated names of MODELS")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls at batch 1 (one fewer at batch 16)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as scratch:
        rows = [measure(name, args.repeats, Path(scratch)) for name in args.models.split(",")]
    write_results(args.results, "onnx_speed", {"repeats": args.repeats, "rows": rows}, markdown, load_before,
                  "onnx", "onnxscript", "onnxruntime")


def markdown(r: dict[str, Any]) -> str:
    lines = ["# ONNX graphs in onnxruntime against torch eager on this CPU: one forward pass per sample", "",
             f"Median of {r['repeats']} calls at batch 1 ({max(1, r['repeats'] - 1)} at batch 16) after a warm-up, "
             "divided by the batch; float32; the 1-minute load average when each figure began (the machine's 2 "
             "cores were shared with other jobs, so the figures are noisy).", "",
             *table_head("model", "grid", "parameters", "threads", "batch", "torch (ms/sample)",
                         "onnxruntime (ms/sample)", "onnxruntime / torch", "load (torch, ort)")]
    for row in r["rows"]:
        for cell in row["cells"]:
            ratio = cell["onnxruntime_s_per_sample"] / cell["torch_s_per_sample"]
            lines.append(table_row(f"{row['model']}: {row['what']}", "x".join(map(str, row["grid"])),
                                   f"{row['parameters']:,}", cell["threads"], cell["batch"],
                                   f"{cell['torch_s_per_sample'] * 1e3:.1f}",
                                   f"{cell['onnxruntime_s_per_sample'] * 1e3:.1f}", f"{ratio:.2f}",
                                   f"{cell['torch_load_1min']:.2f}, {cell['onnxruntime_load_1min']:.2f}"))
    lines += ["", *table_head("model", "export (s)", "graph (MB)", "relative L2 at export (ort vs torch)")]
    lines += [table_row(row["model"], f"{row['export_s']:.1f}", f"{row['graph_bytes'] / 1e6:.1f}",
                        f"{row['export_relative_l2']:.1e}") for row in r["rows"]]
    return page(lines, f"Machine: {describe_machine(r['machine'])}; {describe_load(r)}.")


if __name__ == "__main__":
    main()
