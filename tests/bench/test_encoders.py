"""GT Table 1's encoder-only half: the stack's FLOPs grow with n as each attention's formula says."""

import pytest

from benchmarks.papers.galerkin.encoders import BATCH, HEADS, LAYERS, markdown, measure_cell, parse_cells


def flops(attention: str, n: int) -> float:
    return measure_cell(attention, n, 1)["gflop_per_step"] * 1e9


def test_the_n_squared_products_are_the_softmax_and_fourier_attentions_only():
    # ST and FT: Q K^T and (.) V per head on d_head + 1 features (the coordinate), forward and twice backward:
    # 3 * 2 products * 2 flops * batch * heads * (d_head + 1) * n^2 per layer; flops(2n) - 2 flops(n) is its n^2 part
    d_head = 128 // HEADS + 1
    for attention in ("st", "ft"):
        assert flops(attention, 16) - 2 * flops(attention, 8) == pytest.approx(
            12 * BATCH * HEADS * d_head * 2 * 8 ** 2 * LAYERS)
    assert flops("lt", 16) == pytest.approx(2 * flops("lt", 8))  # linear in n
    # GT regroups the output map into d x d products per sample: linear in n plus a constant
    assert flops("gt", 16) < 2 * flops("gt", 8)


def test_cells_are_parsed_and_the_table_gives_ratios_to_the_galerkin_attention():
    assert parse_cells("st:2048,gt:8192") == [("st", 2048), ("gt", 8192)]
    for text in ("xt:8", "gt:x", "gt:1", "gt"):
        with pytest.raises(SystemExit, match="--cells"):
            parse_cells(text)
    cell = {"seconds_per_step": 2.0, "peak_rss_gib": 3.0, "gflop_per_step": 10.0, "parameters": 5, "n": 8}
    result = {"layers": 10, "d_model": 128, "heads": 4, "ffn": 256, "batch": 4, "machine": "2 cores",
              "loadavg_before": [1.0, 1.0, 1.0], "loadavg_after": [2.0, 2.0, 2.0],
              "cells": [{**cell, "attention": "st", "name": "st:8"},
                        {**cell, "attention": "gt", "name": "gt:8", "seconds_per_step": 0.5, "peak_rss_gib": 1.5}]}
    line = next(line for line in markdown(result).splitlines() if line.startswith("| ST |"))
    assert line.startswith("| ST | 8 | 2.000 | 4.00 | 3.00 | 2.00 | 10.0 | 5 | 18.53, 4.12, 1876 |")
