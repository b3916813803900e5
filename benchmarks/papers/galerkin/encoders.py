"""Cao 2021 Table 1, right half: the encoder layers alone (10 layers, d = 128, 4 heads, FFN 256, batch 4).

The paper profiles a stack of 10 encoder layers of each attention type at n = 8192 (the authors'
``encoder_memory_profile.py``): random tokens and random 1D coordinates in, the mean squared error against a random
target, one backpropagation. It reports the memory, the speed and the GFLOP of one backpropagation (ST 18.53 GB,
4.12 it/s, 1876; FT 10.80, 5.46, 1610; LT 2.73, 10.98, 773; GT 2.53, 19.20, 412), and the claim that the Galerkin
attention is the lightest and fastest.

Each cell here runs in a fresh process, so that its peak resident set is its own: the same step on the CPU with one
thread, timed (the median of ``--repeats`` steps after one warm-up), its FLOPs counted by
:func:`opformer.bench.flops.count_flops` (matrix products) and its peak RSS. ST and FT form n x n attention matrices
(about 4 GiB per layer at 8192 with 4 heads and batch 4, over 40 GiB for the stack): on a 24 GiB machine they run at
n = 2048 only, where all four are compared. Run from the repository root::

    .venv/bin/python -m benchmarks.papers.galerkin.encoders --cells st:2048,ft:2048,lt:2048,gt:2048,lt:8192,gt:8192

Writes benchmarks/results/papers/galerkin/encoders.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from benchmarks.harness import (
    GIB, argument_parser, describe_load, describe_machine, kept_rows, page, table_head, table_row, write_results)

ATTENTION = {"st": "softmax", "ft": "fourier", "lt": "linear", "gt": "galerkin"}
LAYERS, D_MODEL, HEADS, FFN, BATCH = 10, 128, 4, 256, 4
#: the paper's right half of Table 1 at n = 8192: memory (GB), CUDA memory (GB), speed (it/s), GFLOP per BP
PAPER = {"st": (18.53, 31.34, 4.12, 1876), "ft": (10.80, 22.32, 5.46, 1610), "lt": (2.73, 2.66, 10.98, 773),
         "gt": (2.53, 2.33, 19.20, 412)}


def measure_cell(attention: str, n: int, repeats: int) -> dict[str, Any]:
    """One cell in this process: the stack's step timed, its FLOPs and this process's peak RSS."""
    import torch

    from opformer.bench.cell import peak_memory
    from opformer.bench.flops import count_flops
    from opformer.nn.encoder import SimpleEncoder

    torch.manual_seed(0)
    encoder = SimpleEncoder(LAYERS, D_MODEL, n_head=HEADS, dim_ff=FFN, attention_type=ATTENTION[attention])
    x, pos, target = torch.randn(BATCH, n, D_MODEL), torch.randn(BATCH, n, 1), torch.randn(BATCH, n, D_MODEL)

    def step() -> None:
        encoder.zero_grad(set_to_none=True)
        (encoder(x, pos) - target).square().mean().backward()

    step()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    peak, _ = peak_memory(torch.device("cpu"))
    return {"name": f"{attention}:{n}", "attention": attention, "n": n, "seconds_per_step": statistics.median(times),
            "peak_rss_gib": peak / GIB, "gflop_per_step": count_flops(step) / 1e9,
            "parameters": sum(p.numel() for p in encoder.parameters())}


def parse_cells(text: str) -> list[tuple[str, int]]:
    """``"st:2048,gt:8192"`` as (attention, n) pairs; anything else ends the script in one line."""
    cells = []
    for item in text.split(","):
        attention, _, n = item.partition(":")
        if attention not in ATTENTION or not n.isdigit() or int(n) < 2:
            raise SystemExit(f"--cells {item}: expected ATTENTION:N with ATTENTION one of "
                             f"{', '.join(ATTENTION)} and N >= 2")
        cells.append((attention, int(n)))
    return cells


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--cells", default="st:2048,ft:2048,lt:2048,gt:2048,lt:8192,gt:8192")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cell", help=argparse.SUPPRESS)  # one cell, in the child process
    args = parser.parse_args()
    if args.cell:
        import torch

        torch.set_num_threads(1)
        attention, n = json.loads(args.cell)
        print(json.dumps(measure_cell(attention, n, args.repeats)))
        return
    load_before = os.getloadavg()
    rows = {}
    for attention, n in parse_cells(args.cells):
        out = subprocess.run([sys.executable, "-m", "benchmarks.papers.galerkin.encoders", "--repeats",
                              str(args.repeats), "--cell", json.dumps([attention, n])], env=dict(
                                  os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, check=True)
        rows[f"{attention}:{n}"] = json.loads(out.stdout.strip().splitlines()[-1])
    cells = kept_rows(args.results, "encoders", rows, "cells",
                      order=lambda row: (row["n"], list(ATTENTION).index(row["attention"])))
    result = {"layers": LAYERS, "d_model": D_MODEL, "heads": HEADS, "ffn": FFN, "batch": BATCH, "cells": cells}
    write_results(args.results, "encoders", result, markdown, load_before)


def markdown(result: dict[str, Any]) -> str:
    """A row per cell beside the paper's figures at n = 8192, and each n's ratios to the Galerkin attention."""
    lines = ["# Cao 2021 Table 1, right half: the encoder layers alone", "",
             f"{result['layers']} encoder layers, d = {result['d_model']}, {result['heads']} heads, FFN "
             f"{result['ffn']}, batch {result['batch']}: one backpropagation of the mean squared error against a "
             "random target, on the CPU with one thread (median of the timed steps after one warm-up); memory is "
             "the peak RSS of a fresh process per cell; FLOPs count matrix products. The paper's figures are at "
             "n = 8192 on a GPU.", "",
             f"Machine: {describe_machine(result['machine'])}; {describe_load(result)}.", "",
             *table_head("attention", "n", "s/step", "x GT's time", "peak RSS (GiB)", "x GT's memory",
                         "GFLOP/step", "parameters", "paper at 8192: memory (GB), it/s, GFLOP")]
    galerkin = {row["n"]: row for row in result["cells"] if row["attention"] == "gt"}
    for row in result["cells"]:
        base = galerkin.get(row["n"])
        paper = PAPER[row["attention"]]
        lines.append(table_row(
            row["attention"].upper(), row["n"], f"{row['seconds_per_step']:.3f}",
            "-" if base is None else f"{row['seconds_per_step'] / base['seconds_per_step']:.2f}",
            f"{row['peak_rss_gib']:.2f}", "-" if base is None else f"{row['peak_rss_gib'] / base['peak_rss_gib']:.2f}",
            f"{row['gflop_per_step']:.1f}", f"{row['parameters']:,}", f"{paper[0]}, {paper[2]}, {paper[3]}"))
    return page(lines)


if __name__ == "__main__":
    main()
