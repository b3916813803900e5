"""Bounds that hold for every frame of a forecast at once (``opformer predict --joint``, and ``--tolerance``).

For each trajectory case (a trained run and a held-out file it never saw), every held-out trajectory is rolled out
once from its first ``t_in`` frames and scored as ``opformer calibrate`` scores it (the relative L2 error per frame,
``opformer.trust.calibration.Scores``). Then, ``--splits`` times, the trajectories are shuffled into three parts: 20%
stand in for the run's validation split (the frame scales of the joint score, as ``calibrate`` takes them from
there), 40% calibrate and 40% test. At 0.8, 0.9 and 0.95, three bounds of the calibration part are checked on the
test part (the plain ``relative_l2`` score):

- per frame (``Calibration.quantiles``): each frame's bound holds at ``c`` for that frame;
- Bonferroni: per-frame bounds at ``1 - (1 - c) / F``, which hold for all ``F`` frames at once;
- joint (``Calibration.joint_quantiles``): the conformal quantile of each trajectory's largest error over the frames,
  each frame's error divided by that frame's scale, times the frame's scale.

Reported: the share of test trajectories within the bound at every frame (simultaneous coverage; mean and spread
over the splits), the mean per-frame coverage, and the width of each bound over the per-frame one (mean over frames
and splits).

Run from the repository root (data and runs as in benchmarks/trust/README.md)::

    python -m benchmarks.trust.joint --case navier_stokes=/tmp/h3/runs/ns_fno:/tmp/h3/data/ns3_held.h5 --splits 50

Writes benchmarks/results/trust/joint.json and .md.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from benchmarks.harness import (
    command, describe_load, describe_machine, earlier, joined_loads, page, table_head, write_results)
from benchmarks.trust.coverage import case_parser, scored_cases
from opformer.trust.calibration import Calibration, Scores

NAME = "joint"
COVERAGES = (0.8, 0.9, 0.95)
METHODS = ("per frame", "Bonferroni", "joint")


def _part(parts: dict[str, torch.Tensor], index: torch.Tensor) -> Scores:
    """The scores of the trajectories ``index``."""
    scores = Scores()
    scores.parts = {key: [value[index]] for key, value in parts.items()}
    return scores


def splits(parts: dict[str, torch.Tensor], count: int, seed: int = 0) -> dict[str, Any]:
    """Simultaneous and per-frame coverage and relative width of the three bounds over ``count`` random splits."""
    n, frames = parts["relative_l2"].shape
    n_scale, n_cal = n // 5, 2 * n // 5
    rng = np.random.default_rng(seed)
    rows: dict[str, dict[str, dict[str, list[float]]]] = {}
    for _ in range(count):
        order = torch.from_numpy(rng.permutation(n))
        scale, cal, test = order[:n_scale], order[n_scale:n_scale + n_cal], order[n_scale + n_cal:]
        group = _part(parts, cal).group(frame_scale=_part(parts, scale).frame_scales())
        calibration = Calibration("benchmark", "trajectory", "", {}, {"": group})
        errors = parts["relative_l2"][test]
        for c in COVERAGES:
            per_frame = calibration.quantiles(c)
            bounds = {"per frame": per_frame, "Bonferroni": calibration.quantiles(1 - (1 - c) / frames),
                      "joint": calibration.joint_quantiles(c)}
            for method, bound in bounds.items():
                inside = errors <= bound
                row = rows.setdefault(str(c), {}).setdefault(method, {"all": [], "frame": [], "width": []})
                row["all"].append(float(inside.all(dim=1).double().mean()))
                row["frame"].append(float(inside.double().mean()))
                row["width"].append(float((bound / per_frame).mean()))
    return {"n_scale": n_scale, "n_cal": n_cal, "n_test": n - n_scale - n_cal, "frames": frames,
            "coverage": {c: {method: {"simultaneous_mean": float(np.mean(r["all"])),
                                      "simultaneous_std": float(np.std(r["all"])),
                                      "per_frame_mean": float(np.mean(r["frame"])),
                                      "width_over_per_frame": float(np.mean(r["width"]))}
                             for method, r in by_method.items()}
                         for c, by_method in rows.items()}}


def markdown(result: dict[str, Any]) -> str:
    """The simultaneous-coverage table and the cases' commands."""
    lines = ["# Bounds for every frame at once: per frame, Bonferroni and joint", "",
             f"{describe_machine(result['machine'])}; {describe_load(result)}.", "", result["note"], "",
             *table_head("case", "nominal c", "bound", "all frames covered (mean ± std over splits)",
                         "mean per-frame coverage", "width / per-frame width")]
    for name, case in result["cases"].items():
        for c, by_method in case["splits"]["coverage"].items():
            for method, row in by_method.items():
                lines.append(f"| {name} | {c} | {method} | {row['simultaneous_mean']:.3f} ± "
                             f"{row['simultaneous_std']:.3f} | {row['per_frame_mean']:.3f} | "
                             f"{row['width_over_per_frame']:.2f} |")
    lines += ["", *table_head("case", "run", "held-out data", "trajectories (scale / cal / test)", "frames",
                              "splits", "command", "load average after")]
    for name, case in result["cases"].items():
        m, s = case["meta"], case["splits"]
        lines.append(f"| {name} | {m['run']} | {m['data']} | {s['n_scale']} / {s['n_cal']} / {s['n_test']} | "
                     f"{s['frames']} | {case['count']} | `{case['command']}` | "
                     + joined_loads(case["loadavg"]) + " |")
    return page(lines)


NOTE = ("All frames covered: the share of test trajectories whose relative L2 error is within the bound at every "
        "frame; the guarantee of the Bonferroni and joint bounds is at least c, of the per-frame bounds only at each "
        "frame. Width: the bound over the per-frame bound at the same c, mean over frames and splits. Small data and "
        "short trainings on a shared 2-core CPU (benchmarks/trust/README.md).")


def main() -> None:
    parser = case_parser(__doc__, splits=50)
    args = parser.parse_args()
    load_before = os.getloadavg()
    torch.set_num_threads(1)
    cases = earlier(args.results, NAME).get("cases", {})
    for text, name, run, parts, meta in scored_cases(args.case, args.frames):
        if meta["kind"] != "trajectory":
            parser.error(f"--case {text}: {run} is an operator run; joint bounds are over a rollout's frames")
        cases[name] = {"meta": meta, "splits": splits(parts, args.splits), "count": args.splits,
                       "command": command(), "loadavg": list(os.getloadavg())}
    write_results(args.results, NAME, {"note": NOTE, "cases": cases}, markdown, load_before, "numpy")


if __name__ == "__main__":
    main()
