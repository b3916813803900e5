"""The singular value spectrum of trained attention matrices (Li et al. 2023, Figure 5).

The paper's claim: softmax-free attention over the full grid is low-rank, less than 5% of the singular values of
its kernel ``A = Q K^T`` holding 90% of the energy (at 128^2, spectra from 100 samples), which hints that it can be
factorised; FactFormer's axial kernels ``A^(1)``, ``A^(2)`` are shown beside it.

This script rolls out the test trajectories of finished FactFormer runs (factorised attention, or the full-grid
linear attention of ``attention: linear``) as the tables do, and takes every attention matrix of every model call:
the axial kernels ``(batch, head, S_m, S_m)`` of each layer and axis, and the full kernel
``rope(Q) rope(K)^T / N`` of the linear attention, whose singular values are exact from the QR factors of ``Q`` and
``K`` (its rank is at most the head width; the paper truncated an SVD at 1024 components). For each matrix the
normalized cumulative energy ``b_k = sum_{i <= k} sigma_i / sum_i sigma_i``, averaged over heads and calls per
layer and axis; the table gives the fraction of singular values that hold 90% of the energy (the paper's vertical
line). Rows are kept by run folder name. Run from the repository root::

    .venv/bin/python -m benchmarks.papers.factformer.attention_spectrum --data data/kolmogorov.h5 \\
        --runs runs/factformer-benchmark/kolmogorov_factformer_lm

Writes benchmarks/results/papers/factformer/attention_spectrum.{json,md,png}.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from benchmarks.harness import argument_parser, command, kept_rows, page, table_head, table_row, write_results
from benchmarks.papers.curves import planned_epochs, read_metrics, summary

#: the paper's figure: the fraction of singular values that hold 90% of the energy of full-grid linear attention
PAPER_FULL_FRACTION = 0.05
ENERGY = 0.9
AXES = "xyz"


def energy_curves(sigma: Tensor) -> Tensor:
    """The normalized cumulative energy ``b_k`` of singular values ``sigma`` ``(..., n)`` in descending order."""
    return sigma.cumsum(dim=-1) / sigma.sum(dim=-1, keepdim=True)


def energy_fraction(curve: Tensor, energy: float = ENERGY) -> float:
    """The fraction of the ``n`` singular values that holds ``energy`` of the total, of a curve ``b_k`` ``(n,)``."""
    return (int((curve < energy).sum()) + 1) / curve.numel()


def kernel_singular_values(q: Tensor, k: Tensor) -> Tensor:
    """The ``N`` singular values of ``q k^T`` for ``q``, ``k`` ``(..., N, D)``, descending: from the ``D x D``
    triangular factors of their QR decompositions when ``D < N`` (the other ``N - D`` are zero)."""
    n, d = q.shape[-2:]
    if d >= n:
        return torch.linalg.svdvals(q @ k.transpose(-2, -1))
    r_q, r_k = torch.linalg.qr(q, mode="r").R, torch.linalg.qr(k, mode="r").R
    sigma = torch.linalg.svdvals(r_q @ r_k.transpose(-2, -1))
    return torch.cat([sigma, sigma.new_zeros(*sigma.shape[:-1], n - d)], dim=-1)


class SpectrumRecorder:
    """Forward pre-hooks on every attention layer of a FactFormer that sum the energy curves of the attention
    matrices each call forms, by (layer, axis); ``axis`` "all" for the full-grid linear attention."""

    def __init__(self, model: nn.Module) -> None:
        from opformer.nn.factorized_attention import FactorizedAttention
        from opformer.nn.oformer_attention import OFormerAttention

        layers = [m for m in model.modules() if isinstance(m, (FactorizedAttention, OFormerAttention))]
        if not layers:
            raise SystemExit(f"{type(model).__name__}: no factorised or full-grid linear attention; expected a "
                             "FactFormer run")
        self.factorized = FactorizedAttention
        self.sums: dict[tuple[int, str], Tensor] = {}
        self.counts: dict[tuple[int, str], int] = {}
        self.handles = [layer.register_forward_pre_hook(partial(self.record, index))
                        for index, layer in enumerate(layers)]

    def record(self, index: int, module: nn.Module, args: tuple[Tensor, list[Tensor]]) -> None:
        """Add the energy curves of the matrices ``module`` (layer ``index``) forms of its input ``args``."""
        u, axes = args
        with torch.no_grad():
            if isinstance(module, self.factorized):
                sigmas = {AXES[m]: torch.linalg.svdvals(kernel.double())
                          for m, kernel in enumerate(module.axis_kernels(u, axes))}
            else:
                q, k, _ = module.factors(u, axes)
                sigmas = {"all": kernel_singular_values(q.double(), k.double()) / q.shape[-2]}
        for axis, sigma in sigmas.items():
            curves = energy_curves(sigma).flatten(0, -2)
            key = (index, axis)
            self.sums[key] = self.sums.get(key, 0) + curves.sum(dim=0)
            self.counts[key] = self.counts.get(key, 0) + curves.shape[0]

    def rows(self) -> list[dict[str, Any]]:
        """Per layer and axis: the matrix size, the number of matrices, the mean curve and its 90% fraction."""
        out = []
        for (layer, axis), total in sorted(self.sums.items()):
            curve = total / self.counts[(layer, axis)]
            out.append({"layer": layer, "axis": axis, "size": curve.numel(), "matrices": self.counts[(layer, axis)],
                        "fraction_90": energy_fraction(curve), "curve": [float(b) for b in curve]})
        return out

    def close(self) -> None:
        """Remove the hooks."""
        for handle in self.handles:
            handle.remove()


def measure(run_dir: str, data: str) -> dict[str, Any]:
    """One run's row: its rollout on the test split with the spectra of every attention matrix it formed."""
    from opformer.eval.evaluate import run_rollout, single_file_run

    run = single_file_run(run_dir)
    recorder = SpectrumRecorder(run.surrogate)
    try:
        metrics, split, _, _ = run_rollout(run, data)
    finally:
        recorder.close()
    attention = run.run_config["model"].get("attention", "factorized")
    history = summary(Path(run_dir).name, read_metrics(Path(run_dir)), planned_epochs(Path(run_dir)))
    return {"name": Path(run_dir).name, "run": run_dir, "data": data, "attention": attention,
            "grid": list(split.resolution), "trajectories": len(split), "frames": metrics["frames"],
            "relative_l2": metrics["relative_l2"], "converged": history["converged"],
            "best_epoch": history["best_epoch"], "epochs": history["epochs"], "seed": run.run_config["seed"],
            "layers": recorder.rows(), "command": command()}


def markdown(result: dict[str, Any]) -> str:
    """The 90% fractions of every run, layer and axis."""
    lines = ["# Spectrum of trained attention matrices (Li et al. 2023, Figure 5)", "",
             f"The paper: full-grid linear attention is low-rank, under {PAPER_FULL_FRACTION:.0%} of the singular "
             "values of its kernel holding 90% of the energy (128^2); FactFormer's axial kernels beside it.", "",
             *table_head("run", "attention", "grid", "seed", "converged", "layer", "axis", "matrix size",
                         "matrices", "fraction of singular values for 90% energy")]
    for run in result["runs"]:
        grid = "x".join(map(str, run["grid"]))
        state = f"{'yes' if run['converged'] else 'no'} (best epoch {run['best_epoch']} of {run['epochs']})"
        for row in run["layers"]:
            lines.append(table_row(run["name"], run["attention"], grid, run["seed"], state, row["layer"],
                                   row["axis"], row["size"], row["matrices"], f"{row['fraction_90']:.3f}"))
    note = ("Each matrix's curve is averaged over heads and over every model call of the test rollouts; the "
            "fraction is read from the mean curve. Commands: "
            + ", ".join(f"`{c}`" for c in dict.fromkeys(run["command"] for run in result["runs"])))
    return page(lines, note)


def plot(result: dict[str, Any], path: Path) -> None:
    """One panel per run and axis: the mean energy curve of each layer against the fraction of singular values."""
    from opformer.eval.plots import _pyplot, _save

    plt = _pyplot()
    panels = [(run, axis) for run in result["runs"] for axis in dict.fromkeys(r["axis"] for r in run["layers"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4), squeeze=False, layout="constrained")
    for ax, (run, axis) in zip(axes[0], panels):
        for row in (r for r in run["layers"] if r["axis"] == axis):
            n = row["size"]
            ax.plot([(i + 1) / n for i in range(n)], row["curve"], lw=1.2, label=f"layer {row['layer']}")
            ax.axvline(row["fraction_90"], color=ax.lines[-1].get_color(), lw=0.7, ls=":")
        ax.axhline(ENERGY, color="0.6", lw=0.7)
        ax.set_title(f"{run['name']}: {'full kernel' if axis == 'all' else f'axis {axis}'}", fontsize=9)
        ax.set_xlabel("fraction of singular values")
        ax.set_ylabel("cumulative energy")
        ax.legend(fontsize=7)
    _save(fig, path)


def main() -> None:
    parser = argument_parser(__doc__, runs="FactFormer")
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = {Path(run).name: measure(run, args.data) for run in args.runs}
    result = {"paper_full_fraction_90": PAPER_FULL_FRACTION,
              "runs": kept_rows(args.results, "attention_spectrum", rows)}
    write_results(args.results, "attention_spectrum", result, markdown, load_before)
    plot(result, Path(args.results) / "attention_spectrum.png")


if __name__ == "__main__":
    main()
