"""Which scores give the sharpest calibrated bounds (issue 45 §2, "choose the scores by measured sharpness").

For each operator run (``--case NAME=RUN``), every sample of the run's test split is predicted once on the stored
grid (as ``opformer calibrate`` does) and, ``--splits`` times, shuffled into a calibration half and a test half.
Per-sample scores: the relative L2 error ``e`` plain, or over a difficulty ``d`` known without the truth (bound
``q(e / d) * d``): the input's roughness (what ``opformer.trust`` implements), and, measured only, the prediction's
roughness, the change of the prediction on a grid of half the points (one more model call) and under 1% input
noise (one more model call). Reported at coverage 0.9: the empirical coverage and the sharpness, the median over
test samples and splits of bound / true error, and the correlation of log e with log d. Pointwise scales (``rms``,
``local``): the share of test samples with at least 90% of their points in the band, the mean share of points in
it, and the median band half-width over the truth's root mean square. Then what ``opformer calibrate`` chooses for
the run on its validation split (:func:`opformer.trust.calibration.select`).

The runs of docs/trust.md (scratch data under /tmp/h2)::

    opformer generate darcy --samples 300 --resolution 33 --out /tmp/h2/darcy33.h5
    opformer generate burgers --samples 400 --resolution 256 --out /tmp/h2/burgers256.h5
    opformer train configs/darcy/fno2d_141.yaml --out /tmp/h2/runs/darcy --set data.path=/tmp/h2/darcy33.h5 \\
        --set data.resolution=33 --set data.n_train=160 --set data.n_val=20 --set data.n_test=120 \\
        --set train.epochs=15 --set model.width=16 --set model.modes=8
    opformer train configs/burgers/fno1d.yaml --out /tmp/h2/runs/burgers --set data.path=/tmp/h2/burgers256.h5 \\
        --set data.resolution=256 --set data.n_train=200 --set data.n_val=20 --set data.n_test=180 \\
        --set train.epochs=15 --set model.width=32
    python -m benchmarks.trust.scores --case darcy=/tmp/h2/runs/darcy --case burgers=/tmp/h2/runs/burgers

Writes benchmarks/results/trust/scores.json and .md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import argument_parser, describe_load, describe_machine, page, table_head, write_results

from opformer.data.pairs import load_split, split_options
from opformer.serve.forecaster import open_forecaster
from opformer.eval.metrics import relative_l2_per_sample
from opformer.grids import axis_kinds, restrict
from opformer.trust.calibration import Scores, score_split, select
from opformer.trust.conformal import conformal_quantile, expected_coverage
from opformer.trust.scores import POINT_LEVELS, SCALES, local_scale, point_level
from opformer.trust.shift import roughness

NAME = "scores"
COVERAGE = 0.9


def measure(name: str, run: str, splits: int) -> dict[str, Any]:
    """The per-sample and pointwise rows of one run (see the module's docstring)."""
    forecaster = open_forecaster(run, "cpu")
    cfg = forecaster.payload["run_config"]["data"]
    data = load_split(cfg["path"], "test", **split_options(cfg))
    x, truth = data.inputs, data.targets.double()
    pred = forecaster.predict(x).double()
    errors = relative_l2_per_sample(pred, truth)
    ndim, kinds = forecaster.ndim, axis_kinds(data.info.domain)
    coarse = restrict(pred, 1, 2, kinds)
    noise = 0.01 * x.std() * torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    difficulty = {
        "none (plain relative L2)": torch.ones_like(errors),
        "input roughness (implemented)": roughness(x, ndim),
        "prediction roughness": roughness(pred, ndim),
        "half-grid change (+1 call)": relative_l2_per_sample(
            forecaster.predict(restrict(x, 1, 2, kinds)).double(), coarse),
        "1% input noise change (+1 call)": relative_l2_per_sample(forecaster.predict(x + noise).double(), pred),
    }
    scores = Scores()
    scores.add(x, pred[:, None], truth[:, None], ndim)
    parts = scores.joined()
    generator, n = torch.Generator().manual_seed(0), len(errors)
    halves = [torch.randperm(n, generator=generator) for _ in range(splits)]
    sample_rows = []
    for label, d in difficulty.items():
        covered, ratios = [], []
        for order in halves:
            cal, test = order[:n // 2], order[n // 2:]
            bound = conformal_quantile(errors[cal] / d[cal], COVERAGE) * d[test]
            covered.append(float((errors[test] <= bound).double().mean()))
            ratios.append(bound / errors[test])
        correlation = 0.0 if label.startswith("none") else float(torch.corrcoef(torch.stack([errors.log(),
                                                                                              d.log()]))[0, 1])
        sample_rows.append({"score": label, "coverage": sum(covered) / len(covered),
                            "sharpness": float(torch.cat(ratios).median()), "log_correlation": correlation})
    level, band_rows = point_level(COVERAGE), []
    for scale in SCALES:
        covered, points, widths = [], [], []
        local = local_scale(pred, scale)  # per sample: once, indexed by each half
        for order in halves:
            cal, test = order[:n // 2], order[n // 2:]
            half = conformal_quantile(parts[scale][cal, 0, level], COVERAGE) * local[test]
            inside = ((pred[test] - truth[test]).abs() <= half).double().flatten(1).mean(dim=1)
            covered.append(float((inside >= POINT_LEVELS[level]).double().mean()))
            points.append(float(inside.mean()))
            widths.append(half.flatten(1).mean(dim=1) / truth[test].pow(2).flatten(1).mean(dim=1).sqrt())
        band_rows.append({"scale": scale, "coverage": sum(covered) / len(covered),
                          "point_coverage": sum(points) / len(points), "width": float(torch.cat(widths).median())})
    surrogate, payload = forecaster.surrogate, forecaster.payload
    held_out, _ = score_split(Path(run), surrogate, payload, None, "val", None, None, forecaster.batch_size, "cpu")
    return {"case": name, "run": run, "data": cfg["path"], "test_samples": n, "splits": splits,
            "expected_coverage": expected_coverage(n // 2, COVERAGE), "per_sample": sample_rows, "bands": band_rows,
            "chosen_on_validation": select(held_out[""])}


def markdown(result: dict[str, Any]) -> str:
    """The results as markdown tables."""
    lines = ["# Which scores give the sharpest bounds", "",
             f"{describe_machine(result['machine'])}; {describe_load(result)}.", "",
             f"`{result['command']}`", "",
             f"Coverage {COVERAGE}, random calibration/test halves of each run's test split. Sharpness: the median "
             "over test samples and splits of bound / true error (nearer 1 is sharper). Band: the share of test "
             "samples with at least 90% of their points inside, the mean share of points inside, the median "
             "half-width over the "
             "truth's root mean square.", "",
             *table_head("case", "per-sample score", "coverage", "sharpness", "corr(log e, log d)")]
    for case in result["cases"]:
        for row in case["per_sample"]:
            lines.append(f"| {case['case']} | {row['score']} | {row['coverage']:.3f} | {row['sharpness']:.2f} | "
                         f"{row['log_correlation']:.2f} |")
    lines += ["", *table_head("case", "band scale", "samples covered", "points covered", "half-width / rms")]
    for case in result["cases"]:
        for row in case["bands"]:
            lines.append(f"| {case['case']} | {row['scale']} | {row['coverage']:.3f} | {row['point_coverage']:.3f} | "
                         f"{row['width']:.3f} |")
    lines += ["", *table_head("case", "test samples", "chosen on validation", "validation sharpness",
                              "validation half-width")]
    for case in result["cases"]:
        chosen = case["chosen_on_validation"]
        sharp = ", ".join(f"{k} {v:.2f}" for k, v in chosen.get("median_bound_over_error", {}).items())
        width = ", ".join(f"{k} {v:.2e}" for k, v in chosen.get("mean_half_width", {}).items())
        lines.append(f"| {case['case']} | {case['test_samples']} | {chosen['score']}, {chosen['scale']} | {sharp} | "
                     f"{width} |")
    return page(lines)


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--case", action="append", required=True, help="NAME=RUN (an operator run)")
    parser.add_argument("--splits", type=int, default=50, help="random calibration/test halves")
    args = parser.parse_args()
    load = os.getloadavg()
    cases = [measure(*case.split("=", 1), args.splits) for case in args.case]
    write_results(args.results, NAME, {"cases": cases}, markdown, load, "numpy")


if __name__ == "__main__":
    main()
