"""The solver where the bound fails, what bounds cost, and rollout throughput beside the solver (issue 45 §5).

For each case (a trained run and a held-out file it never saw, made by `opformer generate`; its first half
calibrates, its second half tests):

1. the run is calibrated on all of the first half (``calibrate_run(run, data=CAL, split="all")``);
2. the test file's every sample is solved again by the built-in solver (``opformer.pde.resolve``), timed: solving
   everything, measured; a trajectory test file is cut to its first ``t_in`` frames (the context) and its later
   frames are the truth of the forecast;
3. ``opformer predict --tolerance T --coverage 0.9`` (``predict_with_fallback``) at two tolerances, by default half
   and 1.5 times the plain bound (the relative-L2 score's, largest frame) at 0.9; the per-sample bound is the score
   calibration selected (``relative_l2``: that one number for every input; ``roughness``: varying per input), for a
   rollout the joint one (every frame at once), as ``--tolerance`` uses it. The
   share of samples sent to the solver, the wall time against solving everything (the measured time of step 2),
   the largest true relative L2 error among the surrogate's answers and the share of them within the tolerance
   (at least 0.9 is what the bound promises, on average);
4. the cost of bounds: ``predict`` without and with ``--coverage 0.9`` (median of ``--repeats`` runs each);
5. throughput: frames (operator runs: samples) per second of ``predict`` against the solver's, one thread each.

Run from the repository root (data and runs as in benchmarks/trust/README.md)::

    python -m benchmarks.trust.fallback --case darcy=RUN:HELD_OUT --case navier_stokes=RUN:HELD_OUT

Writes benchmarks/results/trust/fallback.json and .md.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from benchmarks.harness import (
    argument_parser, command, describe_load, describe_machine, page, relative_l2, table_head, write_results)

from opformer.data.store import (read_arrays, read_fields, read_info, write_operator_dataset,
                                 write_trajectory_dataset)
from opformer.pde.resolve import resolve_operator, resolve_trajectory
from opformer.serve.fallback import predict_with_fallback
from opformer.serve.forecaster import open_forecaster
from opformer.serve.predict import predict_file
from opformer.trust.calibration import calibrate_run
from opformer.trust.shift import flag_shifted, input_statistics

NAME = "fallback"
COVERAGE = 0.9


def part(held: str, samples: slice, path: Path, frames: int | None = None) -> str:
    """Samples ``samples`` of ``held`` (trajectories: their first ``frames`` frames) as a file of the same
    attributes."""
    info = read_info(held)
    common = {"pde": info.pde, "solver": info.solver, "domain": info.domain, "seed": info.seed}
    if info.kind == "operator":
        x, y = read_arrays(held, samples)
        return str(write_operator_dataset(path, x, y, input_channels=info.input_channels,
                                          target_channels=info.target_channels, **common))
    fields = read_fields(held, samples)[:, :frames]
    return str(write_trajectory_dataset(path, fields, np.asarray(info.times)[:fields.shape[1]],
                                        channels=info.input_channels, **common))


def solve_all(test: str, times: np.ndarray, t_in: int) -> tuple[float, np.ndarray]:
    """Every test sample solved again (one thread), timed; the answers."""
    info = read_info(test)
    began = time.perf_counter()
    if info.kind == "operator":
        x, _ = read_arrays(test, slice(None))
        solved = resolve_operator(info.pde, info.solver, x)
    else:
        last = read_fields(test, slice(None))[:, t_in - 1]
        solved = resolve_trajectory(info.pde, info.solver, last, times[t_in - 1:])
    return time.perf_counter() - began, solved


def timed_predict(run: str, source: str, out: Path, coverage: float | None) -> float:
    """Seconds of one ``predict`` (with bounds at ``coverage`` when given)."""
    began = time.perf_counter()
    predict_file(run, source, out, device="cpu", coverage=coverage)
    return time.perf_counter() - began


def core_costs(forecaster: Any, calibration: Any, source: str, frames: int, repeats: int) -> dict[str, float]:
    """Seconds (the fastest of ``repeats``) of the model's predictions of every sample of ``source`` in memory, of
    the per-sample bound beside them (the bound looked up and the input flagged) and of the whole bounds (the
    pointwise band too)."""
    info = read_info(source)
    given = torch.from_numpy(read_fields(source, slice(None)) if frames else read_arrays(source, slice(None))[0])
    reference = calibration.group().statistics

    def model() -> torch.Tensor:
        return forecaster.rollout(given, frames) if frames else forecaster.predict(given)

    def per_sample() -> None:
        calibration.quantiles(COVERAGE)
        flag_shifted(input_statistics(given, info.ndim), reference)

    times: dict[str, list[float]] = {"predict": [], "per_sample_bound": [], "bounds": []}
    for _ in range(repeats + 1):  # the first pass warms up, untimed
        for key, work in (("predict", model), ("per_sample_bound", per_sample),
                          ("bounds", lambda: calibration.bounds(given, pred, COVERAGE))):
            began = time.perf_counter()
            out = work()
            times[key].append(time.perf_counter() - began)
            if key == "predict":
                pred = out
    return {key: min(value[1:]) for key, value in times.items()}  # the least disturbed by the machine's other jobs


def case(name: str, run: str, held: str, factors: list[float], repeats: int, folder: Path,
         shifted: str | None = None) -> dict[str, Any]:
    """Steps 1-5 of the module's docstring for one case: the first half of ``held`` calibrates, the second tests
    (``shifted``: all of ``held`` calibrates, all of ``shifted`` tests)."""
    forecaster = open_forecaster(run, "cpu")
    trajectory = forecaster.kind == "trajectory"
    if shifted:
        info, half, cal = read_info(shifted), 0, held
        test = held = shifted
    else:
        info = read_info(held)
        half = info.n_samples // 2
        cal = part(held, slice(0, half), folder / f"{name}_calibration.h5")
        test = part(held, slice(half, None), folder / f"{name}_test.h5")
    calibration = calibrate_run(run, data=cal, split="all", device="cpu")
    bound = calibration.quantiles(COVERAGE)
    times = np.asarray(info.times)
    if trajectory:  # the context: the first t_in frames; the truth: the later ones
        source = part(held, slice(half, None), folder / f"{name}_context.h5", forecaster.t_in)
        truth = read_fields(held, slice(half, None))[:, forecaster.t_in:]
        frames = truth.shape[1]
    else:
        source, truth, frames = test, read_arrays(test, slice(None))[1], 1
    samples = len(truth)
    solve_seconds, solved = solve_all(test, times, forecaster.t_in or 0)
    solver_error = float(relative_l2(solved, truth).max())
    rows = []
    for factor in factors:
        tolerance = float(factor * bound.max())
        out = folder / f"{name}_{factor}.h5"
        report = predict_with_fallback(run, source, out, tolerance, COVERAGE, device="cpu")
        with h5py.File(out) as f:
            merged = f["fields" if trajectory else "target"][:]
            chosen = f["to_solver"][:].astype(bool)
        errors = relative_l2(merged.reshape(samples, frames, -1).reshape(samples * frames, -1),
                             truth.reshape(samples * frames, -1)).reshape(samples, frames).max(axis=1)
        kept = errors[~chosen]
        rows.append({"factor": factor, "tolerance": tolerance, "to_solver": report.to_solver,
                     "flagged": report.flagged, "share": report.to_solver / samples, "seconds": report.seconds,
                     "speedup": solve_seconds / report.seconds,
                     "max_true_error": float(kept.max()) if len(kept) else None,
                     "within_tolerance": float((kept <= tolerance).mean()) if len(kept) else None,
                     "max_error_solver_answers": float(errors[chosen].max()) if chosen.any() else None})
    core = core_costs(forecaster, calibration, source, frames if trajectory else 0, repeats)
    plain = [timed_predict(run, source, folder / f"{name}_plain.h5", None) for _ in range(repeats)]
    bounded = [timed_predict(run, source, folder / f"{name}_bounds.h5", COVERAGE) for _ in range(repeats)]
    predict_seconds = statistics.median(plain)
    return {"run": run, "data": held, "calibration": cal if shifted else f"samples 0-{half - 1}",
            "test": f"all of {shifted}" if shifted else f"samples {half}-",
            "kind": forecaster.kind, "samples": samples,
            "frames": frames, "calibration_samples": calibration.group().samples, "bound": bound.tolist(),
            "score": calibration.group().score,
            "solve_all_seconds": solve_seconds, "solver_max_error_vs_stored": solver_error, "tolerances": rows,
            "predict_seconds": plain, "predict_with_bounds_seconds": bounded,
            "bounds_overhead": statistics.median(bounded) / predict_seconds - 1, "core": core,
            "surrogate_per_second": samples * frames / predict_seconds,
            "solver_per_second": samples * frames / solve_seconds}


def markdown(result: dict[str, Any]) -> str:
    """The fallback, cost and throughput tables."""
    lines = ["# The solver where the bound fails; the cost of bounds; rollout throughput", "",
             f"{describe_machine(result['machine'])}; {describe_load(result)}.", "", result["note"], "",
             "Cases are measured by separate invocations (their commands below); each replaces only its own rows.", "",
             "## Fallback at two tolerances (coverage 0.9)", "",
             *table_head("case", "per-sample score", "tolerance (x plain bound)", "sent to the solver",
                         "of them flagged",
                         "wall time / solving all", "speed-up over solving all",
                         "largest true error of the surrogate's answers", "surrogate's answers within tolerance")]
    for name, c in result["cases"].items():
        for r in c["tolerances"]:
            worst = "none answered" if r["max_true_error"] is None else f"{r['max_true_error']:.4f}"
            within = "-" if r["within_tolerance"] is None else f"{r['within_tolerance']:.3f}"
            lines.append(f"| {name} | {c.get('score', 'relative_l2')} | {r['tolerance']:.4f} ({r['factor']:g}x) | "
                         f"{r['to_solver']} of {c['samples']} "
                         f"({r['share']:.1%}) | {r['flagged']} | {r['seconds']:.2f} s / {c['solve_all_seconds']:.2f} s "
                         f"| {r['speedup']:.2f}x | {worst} | {within} |")
    lines += ["", "## What bounds add to predict, and throughput beside the solver (one thread each)", "",
              *table_head("case", "samples x frames", "calibration samples", "bound at 0.9 (largest frame)",
                          "predict (median)", "with --coverage 0.9 (median)", "added", "surrogate per s",
                          "solver per s", "solver / surrogate time")]
    for name, c in result["cases"].items():
        unit = "frames" if c["kind"] == "trajectory" else "samples"
        lines.append(f"| {name} | {c['samples']} x {c['frames']} | {c['calibration_samples']} | "
                     f"{max(c['bound']):.4f} | "
                     f"{np.median(c['predict_seconds']):.3f} s | {np.median(c['predict_with_bounds_seconds']):.3f} s | "
                     f"{c['bounds_overhead']:+.1%} | {c['surrogate_per_second']:.1f} {unit} | "
                     f"{c['solver_per_second']:.1f} {unit} | "
                     f"{c['surrogate_per_second'] / c['solver_per_second']:.1f}x |")
    lines += ["", "In memory, the model's calls alone against what each part of the bounds adds (the fastest of "
              "the repeats: on a shared machine the least disturbed):", "",
              *table_head("case", "model calls", "per-sample bound (lookup + flag)", "added", "all bounds (+ band)",
                          "added")]
    for name, c in result["cases"].items():
        k = c["core"]
        lines.append(f"| {name} | {k['predict']:.3f} s | {k['per_sample_bound']:.4f} s | "
                     f"{k['per_sample_bound'] / k['predict']:.1%} | {k['bounds']:.3f} s | "
                     f"{k['bounds'] / k['predict']:.1%} |")
    lines += ["", *table_head("case", "command", "load average after"),
              *[f"| {name} | `{c['command']}` | " + " / ".join(f"{v:.2f}" for v in c["loadavg"]) + " |"
                for name, c in result["cases"].items()]]
    return page(lines,
                "Solver answers against the stored truth (largest relative L2): " + ", ".join(
                f"{name} {c['solver_max_error_vs_stored']:.1e}" for name, c in result["cases"].items()) + ".")


NOTE = ("Solving all: every test sample solved again by opformer.pde.resolve with the file's settings, one thread, "
        "measured. Fallback wall time: the whole `predict --tolerance` call (loading the run and calibration, the "
        "predictions, the bounds, the solves of the samples sent to the solver, writing the output). Tolerances are "
        "multiples of the plain bound (the relative-L2 score's at 0.9, largest frame). The plain score's bound is one "
        "number per frame for every input, so at a tolerance below it every sample goes to the solver and above it "
        "only the samples flagged as unlike the calibration data do; the roughness-normalized score (where calibration "
        "selected it on the validation split) bounds each input by its own roughness, and the tolerance splits them. "
        "Trajectories: a sample goes to the solver when any frame's joint bound (the bounds that hold for every frame "
        "at once, `predict --joint`) exceeds the tolerance; its error is its largest over the frames; the tolerances "
        "stay multiples of the per-frame plain bound. predict timings: the median of the repeats, in this process, with torch at one "
        "thread.")


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--case", action="append", default=[],
                        help="NAME=RUN:HELD_OUT_FILE (repeatable): its first half calibrates, the second tests; "
                             "NAME=RUN:CAL_FILE:SHIFTED_FILE: all of one calibrates, all of the other tests")
    parser.add_argument("--factors", default="0.5,1.5", help="tolerances as multiples of the largest bound at 0.9")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    load_before = os.getloadavg()
    torch.set_num_threads(1)
    factors = [float(v) for v in args.factors.split(",")]
    previous = Path(args.results) / f"{NAME}.json"  # cases measured by earlier invocations are kept
    cases = json.loads(previous.read_text())["cases"] if previous.exists() else {}
    with tempfile.TemporaryDirectory(prefix="trust_fallback_") as tmp:
        for text in args.case:
            name, rest = text.split("=", 1)
            run, held, *shifted = rest.split(":")
            cases[name] = {**case(name, run, held, factors, args.repeats, Path(tmp), *shifted), "command": command(),
                           "loadavg": list(os.getloadavg())}
            print(json.dumps({name: cases[name]["tolerances"]}, indent=1))
    write_results(args.results, NAME, {"note": NOTE, "cases": cases}, markdown, load_before, "numpy", "scipy")


if __name__ == "__main__":
    main()
