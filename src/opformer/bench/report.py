"""Outputs of ``opformer bench``: the markdown table (with the solver comparison) and the log-log plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opformer.io import atomic_replace

GIB = 1024**3


def _cell_columns(cell: dict[str, Any]) -> list[str]:
    """Markdown columns of one cell after model, implementation and resolution."""
    if cell["status"] != "ok":
        return [cell["status"]] + [""] * 8
    ratio, floor, products = cell.get("ratio_to_peer"), cell.get("floor_ratio_to_peer"), cell.get("product_seconds")
    return [
        f"{cell['seconds_median']:.4g} [{cell['seconds_q1']:.4g}, {cell['seconds_q3']:.4g}]",
        "" if products is None else f"{products:.4g}",
        f"{cell['samples_per_second']:.4g}",
        f"{cell['peak_memory_bytes'] / GIB:.3g}",
        f"{cell['peak_tensor_bytes'] / GIB:.3g}" if "peak_tensor_bytes" in cell else "",
        f"{cell['flops_per_step'] / 1e9:.4g}",
        f"{100 * cell['peak_fraction']:.1f}%",
        f"{cell['parameters']:,}",
        "" if ratio is None else f"{ratio:.2f}" + _ratio_range(cell) + ("" if floor is None else f" [{floor:.2f}]"),
    ]


def _ratio_range(cell: dict[str, Any]) -> str:
    """`` (lowest-highest)`` of the per-round time ratios of a cell measured in several rounds, else nothing."""
    ratios = cell.get("ratio_rounds") or []
    return f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""


def _cell_table(report: dict[str, Any], command: str) -> list[str]:
    """The lines of the measured cells: machine, table, slopes."""
    settings, machine = report["settings"], report["machine"]
    memory_kind = next((c["memory_kind"] for c in report["cells"] if c["status"] == "ok"), "peak RSS")
    lines = [
        f"# opformer bench: {settings['mode']} steps, batch {settings['batch']}",
        "",
        f"torch {machine['torch']}, {machine['processor']}, {machine['threads']} thread(s) on "
        f"{machine['device']}; measured float32 matmul peak {machine['matmul_peak_flops'] / 1e9:.1f} GFLOP/s. "
        f"Median of {settings['repeats']} steps after {settings['warmup']} warm-up steps [quartiles]; memory is "
        f"the {memory_kind} of a fresh process per cell, tensors the most tensor memory alive at once "
        "(opformer.bench.memory); FLOPs counted by torch.utils.flop_counter "
        "(matrix products; FFTs and element-wise operations not counted); products: the step's seconds in "
        "matrix-product kernels (their share of a profiled step, torch.profiler, CPU only, times the median), and "
        "in brackets after the time ratio the ratio that would remain with all other work gone.",
    ]
    rounds = settings.get("rounds", 1)  # reports written before rounds existed lack it
    if rounds > 1:
        lines[-1] += (f" Every cell was measured in {rounds} rounds (fresh processes; an opformer cell and its peer's "
                      "back to back, in alternating order): times are the medians over the rounds, [q1, q3] the "
                      "quartiles of the rounds' medians, and the time ratio the median of the per-round ratios "
                      "(their range in parentheses).")
    if "loadavg_before" in machine:  # reports written before the load was recorded lack it
        lines[-1] += (" Load average (1, 5, 15 min) before " + ", ".join(f"{v:.2f}" for v in machine["loadavg_before"])
                      + "; after " + ", ".join(f"{v:.2f}" for v in machine["loadavg_after"]) + ".")
    if command:
        lines += ["", f"Command: `{command}`"]
    lines += [
        "",
        "| model | implementation | n | s/step [q1, q3] | products s/step | samples/s | memory (GiB) | tensors (GiB) "
        "| GFLOP/step | % of peak | parameters | opformer/peer time [products only] |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in report["cells"]:
        row = [cell["model"], cell["implementation"], str(cell["resolution"])] + _cell_columns(cell)
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Fitted log-log slopes versus n (time, memory):", ""]
    for name, slope in report["slopes"].items():
        text = ", ".join("n/a" if slope[k] is None else f"{slope[k]:.2f}" for k in ("time", "memory"))
        lines.append(f"- {name}: {text}")
    return lines


def to_markdown(report: dict[str, Any], command: str = "") -> str:
    """The report as a markdown table (one row per cell), with the machine, peak and fitted slopes."""
    if report["cells"]:
        lines = _cell_table(report, command)
    else:  # the solver comparison alone (`--solver` without `--models`)
        lines = ["# opformer bench"] + (["", f"Command: `{command}`"] if command else [])
    solver = report.get("solver")
    if solver:
        lines += ["", "Built-in solver versus surrogate inference, seconds per sample:", "",
                  *comparison_table([solver])]
    return "\n".join(lines) + "\n"


def comparison_table(comparisons: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of one table of :func:`opformer.bench.solver_timing.solver_comparison` results (several PDEs,
    one row per surrogate and grid): seconds per sample, processor seconds in brackets."""
    lines = ["| PDE | solver output | solver s/sample [CPU] | surrogate | grid | batch | calls | surrogate s/sample "
             "[CPU] | surrogate GFLOP/sample | solver / surrogate [CPU] |", "|---|---|---|---|---|---|---|---|---|---|"]
    for comparison in comparisons:
        for row in comparison["rows"]:
            ok = row["status"] == "ok"
            cells = [comparison["solver"], comparison["output"],
                     f"{row['solver_seconds_per_sample']:.3g} [{row['solver_cpu_seconds_per_sample']:.3g}]",
                     row["surrogate"], str(row["resolution"]), str(row["batch"]) if ok else row["status"],
                     str(row["calls"]) if ok else "",
                     f"{row['seconds_per_sample']:.3g} [{row['cpu_seconds_per_sample']:.3g}]" if ok else "n/a",
                     f"{row['flops_per_sample'] / 1e9:.3g}" if ok else "n/a",
                     f"{row['speedup']:.3g}x [{row['cpu_speedup']:.3g}x]" if ok else "n/a"]
            lines.append("| " + " | ".join(cells) + " |")
    return lines

def _bench_figure(report: dict[str, Any]):
    """The figure of :func:`plot_bench` (time and memory panels, x ticked at the measured resolutions)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (ax_time, ax_memory) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    measured = set()
    for name, slope in report["slopes"].items():
        model, implementation = name.split("/")
        cells = [c for c in report["cells"] if c["model"] == model and c["implementation"] == implementation
                 and c["status"] == "ok"]
        if not cells:
            continue
        n = [c["resolution"] for c in cells]
        measured.update(n)
        style = "-o" if implementation == "opformer" else "--s"
        for ax, key, scale, kind in ((ax_time, "seconds_median", 1.0, "time"),
                                     (ax_memory, "peak_memory_bytes", 1 / GIB, "memory")):
            label = name if slope[kind] is None else f"{name} (slope {slope[kind]:.2f})"
            ax.loglog(n, [c[key] * scale for c in cells], style, label=label)
    ax_time.set(xlabel="resolution n", ylabel="seconds per step", title="time")
    ax_memory.set(xlabel="resolution n", ylabel="peak memory (GiB)", title="memory")
    ticks = sorted(measured)
    for ax in (ax_time, ax_memory):
        ax.set_xticks(ticks, [str(n) for n in ticks])
        ax.set_xticks([], minor=True)
        ax.grid(True, which="both", alpha=0.3)
        if ticks:
            ax.legend(fontsize=7)
    return figure


def plot_bench(report: dict[str, Any], path: Path) -> Path:
    """Log-log plot of seconds per step and peak memory versus resolution, fitted slopes in the legend.

    The resolution axes are ticked at the measured resolutions.
    """
    figure = _bench_figure(report)
    import matplotlib.pyplot as plt

    try:
        with atomic_replace(path) as tmp:
            figure.savefig(tmp, format=path.suffix.lstrip(".") or "png", dpi=120)
    finally:
        plt.close(figure)
    return path
