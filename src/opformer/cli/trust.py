"""``opformer calibrate``: conformal error bounds for a trained run, stored in its directory."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from opformer.cli.options import DEVICE_HELP, AddCommand
from opformer.errors import ConfigError
from opformer.kinds import TRAJECTORY

if TYPE_CHECKING:
    from opformer.trust.bounds import Calibration

EXAMPLES = {
    "calibrate": "opformer calibrate runs/gt --coverage 0.8,0.9,0.95",
}
#: The coverage levels ``opformer calibrate`` prints by default.
DEFAULT_COVERAGES = (0.8, 0.9, 0.95)
#: What each normalized per-sample score divides the error by, in the words ``opformer calibrate`` prints.
DIFFICULTIES = {"roughness": "roughness", "residual": "physics estimate of its error",
                "backtest": "backtest error"}


def parse_coverages(text: str) -> tuple[float, ...]:
    """``"0.8,0.9"`` -> ``(0.8, 0.9)``; each strictly between 0 and 1, else a one-line ``ConfigError``."""
    from opformer.trust.conformal import check_coverage

    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ConfigError(f"--coverage {text!r}: expected comma-separated levels, e.g. 0.8,0.9,0.95") from None
    if not values:
        raise ConfigError(f"--coverage {text!r}: expected comma-separated levels, e.g. 0.8,0.9,0.95")
    return tuple(check_coverage(v, "--coverage") for v in values)


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``opformer calibrate RUN``: calibrate, store, print the bounds at the chosen coverages."""
    from opformer.kinds import MESH
    from opformer.runs import CALIBRATION, Run
    from opformer.trust.calibrating import calibrate_run

    coverages = parse_coverages(args.coverage)
    run = Run(args.run)
    if run.kind == MESH:
        return _calibrate_mesh(run, args, coverages)
    calibration = calibrate_run(args.run, args.data, split=args.split, frames=args.frames, device=args.device,
                                batch_size=args.batch_size, resolution=args.resolution, start=args.start,
                                backtest=args.backtest)
    where = ", ".join(d["path"] for d in calibration.source["data"])
    print(f"{args.run}: calibrated on {where} ({calibration.source['split']} split); bounds on the relative L2 error:")
    print(format_calibration(calibration, coverages))
    print(f"wrote {args.run}/{CALIBRATION}")
    return 0


def _calibrate_mesh(run: Any, args: argparse.Namespace, coverages: tuple[float, ...]) -> int:
    """``opformer calibrate`` on a mesh run: per-sample weighted relative L2 and band scores, stored and printed."""
    from opformer.runs import CALIBRATION
    from opformer.trust.mesh_calibration import calibrate_mesh_run

    grid = {"--frames": args.frames, "--resolution": args.resolution, "--start": args.start or None,
            "--backtest": args.backtest or None}
    for option, value in grid.items():
        if value is not None:
            raise ConfigError(f"{option}: for grid runs; {run.path} is a mesh run (calibrated on the file's points)")
    calibration = calibrate_mesh_run(run, args.data, split=args.split or "test", device=args.device,
                                     batch_size=args.batch_size)
    where = calibration.source["data"][0]["path"]
    print(f"{args.run}: calibrated on {where} ({calibration.source['split']} split, {calibration.samples} samples); "
          "bounds on the quadrature-weighted relative L2 error, and the band's half width over the prediction's "
          "weighted RMS:")
    print(f"{'coverage':>8}  {'bound':>11}  {'band factor':>11}  {'holds with':>10}")
    for row in calibration.rows(coverages):
        print(f"{row['coverage']:>8g}  {row['relative_l2_bound']:>11.3e}  {row['band_factor']:>11.3e}  "
              f"{row['expected_coverage']:>10.3f}")
    if any(row["relative_l2_bound"] == float("inf") for row in calibration.rows(coverages)):
        print("note: too few calibration samples for some coverage (the bound is inf): need at least "
              "ceil(c / (1 - c)) samples")
    print(f"wrote {args.run}/{CALIBRATION}")
    return 0


def calibration_rows(calibration: Calibration, coverages: tuple[float, ...] = DEFAULT_COVERAGES
                     ) -> list[dict[str, Any]]:
    """A row per data set and frame: samples, the per-sample score, and at each coverage the relative-L2 bound and
    the probability it holds (``k / (n + 1)``); a rollout's rows also the joint bound (holding for every frame at
    once). With a normalized score each input has its own bound (its difficulty times the score's quantile): the
    row's ``bounds`` is then the median of the calibration inputs' bounds and ``bounds_range`` their smallest and
    largest."""
    from opformer.trust.conformal import expected_coverage
    from opformer.trust.scores import PLAIN_SCORES

    rows = []
    joint = calibration.kind == TRAJECTORY
    for name, group in calibration.groups.items():
        difficulty = group.difficulty_of(group.score)
        per_input = {c: calibration.sample_bounds(c, difficulty, name) for c in coverages}
        joints = {c: calibration.sample_bounds(c, difficulty, name, joint=True).median(dim=0).values
                  for c in coverages} if joint else {}
        normalized = group.score != PLAIN_SCORES[0]
        for frame in range(calibration.frames):
            at = {c: bounds[:, min(frame, bounds.shape[1] - 1)] for c, bounds in per_input.items()}
            rows.append({"member": name, "frame": frame + 1, "samples": group.samples, "score": group.score,
                         "bounds": {str(c): float(at[c].median()) for c in coverages},
                         **({"bounds_range": {str(c): [float(at[c].min()), float(at[c].max())] for c in coverages}}
                            if normalized else {}),
                         "expected_coverage": {str(c): expected_coverage(group.samples, c) for c in coverages},
                         **({"joint_bounds": {str(c): float(joints[c][frame]) for c in coverages}} if joint else {})})
    return rows


def format_calibration(calibration: Calibration, coverages: tuple[float, ...] = DEFAULT_COVERAGES) -> str:
    """A plain-text table of :func:`calibration_rows`: with a normalized score, ``bound@c`` is the median of the
    calibration inputs' bounds and ``range@c`` their smallest..largest (a note under the table says so)."""
    from opformer.trust.conformal import conformal_rank

    rows = calibration_rows(calibration, coverages)
    member = any(row["member"] for row in rows)
    frame = calibration.kind == TRAJECTORY
    ranged = any("bounds_range" in row for row in rows)
    head = (f"{'member':<20}  " if member else "") + (f"{'frame':>5}  " if frame else "") + f"{'samples':>7}"
    lines = [f"{name or 'scores'}: per-sample {group.score}, pointwise scale {group.scale}"
             for name, group in calibration.groups.items()]
    lines.append(head + "".join(f"  {f'bound@{c:g}':>11}" for c in coverages)
                 + "".join(f"  {f'range@{c:g}':>20}" for c in coverages if ranged)
                 + "".join(f"  {f'joint@{c:g}':>11}" for c in coverages if frame))
    for row in rows:
        line = (f"{row['member']:<20}  " if member else "") + (f"{row['frame']:>5}  " if frame else "")
        spans = row.get("bounds_range")
        lines.append(line + f"{row['samples']:>7}" + "".join(f"  {row['bounds'][str(c)]:>11.3e}" for c in coverages)
                     + "".join(f"  {_span(spans, c):>20}" for c in coverages if ranged)
                     + "".join(f"  {row['joint_bounds'][str(c)]:>11.3e}" for c in coverages if frame))
    too_few = [c for c in coverages if any(conformal_rank(g.samples, c) is None for g in calibration.groups.values())]
    if too_few:
        lines.append(f"note: too few calibration samples for coverage {', '.join(f'{c:g}' for c in too_few)} "
                     "(the bound is inf): need at least ceil(c / (1 - c)) samples")
    normalized = sorted({row["score"] for row in rows if "bounds_range" in row})
    if normalized:
        lines.append(f"per-sample {', '.join(normalized)}: each input gets its own bound (the score's quantile times "
                     f"the input's {' or '.join(DIFFICULTIES.get(n, n) for n in normalized)}); bound@c is the median "
                     "of the calibration inputs' bounds (a typical input's), range@c their smallest..largest"
                     + ("; joint@c the median too" if frame else ""))
    else:
        lines.append("per-sample relative_l2: bound@c is the bound of every input")
    if frame:
        lines.append("joint: bounds that hold for every frame at once (`opformer predict --joint`, and --tolerance)")
    return "\n".join(lines)


def _span(spans: dict[str, list[float]] | None, coverage: float) -> str:
    """``"5.90e-02..1.00e-01"``: a row's smallest..largest per-input bound at ``coverage`` (``-``: one bound)."""
    if spans is None:
        return "-"
    low, high = spans[str(coverage)]
    return f"{low:.2e}..{high:.2e}"


def add_parsers(add: AddCommand) -> None:
    """The parser of ``calibrate``."""
    p = add("calibrate", "Calibrate a run's error bounds (split conformal) on data it never saw.")
    p.add_argument("run", help="run directory")
    p.add_argument("--data", help="data file to calibrate on (default: the run's data file)")
    p.add_argument("--split", choices=["test", "all", "train", "val"],
                   help="samples to calibrate on: test (default), or all of a separate --data file; train and val "
                        "(seen by training and model selection) are refused")
    p.add_argument("--frames", type=int,
                   help="trajectory runs: frames to roll out and calibrate (default: the run's eval_frames, else all)")
    p.add_argument("--resolution", type=int,
                   help="grid points per axis to predict on (default: the file's stored grid, where `opformer predict` "
                        "predicts; bounds of predictions on other grids are flagged)")
    p.add_argument("--start", type=int, default=0,
                   help="trajectory runs: the first stored frame each trajectory is given (default 0; `opformer "
                        "predict` gives new inputs the frames from the same index unless told otherwise)")
    p.add_argument("--backtest", type=int, default=0,
                   help="trajectory runs: frames given before the t_in of the forecast, which the surrogate forecasts "
                        "from the t_in before them; its error there offers the `backtest` score (default 0: none)")
    p.add_argument("--coverage", default="0.8,0.9,0.95", help="levels whose bounds are printed (default 0.8,0.9,0.95)")
    p.add_argument("--batch-size", type=int, help="samples per model call (default: the run's eval_batch_size)")
    p.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default auto)")
    p.set_defaults(func=cmd_calibrate)
