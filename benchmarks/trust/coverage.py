"""Coverage, sharpness and shift of opformer's calibrated bounds (issue 45 §5), over random calibration/test splits.

For each case (a trained run and a held-out file it never saw), every held-out sample is predicted once (operator
runs) or rolled out from its first ``t_in`` frames (trajectory runs, per frame), and scored as ``opformer calibrate``
scores (``opformer.trust.calibration.Scores``: the relative L2 error, also over the input's roughness; the pointwise
scores at each scale). Then, ``--splits`` times, the samples are shuffled into a calibration half and a test half:
the split-conformal bound of the calibration half (``conformal_quantile``) at 0.8, 0.9 and 0.95 is checked on the
test half. Reported per case,
score and coverage: the empirical coverage (mean, standard deviation and range over the splits; trajectories: the
mean over frames, and the worst frame's mean), the target ``[c, c + 1/(n + 1)]``, the sharpness (the median over
test samples and splits of bound / true error: 1 is a bound that is exactly the error) and the share of test
samples flagged as unlike the calibration half. ``--shift RUN:CAL:TEST`` calibrates on all of CAL and tests on all
of TEST (Navier-Stokes nu = 1e-3 -> 1e-4): the coverage there, with and without the flagged samples.

Run from the repository root (cases as NAME=RUN:HELD_OUT_FILE; data and runs as in benchmarks/trust/README.md)::

    python -m benchmarks.trust.coverage --case burgers=RUN:FILE --case darcy=RUN:FILE ... --splits 10

Writes benchmarks/results/trust/coverage.json and .md.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from benchmarks.harness import (
    argument_parser, command, describe_load, describe_machine, earlier, joined_loads, page, table_head,
    write_results)

from opformer.data.store import read_arrays, read_fields, read_info
from opformer.serve.forecaster import open_forecaster
from opformer.trust.calibration import Scores
from opformer.trust.conformal import conformal_quantile, expected_coverage
from opformer.trust.scores import SCALES, point_level
from opformer.trust.shift import flag_shifted

NAME = "coverage"
COVERAGES = (0.8, 0.9, 0.95)


def scored(run: str, path: str, frames: int | None, batch: int = 50) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Every sample of ``path`` predicted by ``run`` and scored: ``relative_l2`` (n, F), each scale's pointwise
    scores (n, F, levels), the input statistics (n, s); and what was done (kind, frames, seconds)."""
    forecaster = open_forecaster(run, "cpu")
    info = read_info(path)
    scores, began = Scores(), time.perf_counter()
    n_frames = 1
    for start in range(0, info.n_samples, batch):
        stop = min(info.n_samples, start + batch)
        if forecaster.kind == "trajectory":
            fields = torch.from_numpy(read_fields(path, slice(start, stop)))
            t_in = forecaster.t_in
            n_frames = frames or fields.shape[1] - t_in
            given, truth = fields[:, :t_in], fields[:, t_in:t_in + n_frames]
            pred = forecaster.rollout(given, n_frames)
        else:
            x, y = (torch.from_numpy(a) for a in read_arrays(path, slice(start, stop)))
            given, truth = x, y.unsqueeze(1)
            pred = forecaster.predict(x).unsqueeze(1)
        scores.add(given, pred, truth, info.ndim)
    parts = scores.joined()
    return parts, {"run": run, "data": path, "kind": forecaster.kind, "samples": info.n_samples, "frames": n_frames,
                   "predict_seconds": time.perf_counter() - began}


def covered(cal: torch.Tensor, test: torch.Tensor, c: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per frame: the share of ``test`` scores ``(m, F)`` at most the conformal quantile of ``cal`` ``(n, F)``, and
    the median of quantile / test score."""
    q = conformal_quantile(cal, c)
    ratio = q / test.clamp_min(torch.finfo(torch.float64).tiny)
    return (test <= q).double().mean(dim=0), ratio.median(dim=0).values


def splits(parts: dict[str, torch.Tensor], count: int, seed: int = 0) -> dict[str, Any]:
    """Coverage and sharpness over ``count`` random half/half calibration/test splits."""
    n = len(parts["relative_l2"])
    n_cal = n // 2
    rng = np.random.default_rng(seed)
    results: dict[str, Any] = {"n_cal": n_cal, "n_test": n - n_cal, "scores": {}}
    # relative_l2/roughness: the bound q * d(x) of the normalized score e / d(x), d the input's roughness (the bound
    # holds iff e / d <= q, and bound / error = q / (e / d))
    named = {"relative_l2": lambda c: parts["relative_l2"],
             "relative_l2/roughness": lambda c: parts["relative_l2"] / parts["difficulty"][:, None]}
    named.update({f"pointwise_{s}": (lambda c, s=s: parts[s][..., point_level(c)]) for s in SCALES})
    flagged = []
    for _ in range(count):
        order = torch.from_numpy(rng.permutation(n))
        cal, test = order[:n_cal], order[n_cal:]
        flagged.append(float(flag_shifted(parts["statistics"][test], parts["statistics"][cal]).double().mean()))
        for name, values in named.items():
            entry = results["scores"].setdefault(name, {})
            for c in COVERAGES:
                v = values(c)
                cover, sharp = covered(v[cal], v[test], c)
                row = entry.setdefault(str(c), {"coverage": [], "sharpness": []})
                row["coverage"].append(cover.tolist())
                row["sharpness"].append(sharp.tolist())
    for entry in results["scores"].values():
        for c, row in entry.items():
            cover = np.asarray(row.pop("coverage"))  # (splits, frames)
            sharp = np.asarray(row.pop("sharpness"))
            per_split = cover.mean(axis=1)
            row.update(mean=float(per_split.mean()), std=float(per_split.std()), min=float(per_split.min()),
                       max=float(per_split.max()), worst_frame=float(cover.mean(axis=0).min()),
                       per_frame=cover.mean(axis=0).tolist(), sharpness=float(np.median(sharp)),
                       target=[float(c), float(c) + 1 / (n_cal + 1)],
                       expected=expected_coverage(n_cal, float(c)))
    results["flagged_share"] = float(np.mean(flagged))
    return results


def shift(run: str, cal_path: str, test_path: str, frames: int | None) -> dict[str, Any]:
    """Calibrated on all of ``cal_path``, tested on all of ``test_path``: coverage per frame, flagged share, the
    coverage of the unflagged samples."""
    cal, cal_meta = scored(run, cal_path, frames)
    test, test_meta = scored(run, test_path, frames)
    flags = flag_shifted(test["statistics"], cal["statistics"])
    out: dict[str, Any] = {"calibration": cal_meta, "test": test_meta, "flagged_share": float(flags.double().mean()),
                           "coverage": {}}
    normalized = {part: p["relative_l2"] / p["difficulty"][:, None] for part, p in (("cal", cal), ("test", test))}
    for c in COVERAGES:
        q = conformal_quantile(cal["relative_l2"], c)
        inside = (test["relative_l2"] <= q).double()
        inside_normalized = (normalized["test"] <= conformal_quantile(normalized["cal"], c)).double()
        out["coverage"][str(c)] = {
            "roughness_mean": float(inside_normalized.mean()),
            "bound": q.tolist(), "per_frame": inside.mean(dim=0).tolist(), "mean": float(inside.mean()),
            "unflagged": float(inside[~flags].mean()) if (~flags).any() else None,
            "median_error_over_bound": float((test["relative_l2"] / q).median())}
    out["calibration_median_error"] = cal["relative_l2"].median(dim=0).values.tolist()
    out["test_median_error"] = test["relative_l2"].median(dim=0).values.tolist()
    return out


def markdown(result: dict[str, Any]) -> str:
    """The coverage, sharpness and shift tables."""
    lines = ["# Calibrated bounds: coverage, sharpness, shift", "",
             f"{describe_machine(result['machine'])}; {describe_load(result)}.", "", result["note"], "",
             "Each case's command is in the second table (cases are measured by separate invocations; each replaces "
             "only its own rows).", "", "## Coverage over random calibration/test splits", "",
             *table_head("case", "score", "n cal / test", "nominal", "target [c, c+1/(n+1)]", "coverage mean",
                         "std", "range", "worst frame", "sharpness (median bound/error)")]
    for name, case in result["cases"].items():
        s = case["splits"]
        for score, entry in s["scores"].items():
            for c, row in entry.items():
                lines.append(f"| {name} | {score} | {s['n_cal']} / {s['n_test']} | {c} | "
                             f"[{row['target'][0]:.3f}, {row['target'][1]:.3f}] | {row['mean']:.3f} | "
                             f"{row['std']:.3f} | {row['min']:.3f}-{row['max']:.3f} | {row['worst_frame']:.3f} | "
                             f"{row['sharpness']:.2f} |")
    lines += ["", *table_head("case", "run", "held-out data", "kind", "samples", "frames", "flagged (test half)",
                              "command", "load average after")]
    for name, case in result["cases"].items():
        m = case["meta"]
        lines.append(f"| {name} | {m['run']} | {m['data']} | {m['kind']} | {m['samples']} | {m['frames']} | "
                     f"{case['splits']['flagged_share']:.3f} | `{case['command']}` | "
                     + joined_loads(case["loadavg"]) + " |")
    if result.get("shift"):
        sh = result["shift"]
        lines += ["", "## Shift: calibrated on one viscosity, predicting another (relative_l2 score)", "",
                  f"Calibrated on {sh['calibration']['data']} ({sh['calibration']['samples']} samples), tested on "
                  f"{sh['test']['data']} ({sh['test']['samples']}); flagged as unlike the calibration data: "
                  f"{sh['flagged_share']:.1%} of the test samples. Median relative L2 per frame: calibration "
                  + ", ".join(f"{v:.3f}" for v in sh["calibration_median_error"]) + "; test "
                  + ", ".join(f"{v:.3f}" for v in sh["test_median_error"]) + f". `{sh['command']}`; load average after "
                  + joined_loads(sh["loadavg"]) + ".", "",
                  *table_head("nominal", "coverage (mean over frames)", "first frame", "last frame",
                              "unflagged samples", "median error / bound", "relative_l2/roughness coverage")]
        for c, row in sh["coverage"].items():
            unflagged = "none" if row["unflagged"] is None else f"{row['unflagged']:.3f}"
            lines.append(f"| {c} | {row['mean']:.3f} | {row['per_frame'][0]:.3f} | {row['per_frame'][-1]:.3f} | "
                         f"{unflagged} | {row['median_error_over_bound']:.2f} | {row['roughness_mean']:.3f} |")
    return page(lines)


NOTE = ("Coverage: the share of test samples whose relative L2 error (pointwise: whose normalized error at the "
        "point level of the coverage) is at most the split-conformal bound of the calibration half, per frame of a "
        "rollout; mean, standard deviation and range over the splits of the mean over frames, and the worst frame's "
        "mean over splits. The guarantee is the lower end of the target; the upper end holds for continuous scores on "
        "average over calibration draws. Sharpness: median over test samples and splits of bound / true error (the "
        "pointwise score: of the band's normalized width over the sample's normalized error at that level); nearer 1 "
        "is sharper, and below 1 for about 1 - c of the samples by construction. Small data and short trainings on a "
        "shared 2-core CPU (benchmarks/trust/README.md): the surrogates are weak, which the bounds must report, not "
        "hide.")


def case_parser(doc: str, splits: int) -> argparse.ArgumentParser:
    """The command line of a benchmark of scored held-out cases: ``--case NAME=RUN:HELD_OUT_FILE`` (repeatable),
    ``--frames`` and ``--splits`` (default ``splits``)."""
    parser = argument_parser(doc)
    parser.add_argument("--case", action="append", default=[], help="NAME=RUN:HELD_OUT_FILE (repeatable)")
    parser.add_argument("--frames", type=int, help="frames to roll out (trajectories; default every frame after t_in)")
    parser.add_argument("--splits", type=int, default=splits)
    return parser


def scored_cases(cases: list[str], frames: int | None
                 ) -> Iterator[tuple[str, str, str, dict[str, torch.Tensor], dict[str, Any]]]:
    """Each ``--case NAME=RUN:HELD_OUT_FILE`` of ``cases`` scored (:func:`scored`): the text, name, run, scores and
    description."""
    for text in cases:
        name, rest = text.split("=", 1)
        run, path = rest.split(":", 1)
        yield text, name, run, *scored(run, path, frames)


def main() -> None:
    parser = case_parser(__doc__, splits=10)
    parser.add_argument("--shift", help="RUN:CAL_FILE:TEST_FILE")
    args = parser.parse_args()
    load_before = os.getloadavg()
    torch.set_num_threads(1)
    kept = earlier(args.results, NAME)
    cases = kept.get("cases", {})
    for _, name, _, parts, meta in scored_cases(args.case, args.frames):
        cases[name] = {"meta": meta, "splits": splits(parts, args.splits), "command": command(),
                       "loadavg": list(os.getloadavg())}
    result: dict[str, Any] = {"note": NOTE, "cases": cases}
    if kept.get("shift"):
        result["shift"] = kept["shift"]
    if args.shift:
        run, cal, test = args.shift.split(":")
        result["shift"] = {**shift(run, cal, test, args.frames), "command": command(),
                           "loadavg": list(os.getloadavg())}
    write_results(args.results, NAME, result, markdown, load_before, "numpy")


if __name__ == "__main__":
    main()
