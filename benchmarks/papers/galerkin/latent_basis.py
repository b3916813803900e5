"""The latent basis of the encoder layers (Cao 2021, appendix Figure 13).

The paper reshapes each encoder layer's output tokens of a 2D Galerkin Transformer (Darcy, Examples 5.2 and 5.3)
to the ``n_c x n_c`` grid: every latent channel is then a function on the grid, a basis function of the layer's
approximation subspace. Its claim: "visually all basis functions in the fourth layers are smoother than those in
the first". This script measures that claim instead of looking at it. It applies a finished run to its first test
sample (with the run's evaluation noise), takes every encoder layer's output, and gives each channel ``phi`` its
normalised Dirichlet energy on the grid (forward differences, grid spacing 1)::

    R(phi) = sum |D phi|^2 / sum (phi - mean phi)^2

0 for a constant function up to 8 for the grid's highest mode: lower is smoother. Per layer it records the median
and quartiles over the channels. It draws the two channels of largest variance of each layer. Run from the
repository root::

    .venv/bin/python -m benchmarks.papers.galerkin.latent_basis --data data/darcy_421.h5 --runs RUN

Writes benchmarks/results/papers/galerkin/latent_basis.{json,md} and latent_basis_RUN.png.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import argument_parser, kept_rows, page, table_head, table_row, write_results
from benchmarks.papers.curves import planned_epochs, read_metrics, summary, verdict

#: the layer the paper compares with the first (its Figure 13 (c)-(d))
PAPER_LAYER = 4


def dirichlet_energy(fields: torch.Tensor) -> torch.Tensor:
    """``R`` of each channel of ``fields`` ``(n, n, channels)``: the squared forward differences along both axes
    over the squared deviation from the channel's mean (0 for a constant channel)."""
    fields = fields.double()
    gradient = fields.diff(dim=0).square().sum((0, 1)) + fields.diff(dim=1).square().sum((0, 1))
    spread = (fields - fields.mean((0, 1))).square().sum((0, 1))
    return torch.where(spread > 0, gradient / spread.clamp_min(torch.finfo(spread.dtype).tiny), 0.0)


def layer_outputs(run_dir: str, data: str) -> tuple[list[torch.Tensor], dict[str, Any]]:
    """Each encoder layer's output on the run's first test sample, ``(n_c, n_c, d_model)``, and the run's facts."""
    from opformer.errors import ConfigError
    from opformer.eval.evaluate import first_test_samples, single_file_run
    from opformer.models.inference import predict
    from opformer.models.galerkin_transformer_2d import GalerkinTransformer2d

    run = single_file_run(run_dir)
    model = run.surrogate.model
    if not isinstance(model, GalerkinTransformer2d):
        raise ConfigError(f"{run_dir}: a {type(model).__name__}; the latent basis is the 2D Galerkin "
                          "Transformer's (Figure 13)")
    split, noise = first_test_samples(run, data, 1)
    outputs: list[torch.Tensor] = []
    n_c = model.coarse_size
    hooks = [layer.register_forward_hook(lambda _m, _i, out: outputs.append(out[0].reshape(n_c, n_c, -1)))
             for layer in model.encoder]
    try:
        predict(run.surrogate, split.inputs, 1, torch.device("cpu"), noise=noise)
    finally:
        for hook in hooks:
            hook.remove()
    return [out.detach() for out in outputs], {"coarse": n_c, "input_noise": run.config.data.input_noise}


def measure(run_dir: str, data: str, results: Path) -> dict[str, Any]:
    """One run's per-layer energies, its drawing ``latent_basis_RUN.png`` in ``results`` and its curve."""
    outputs, facts = layer_outputs(run_dir, data)
    name = Path(run_dir).name
    layers = []
    for index, out in enumerate(outputs, start=1):
        energy = sorted(dirichlet_energy(out).tolist())
        quartiles = statistics.quantiles(energy, n=4)
        layers.append({"layer": index, "channels": len(energy), "median": statistics.median(energy),
                       "q1": quartiles[0], "q3": quartiles[2]})
    image = f"latent_basis_{name}.png"
    results.mkdir(parents=True, exist_ok=True)
    plot(outputs, results / image, name)
    curve = summary(name, read_metrics(Path(run_dir)), planned_epochs(Path(run_dir)))
    return {"name": name, "run": run_dir, **facts, "layers": layers, "best_epoch": curve["best_epoch"],
            "curve": verdict(curve), "image": image}


def plot(outputs: list[torch.Tensor], path: Path, name: str) -> None:
    """A column per layer: its two channels of largest variance on the coarse grid."""
    from opformer.eval.plots import _pyplot, _save

    plt = _pyplot()
    fig, axes = plt.subplots(2, len(outputs), figsize=(2.2 * len(outputs), 4.4), squeeze=False, layout="constrained")
    for column, out in enumerate(outputs):
        energy = dirichlet_energy(out)
        for row, channel in enumerate(out.double().var((0, 1)).argsort(descending=True)[:2].tolist()):
            ax = axes[row, column]
            ax.imshow(out[..., channel].T.numpy(), origin="lower", cmap="RdBu_r")
            ax.set_title(f"layer {column + 1}, ch. {channel}\nR = {energy[channel]:.3f}", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
    _save(fig, path, f"{name}: latent channels of each encoder layer (R: Dirichlet energy, lower is smoother)")


def markdown(result: dict[str, Any]) -> str:
    """A row per run and layer: the median and quartiles of R over its channels."""
    lines = ["# The latent basis of the encoder layers (Cao 2021, Figure 13)", "",
             "Each encoder layer's output on the run's first test sample, reshaped to the n_c x n_c grid; each "
             "channel's normalised Dirichlet energy R = sum |D phi|^2 / sum (phi - mean phi)^2 (0: constant; "
             "lower: smoother). The paper's claim: the fourth layer's basis functions are smoother than the "
             "first's. The curve column is the run's learning-curve verdict (`benchmarks/papers/curves.py`).", "",
             *table_head("run", "n_c", "input noise", "layer", "channels", "median R", "quartiles", "best epoch",
                         "curve", "image")]
    for run in result["runs"]:
        for layer in run["layers"]:
            lines.append(table_row(run["name"], run["coarse"], f"{run['input_noise']:g}", layer["layer"],
                                   layer["channels"], f"{layer['median']:.4f}",
                                   f"{layer['q1']:.4f} - {layer['q3']:.4f}", run["best_epoch"], run["curve"],
                                   f"`{run['image']}`"))
    claims = [f"{run['name']}: layer {PAPER_LAYER} {'smoother' if smoother(run) else 'not smoother'} than layer 1"
              for run in result["runs"] if len(run["layers"]) >= PAPER_LAYER]
    return page(lines, "; ".join(claims) + "." if claims else None)


def smoother(run: dict[str, Any]) -> bool:
    """Whether the run's layer :data:`PAPER_LAYER` has a lower median R than its first."""
    return run["layers"][PAPER_LAYER - 1]["median"] < run["layers"][0]["median"]


def main() -> None:
    parser = argument_parser(__doc__, runs="2D Galerkin Transformer")
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = {Path(run).name: measure(run, args.data, Path(args.results)) for run in args.runs}
    write_results(args.results, "latent_basis", {"runs": kept_rows(args.results, "latent_basis", rows)}, markdown,
                  load_before)


if __name__ == "__main__":
    main()
