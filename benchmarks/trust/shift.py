"""Calibrated bounds under a shift of the physics: does the flag catch the inputs whose bounds fail?

For one case (a calibrated run, a held-out file drawn like its calibration data, and files whose physics is
shifted: another viscosity, Reynolds number or coefficient contrast on the same grid), every sample of each file is
predicted once (operator runs) or rolled out over the calibrated frames from the frames its calibration was given
(trajectory runs: from the calibrated start, the backtest's frames where it has them, then ``t_in``), its true
relative L2 error measured, and its bound and flag taken as ``predict`` takes them (``Forecaster.bounded``) at
coverage 0.9 for every per-sample score the calibration offers (a mixture run: of one calibrated member).
Reported per score and file (trajectories: per frame, each (sample, frame) a unit, and joint, the bound that holds
for every frame at once):

- the coverage of the unflagged inputs (the share within their bound);
- the flagged share (inputs the bounds do not vouch for);
- silent failures: the share of all inputs that are unflagged and have an error above their bound;
- the mean bound (sharpness: smaller is sharper, at the same coverage).

The goal: silent failures at most 1.5 x (1 - c) on every shifted file, while the held-out file drawn like the
calibration data keeps coverage in [c, c + 1/(n + 1)] and a flag rate near 1/(n + 1) (n calibration samples).

Run from the repository root (data and runs: /root/shift/README.md)::

    python -m benchmarks.trust.shift --case navier_stokes --run RUN --test IN_DISTRIBUTION.h5 \\
        --shifted "nu 3e-4=FILE.h5" --shifted "nu 3e-3=FILE.h5"

Each invocation measures one case and replaces only its rows. Writes benchmarks/results/trust/shift.json and .md.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import numpy as np
import torch

from benchmarks.harness import argument_parser, command, describe_load, describe_machine, earlier, \
    joined_loads, page, table_head, write_results
from opformer.data.store import read_arrays, read_fields, read_info
from opformer.errors import OpformerError
from opformer.grids import axis_kinds
from opformer.serve.forecaster import Forecaster, open_forecaster
from opformer.trust.bounds import Group
from opformer.trust.scores import relative_l2

NAME = "shift"
COVERAGE = 0.9
#: The goal's allowance of silent failures on a shifted file, in units of 1 - c.
SILENT_ALLOWANCE = 1.5
#: The normal quantile of a two-sided 95% interval.
Z_95 = 1.959963984540054


def shift_metrics(inside: np.ndarray, bound: np.ndarray, flagged: np.ndarray) -> dict[str, float | None]:
    """What the bounds of one file did: ``inside`` ``(sample, k)`` (True: the error is at most its bound; ``k``
    frames, or 1), ``bound`` ``(sample, k)``, ``flagged`` ``(sample,)``. Each (sample, frame) is a unit: the
    coverage of the unflagged units (None when every sample is flagged), the flagged share of samples, silent
    failures (the share of all units unflagged and outside their bound) and the mean finite bound (None: none)."""
    inside, flagged = np.asarray(inside, dtype=bool), np.asarray(flagged, dtype=bool)
    bound = np.asarray(bound, dtype=np.float64)
    unflagged = inside[~flagged]
    finite = bound[np.isfinite(bound)]
    return {"samples": int(len(inside)),
            "coverage": float(inside.mean()),
            "coverage_unflagged": float(unflagged.mean()) if unflagged.size else None,
            "flagged": float(flagged.mean()),
            "silent_failures": float((~inside & ~flagged[:, None]).mean()),
            "mean_bound": float(finite.mean()) if finite.size else None}


def wilson_interval(share: float, samples: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval (95% at the default ``z``) of a share measured on ``samples`` independent
    samples."""
    center = (share + z * z / (2 * samples)) / (1 + z * z / samples)
    half = z / (1 + z * z / samples) * math.sqrt(share * (1 - share) / samples + z * z / (4 * samples * samples))
    return center - half, center + half


def goal(coverage: float, n_cal: int, held: dict[str, Any], shifted: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The goal checked on one score's metrics (:func:`shift_metrics`) of the held-out file ``held`` and of each
    ``shifted`` file: silent failures at most 1.5 (1 - c) on each shifted one; on the held-out one coverage in
    [c, c + 1/(n + 1)], met where the 95% interval of the measured coverage (:func:`wilson_interval` over the file's
    samples, the frames of a sample counted as one: they are not independent) meets that range, and the flag rate
    beside 1/(n + 1)."""
    allowed = SILENT_ALLOWANCE * (1 - coverage)
    high = coverage + 1 / (n_cal + 1)
    low_measured, high_measured = wilson_interval(held["coverage"], held["samples"])
    return {"silent_allowed": allowed, "coverage_target": [coverage, high], "flag_rate_target": 1 / (n_cal + 1),
            "shifted_silent_ok": {name: m["silent_failures"] <= allowed for name, m in shifted.items()},
            "held_coverage_interval": [low_measured, high_measured],
            "held_coverage_ok": low_measured <= high and coverage <= high_measured}


def offered_scores(group: Group) -> tuple[str, ...]:
    """The per-sample scores a data set's calibration answers: ``Group.offered`` where the calibration records it,
    else the scores it stores joint quantiles of (every calibration answers ``relative_l2``)."""
    offered = getattr(group, "offered", None)
    return tuple(offered) if offered is not None else tuple(group.joint or ("relative_l2",))


def predicted(forecaster: Forecaster, path: str, frames: int, member: str | None = None, batch: int = 50
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every sample of ``path``: the given inputs, the predictions ``(sample, frames, *grid, c)`` (operator runs:
    one frame) and their true relative L2 errors ``(sample, frames)``. A trajectory is given the frames its
    calibration was given (:meth:`Forecaster.given_frames`; a mixture ``member``: from the first frame, with its
    backtest's): the backtest's frames, then the ``t_in`` of the context, which the forecast follows."""
    info = read_info(path)
    kinds = axis_kinds(info.domain)
    first = forecaster.given_frames()["start"]
    extra = forecaster.calibration.group(member).backtest if forecaster.kind == "trajectory" else 0
    given, preds, errors = [], [], []
    for start in range(0, info.n_samples, batch):
        stop = min(info.n_samples, start + batch)
        if forecaster.kind == "trajectory":
            fields = torch.from_numpy(read_fields(path, slice(start, stop)))
            context = first + extra + forecaster.t_in
            if fields.shape[1] < context + frames:
                raise OpformerError(f"{path}: {fields.shape[1]} frames; the calibration's position needs "
                                    f"{context + frames} (from frame {first}: {extra} backtest, "
                                    f"{forecaster.t_in} context, {frames} forecast)")
            x, truth = fields[:, first:context], fields[:, context:context + frames]
            pred = forecaster.rollout(x, frames, kinds)
        else:
            x, y = (torch.from_numpy(a) for a in read_arrays(path, slice(start, stop)))
            truth, pred = y.unsqueeze(1), forecaster.predict(x).unsqueeze(1)
        given.append(x)
        preds.append(pred)
        errors.append(relative_l2(pred.flatten(0, 1), truth.flatten(0, 1)).reshape(len(x), -1))
    return torch.cat(given), torch.cat(preds), torch.cat(errors).double()


def measured(forecaster: Forecaster, member: str | None, given: torch.Tensor, preds: torch.Tensor,
             errors: torch.Tensor, score: str) -> dict[str, Any]:
    """One file's metrics for ``score`` at :data:`COVERAGE`, the bounds taken as ``predict`` takes them
    (:meth:`Forecaster.bounded`: a trajectory's backtest from its frames before the context): per frame and
    (trajectories) joint; a score the calibration cannot apply to these inputs is recorded with its one-line
    reason."""
    trajectory = forecaster.kind == "trajectory"
    out: dict[str, Any] = {}
    for joint in (False, True) if trajectory else (False,):
        try:
            b = forecaster.bounded(forecaster.bounds_at(COVERAGE, member, joint, score), given,
                                   preds if trajectory else preds[:, 0])
        except OpformerError as exc:
            return {"error": str(exc)}
        bound = b.relative_l2.double().reshape(len(given), -1)
        inside = errors <= bound
        if joint:  # a sample within its bound at every frame
            inside = inside.all(dim=1, keepdim=True)
        out["joint" if joint else "per_frame"] = shift_metrics(inside.numpy(), bound.numpy(), b.flagged.numpy())
    return out


def case(run: str, held: str, shifted: dict[str, str], member: str | None = None) -> dict[str, Any]:
    """A case's measurements: each score's metrics on the held-out file and each shifted one, and the goal
    (``member``: the calibrated mixture member the files belong to)."""
    forecaster = open_forecaster(run, "cpu", calibrated=True)
    calibration = forecaster.calibration
    group = calibration.group(member)
    scores = offered_scores(group)
    files = {"held-out (calibration's physics)": held, **shifted}
    results: dict[str, dict[str, Any]] = {score: {} for score in scores}
    seconds = {}
    for label, path in files.items():
        began = time.perf_counter()
        given, preds, errors = predicted(forecaster, path, calibration.frames, member)
        for score in scores:
            results[score][label] = measured(forecaster, member, given, preds, errors, score)
        seconds[label] = {"seconds": time.perf_counter() - began,
                          "median_error_per_frame": errors.median(dim=0).values.tolist(),
                          "samples": len(given), "loadavg": list(os.getloadavg())}
    held_label = next(iter(files))
    goals = {}
    for score, per_file in results.items():
        for how in ("per_frame", "joint"):
            if how in per_file[held_label]:
                goals.setdefault(score, {})[how] = goal(
                    COVERAGE, group.samples, per_file[held_label][how],
                    {label: per_file[label][how] for label in shifted if how in per_file[label]})
    return {"run": run, "member": member, "backtest_frames": group.backtest,
            "start": forecaster.given_frames()["start"], "kind": forecaster.kind, "files": files, "calibration_samples": group.samples,
            "calibration_score": group.score, "frames": calibration.frames, "scores": results, "goal": goals,
            "data": seconds, "command": command(), "loadavg": list(os.getloadavg())}


def _cell(value: float | None, digits: str = ".3f") -> str:
    return "-" if value is None else format(value, digits)


def _given(case_: dict[str, Any]) -> str:
    """The member and the given frames of a case, where there are any to say."""
    parts = [f"member {case_['member']}"] if case_.get("member") else []
    if case_.get("backtest_frames"):
        parts.append(f"given from frame {case_['start']}: {case_['backtest_frames']} for the backtest, then t_in")
    return f" ({'; '.join(parts)})" if parts else ""


def markdown(result: dict[str, Any]) -> str:
    """The shift table of every case."""
    c = result["coverage"]
    lines = ["# Calibrated bounds under a shift of the physics", "",
             f"{describe_machine(result['machine'])}; {describe_load(result)}.", "", result["note"], "",
             f"Goal at c = {c}: silent failures <= {SILENT_ALLOWANCE} x (1 - c) = {SILENT_ALLOWANCE * (1 - c):.3f} "
             "on every shifted set; in-distribution coverage in [c, c + 1/(n+1)], flag rate ~ 1/(n+1).", ""]
    for name, case_ in result["cases"].items():
        n = case_["calibration_samples"]
        lines += [f"## {name}", "",
                  f"Run {case_['run']}{_given(case_)} ({case_['kind']}, {case_['frames']} calibrated frames), {n} calibration "
                  f"samples (target coverage [{c:.3f}, {c + 1 / (n + 1):.3f}], flag rate ~ {1 / (n + 1):.3f}); the "
                  f"score calibration chose: {case_['calibration_score']}. `{case_['command']}`; load average after "
                  + joined_loads(case_["loadavg"]) + ".", "",
                  *table_head("score", "bounds", "data", "samples", "coverage", "coverage of unflagged", "flagged",
                              "silent failures", "goal met", "mean bound")]
        for score, per_file in case_["scores"].items():
            for label, entry in per_file.items():
                if "error" in entry:
                    lines.append(f"| {score} | - | {label} | - | not measured: {entry['error']} | | | | | |")
                    continue
                for how, m in entry.items():
                    g = case_["goal"][score][how]
                    met = (g["held_coverage_ok"] if label not in g["shifted_silent_ok"]
                           else g["shifted_silent_ok"][label])
                    lines.append(f"| {score} | {how.replace('_', ' ')} | {label} | {m['samples']} | "
                                 f"{m['coverage']:.3f} | {_cell(m['coverage_unflagged'])} | {m['flagged']:.3f} | "
                                 f"{m['silent_failures']:.3f} | {'yes' if met else 'no'} | "
                                 f"{_cell(m['mean_bound'], '.4f')} |")
        lines += ["", *table_head("data", "file", "samples", "median relative L2 (frames 1, 2, ..., last two)", "seconds",
                                  "load average after")]
        for label, d in case_["data"].items():
            errors = d["median_error_per_frame"]
            shown = ", ".join(f"{v:.3f}" for v in (errors if len(errors) <= 4 else [*errors[:2], *errors[-2:]]))
            lines.append(f"| {label} | {case_['files'][label]} | {d['samples']} | {shown} | {d['seconds']:.1f} | "
                         + joined_loads(d["loadavg"]) + " |")
        lines.append("")
    return page(lines)


NOTE = ("Coverage: the share of (sample, frame) units whose true relative L2 error is at most its bound at c = 0.9 "
        "(joint: samples within their joint bound at every frame). Flagged: the share of samples the bounds do not "
        "vouch for (their input unlike the calibration data). Silent failures: the share of all units that are "
        "unflagged and outside their bound, what a user who trusts the flag gets wrong without being told. The goal "
        "column checks, for a shifted file, silent failures against 1.5 (1 - c); for the held-out file drawn like "
        "the calibration data, coverage against [c, c + 1/(n+1)], met where the 95% Wilson interval of the measured "
        "coverage over the file's samples meets that range (a finite test file measures coverage only to about "
        "+-0.04 at 200 samples). Mean bound: the mean finite bound, smaller is "
        "sharper. Small data and short trainings on a shared 2-core CPU (/root/shift/README.md).")


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--case", required=True, help="the case's name in the results")
    parser.add_argument("--run", required=True, help="a calibrated run directory")
    parser.add_argument("--test", required=True, help="held-out file drawn like the calibration data")
    parser.add_argument("--shifted", action="append", default=[], help="LABEL=FILE of shifted physics (repeatable)")
    parser.add_argument("--member", default=None, help="a mixture run: the calibrated member the files belong to")
    args = parser.parse_args()
    load_before = os.getloadavg()
    torch.set_num_threads(1)
    shifted = dict(text.split("=", 1) for text in args.shifted)
    kept = earlier(args.results, NAME)
    cases = kept.get("cases", {})
    cases[args.case] = case(args.run, args.test, shifted, args.member)
    write_results(args.results, NAME, {"note": NOTE, "coverage": COVERAGE, "cases": cases}, markdown, load_before,
                  "numpy")


if __name__ == "__main__":
    main()
