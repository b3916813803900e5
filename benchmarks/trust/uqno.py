"""opformer's pointwise band beside neuraloperator's UQNO on the same Darcy data (issue 45 §5).

Both put a band ``prediction +- q * scale(a, x)`` around the same trained opformer surrogate and calibrate ``q`` by
the same split-conformal rule on the same calibration samples (each sample's score: the ``ceil(p m)``-th smallest of
its ``m`` pointwise ratios ``|error| / scale``; ``q``: the conformal quantile of the scores at coverage ``c``). They
differ in the scale:

- opformer: the prediction's local magnitude (``opformer.trust.scores.local_scale``, the default of ``opformer
  calibrate``): nothing to train, no extra model call;
- UQNO (Ma et al. 2024; ``neuralop.models.UQNO`` around the same surrogate): a second operator ``E(a, x)`` (a small
  neuralop FNO) trained with the pinball loss at level ``p`` on the pointwise errors ``|u - G(a)|`` of a separate
  set of samples (``--residual-train``, which opformer does not use), as the recipe's ``train_uqno_darcy.py``
  does; here calibrated by the rule above rather than the recipe's (alpha, delta) concentration indices, so that
  only the scale differs.

Reported over ``--splits`` random calibration/test halves of the remaining samples, at (p, c) = (0.9, 0.9) and
(0.95, 0.95): the coverage (the share of test samples with at least ``p`` of their points inside the band; target
``[c, c + 1/(n + 1)]``), the band width (mean half width over the points, over the truth's root mean square), and
the added cost (training; per prediction).

    python -m benchmarks.trust.uqno --run RUN --data HELD_OUT.h5 --residual-train 200 --epochs 30

Writes benchmarks/results/trust/uqno.json and .md.
"""

from __future__ import annotations

import math
import os
import time
from fractions import Fraction
from typing import Any

import numpy as np
import torch

from benchmarks.harness import (
    argument_parser, describe_load, describe_machine, page, table_head, table_row, write_results)

from opformer.data.store import read_arrays
from opformer.serve.forecaster import open_forecaster
from opformer.eval.metrics import relative_l2_per_sample
from opformer.trust.conformal import conformal_quantile
from opformer.trust.scores import local_scale

NAME = "uqno"
LEVELS = ((0.9, 0.9), (0.95, 0.95))


class ChannelFirst(torch.nn.Module):
    """The opformer surrogate (channel-last, physical units) as a neuralop base model (channel-first)."""

    def __init__(self, surrogate: torch.nn.Module) -> None:
        super().__init__()
        self.surrogate = surrogate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.surrogate(x.movedim(1, -1)).movedim(-1, 1)


class Normalized(torch.nn.Module):
    """A model of inputs standardised by a fixed mean and deviation (UQNO's residual model takes physical input)."""

    def __init__(self, model: torch.nn.Module, mean: float, std: float) -> None:
        super().__init__()
        self.model, self.mean, self.std = model, mean, std

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model((x - self.mean) / self.std)


def point_scores(error: torch.Tensor, scale: torch.Tensor, p: float) -> torch.Tensor:
    """Each sample's ``ceil(p m)``-th smallest ratio ``|error| / scale`` over its ``m`` points."""
    ratio = (error.abs() / scale.clamp_min(1e-30)).flatten(1).sort(dim=1).values
    return ratio[:, math.ceil(Fraction(str(p)) * ratio.shape[1]) - 1]


def pinball(pred: torch.Tensor, target: torch.Tensor, level: float) -> torch.Tensor:
    """The pinball (quantile) loss at ``level``."""
    diff = target - pred
    return torch.maximum(level * diff, (level - 1) * diff).mean()


def train_residual(x: torch.Tensor, error: torch.Tensor, level: float, epochs: int, seed: int = 0
                   ) -> tuple[torch.nn.Module, float, float]:
    """A small neuralop FNO ``a -> E(a, x)`` trained on ``|error|`` with the pinball loss; its seconds and scale."""
    from neuralop.models import FNO

    torch.manual_seed(seed)
    model = FNO(n_modes=(8, 8), in_channels=1, out_channels=1, hidden_channels=16, n_layers=4)
    scale = float(error.abs().std())
    mean, std = float(x.mean()), float(x.std())
    inputs = (x - mean) / std
    target = error.abs() / scale
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)
    began = time.perf_counter()
    for _ in range(epochs):
        order = torch.randperm(len(x))
        for start in range(0, len(x), 16):
            batch = order[start:start + 16]
            optimizer.zero_grad()
            pinball(model(inputs[batch]), target[batch], level).backward()
            optimizer.step()
        schedule.step()
    return Normalized(model, mean, std).eval(), time.perf_counter() - began, scale


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--run", required=True)
    parser.add_argument("--data", required=True, help="held-out Darcy file the run never saw")
    parser.add_argument("--residual-train", type=int, default=200, help="samples to train UQNO's residual model on")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--splits", type=int, default=10)
    args = parser.parse_args()
    load_before = os.getloadavg()
    torch.set_num_threads(1)
    from neuralop.models import UQNO

    forecaster = open_forecaster(args.run, "cpu")
    x, y = (torch.from_numpy(a) for a in read_arrays(args.data, slice(None)))
    pred = forecaster.predict(x)
    k = args.residual_train
    began = time.perf_counter()
    forecaster.predict(x[k:])
    base_seconds = time.perf_counter() - began
    error = (pred - y).double()
    channel_first = lambda t: t.movedim(-1, 1)  # noqa: E731
    results: dict[str, Any] = {"run": args.run, "data": args.data, "samples": len(x), "residual_train": k,
                               "epochs": args.epochs, "splits": args.splits, "levels": {}}
    for p, c in LEVELS:
        residual, train_seconds, target_scale = train_residual(channel_first(x[:k]), channel_first(error[:k]).float(),
                                                               p, args.epochs)
        uqno = UQNO(base_model=ChannelFirst(forecaster.surrogate), residual_model=residual).eval()
        rest = channel_first(x[k:])
        with torch.no_grad():
            began = time.perf_counter()
            solution, quantile = uqno(rest)
            uqno_seconds = time.perf_counter() - began
        assert torch.allclose(solution.movedim(1, -1), pred[k:], atol=1e-5)  # the same surrogate inside UQNO
        began = time.perf_counter()
        local = local_scale(pred[k:], "local")
        local_seconds = time.perf_counter() - began
        scales = {"opformer local": local, "UQNO E(a, x)": quantile.movedim(1, -1).double().abs() * target_scale}
        truth_rms = y[k:].double().flatten(1).pow(2).mean(dim=1).sqrt()
        rng = np.random.default_rng(0)
        n = len(x) - k
        rows: dict[str, dict[str, list[float]]] = {name: {"coverage": [], "width": []} for name in scales}
        for _ in range(args.splits):
            order = torch.from_numpy(rng.permutation(n))
            cal, test = order[: n // 2], order[n // 2:]
            for name, scale in scales.items():
                q = conformal_quantile(point_scores(error[k:][cal], scale[cal], p)[:, None], c)[0]
                inside = (error[k:][test].abs() <= q * scale[test]).double().flatten(1).mean(dim=1)
                rows[name]["coverage"].append(float((inside >= p).double().mean()))
                rows[name]["width"].append(float(((q * scale[test]).flatten(1).mean(dim=1) / truth_rms[test]).mean()))
        results["levels"][f"{p}/{c}"] = {
            "n_cal": n // 2, "n_test": n - n // 2, "target": [c, c + 1 / (n // 2 + 1)],
            "methods": {name: {"coverage_mean": float(np.mean(r["coverage"])),
                               "coverage_std": float(np.std(r["coverage"])),
                               "width_mean": float(np.mean(r["width"])), "width_std": float(np.std(r["width"]))}
                        for name, r in rows.items()},
            "uqno_train_seconds": train_seconds, "uqno_predict_seconds": uqno_seconds,
            "opformer_scale_seconds": local_seconds}
    results["base_predict_seconds"] = base_seconds
    errors = relative_l2_per_sample(pred.double(), y.double())
    results["base_relative_l2_median"] = float(errors.median())
    write_results(args.results, NAME, results, markdown, load_before, "numpy", "neuraloperator")


def markdown(result: dict[str, Any]) -> str:
    """The side-by-side table."""
    lines = ["# opformer's pointwise band beside neuraloperator's UQNO (Darcy)", "",
             f"{describe_machine(result['machine'])}; {describe_load(result)}.", "",
             f"Run {result['run']} (median test relative L2 {result['base_relative_l2_median']:.4f}) on "
             f"{result['data']}: {result['residual_train']} samples train UQNO's residual model ({result['epochs']} "
             f"epochs); the other {result['samples'] - result['residual_train']} are split at random into calibration "
             f"and test halves ({result['splits']} splits). Band width: mean half width over the truth's root mean "
             "square. Coverage: "
             "the share of test samples with at least p of their points inside the band.", "",
             f"`{result['command']}`", "",
             *table_head("p / c", "method", "coverage (mean +- std)", "target", "band width (mean +- std)",
                         "added training", "added per prediction of all test inputs")]
    for level, row in result["levels"].items():
        for name, m in row["methods"].items():
            uqno = name.startswith("UQNO")
            train = f"{row['uqno_train_seconds']:.1f} s" if uqno else "none (calibration only)"
            extra = (f"{row['uqno_predict_seconds'] - result['base_predict_seconds']:.3f} s (a second operator; "
                     f"both calls {row['uqno_predict_seconds']:.3f} s, base alone "
                     f"{result['base_predict_seconds']:.3f} s)"
                     if uqno else f"{row['opformer_scale_seconds']:.4f} s (a box mean of the prediction)")
            lines.append(table_row(level, name, f"{m['coverage_mean']:.3f} +- {m['coverage_std']:.3f}",
                                   f"[{row['target'][0]:.2f}, {row['target'][1]:.3f}]",
                                   f"{m['width_mean']:.4f} +- {m['width_std']:.4f}", train, extra))
    return page(lines)


if __name__ == "__main__":
    main()
