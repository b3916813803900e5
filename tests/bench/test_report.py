"""The bench plot: one point per measured cell, its resolution axes ticked at the measured resolutions."""

from pathlib import Path

import pytest

from opformer.bench.report import GIB, _bench_figure, plot_bench


def _cell(model, implementation, n, status="ok"):
    return {"model": model, "implementation": implementation, "resolution": n, "status": status,
            "seconds_median": n / 1000, "peak_memory_bytes": n * GIB / 100}


REPORT = {
    "slopes": {"fno/opformer": {"time": 1.0, "memory": None}, "fno/neuralop": {"time": None, "memory": None}},
    "cells": [_cell("fno", "opformer", 16), _cell("fno", "opformer", 48), _cell("fno", "opformer", 256, "oom"),
              _cell("fno", "neuralop", 48), _cell("fno", "neuralop", 96)],
}


@pytest.mark.slow
def test_resolution_axes_tick_at_the_measured_resolutions():
    figure = _bench_figure(REPORT)
    try:
        for ax in figure.axes:
            assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
            assert list(ax.get_xticks()) == [16, 48, 96]  # not the failed 256, no decades
            assert [label.get_text() for label in ax.get_xticklabels()] == ["16", "48", "96"]
            assert list(ax.get_xticks(minor=True)) == []
            assert ax.get_xlabel() == "resolution n" and ax.get_ylabel()
        ax_time, ax_memory = figure.axes
        (ours, peer) = ax_time.get_lines()
        assert list(ours.get_xdata()) == [16, 48] and list(ours.get_ydata()) == [0.016, 0.048]
        assert list(peer.get_xdata()) == [48, 96]
        assert list(ax_memory.get_lines()[0].get_ydata()) == [0.16, 0.48]
        assert [t.get_text() for t in ax_time.get_legend().get_texts()] == ["fno/opformer (slope 1.00)", "fno/neuralop"]
    finally:
        import matplotlib.pyplot as plt

        plt.close(figure)


@pytest.mark.slow
def test_plot_is_written_whole_and_no_temporary_is_left(tmp_path):
    path = plot_bench(REPORT, Path(tmp_path) / "bench.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["bench.png"]
