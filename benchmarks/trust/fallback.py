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

With ``--calibrated NAME=RUN:FILE`` (one case) the run's own calibration is used as ``opformer predict`` uses it
(nothing is recalibrated) on ``FILE``, drawn like the calibration data, and on each ``--shifted LABEL=FILE`` (the
physics shifted), for every per-sample score the calibration offers (``predict_with_fallback(score=)``): each file is
given as ``predict`` reads it (trajectories: the ``t_in`` frames from the calibration's first frame, the truth the
validated frames after them), solved whole once, timed (one chunk holds every sample, as the fallback solves them),
then step 3 per score and tolerance, the tolerances multiples of the calibration's plain bound. Each invocation
replaces only its case's rows of benchmarks/results/trust/fallback_shift.json and .md (data and runs:
/root/shift/README.md)::

    python -m benchmarks.trust.fallback --calibrated navier_stokes=RUN:IN_DISTRIBUTION.h5 \\
        --shifted "nu 3e-4=FILE.h5" --shifted "nu 3e-3=FILE.h5"
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
    argument_parser, command, describe_load, describe_machine, earlier, joined_loads, machine, page, relative_l2,
    table_head, write_results)
from opformer.data.store import (read_arrays, read_fields, read_info, write_operator_dataset,
                                 write_trajectory_dataset)
from opformer.pde.resolve import resolve_operator, resolve_trajectory
from opformer.serve.fallback import predict_with_fallback, solve_samples
from opformer.serve.forecaster import Forecaster, open_forecaster
from opformer.serve.predict import predict_file, prediction
from opformer.trust.calibration import calibrate_run
from opformer.trust.shift import flag_shifted, input_statistics

NAME = "fallback"
SHIFT_NAME = "fallback_shift"
COVERAGE = 0.9
IN_DISTRIBUTION = "in distribution"


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


def fallback_row(run: str, source: str, truth: np.ndarray, frames: int, tolerance: float, out: Path,
                 solve_seconds: float, score: str | None = None) -> dict[str, Any]:
    """One ``predict --tolerance`` of every sample of ``source`` (``score``: the per-sample score, default the
    calibration's choice), timed, against its ``truth`` (a forecast's ``frames`` frames; 0: operator data) and the
    measured ``solve_seconds`` of solving them all: the share sent to the solver and the true errors (a forecast's
    largest over its frames) of the surrogate's answers."""
    report = predict_with_fallback(run, source, out, tolerance, COVERAGE, device="cpu", score=score)
    with h5py.File(out) as f:
        merged = f["fields" if frames else "target"][:]
        chosen = f["to_solver"][:].astype(bool)
    units = len(truth) * max(frames, 1)  # (sample, frame) pairs
    errors = relative_l2(merged.reshape(units, -1), truth.reshape(units, -1)).reshape(len(truth), -1).max(axis=1)
    kept = errors[~chosen]
    return {"tolerance": tolerance, "to_solver": report.to_solver, "flagged": report.flagged,
            "share": report.to_solver / len(truth), "seconds": report.seconds,
            "speedup": solve_seconds / report.seconds,
            "max_true_error": float(kept.max()) if len(kept) else None,
            "within_tolerance": float((kept <= tolerance).mean()) if len(kept) else None,
            "max_error_solver_answers": float(errors[chosen].max()) if chosen.any() else None,
            "report_all_solver_seconds": report.all_solver_seconds,
            "report_all_solver_measured": report.all_solver_measured, "loadavg": list(os.getloadavg())}


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
    rows = [{"factor": factor, **fallback_row(run, source, truth, frames if trajectory else 0,
                                              float(factor * bound.max()), folder / f"{name}_{factor}.h5",
                                              solve_seconds)} for factor in factors]
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


def solved_file(forecaster: Forecaster, path: str, folder: Path) -> dict[str, Any]:
    """Every sample of ``path`` given as ``predict --tolerance`` reads it, solved whole by the fallback's solver
    call (one chunk holds them all, as the fallback solves them), timed: the truth (a forecast's: the stored frames
    after the given ones), the forecast's frames (0: operator data), the seconds and the solve's largest relative
    L2 error against the stored truth."""
    with prediction(forecaster, path, folder / "unwritten.h5") as job:
        inputs, frames = job.inputs, job.frames
        given = torch.from_numpy(np.require(inputs.read(0, inputs.count), np.float32, ["C", "W"]))
        began = time.perf_counter()
        solved = solve_samples(inputs, given, frames)
        seconds = time.perf_counter() - began
        if frames:
            first = len(inputs.times) - 1 + inputs.stride  # the stored frame of the first forecast frame
            truth = read_fields(path, slice(None))[:, first:first + inputs.stride * frames:inputs.stride]
            if truth.shape[1] != frames:
                raise SystemExit(f"{path}: {truth.shape[1]} stored frames after the given ones, not {frames}")
        else:
            truth = read_arrays(path, slice(None))[1]
    return {"truth": truth, "frames": frames, "seconds": seconds,
            "solver_max_error_vs_stored": float(relative_l2(solved, truth).max())}


def calibrated_case(run: str, files: dict[str, str], factors: list[float], folder: Path) -> dict[str, Any]:
    """The fallback of a calibrated run (its own calibration, as ``predict`` uses it) on each of ``files`` (label
    -> path; the first drawn like the calibration data) for every score the calibration offers, at ``factors``
    times its plain bound (the ``relative_l2`` score's at :data:`COVERAGE`, largest frame)."""
    forecaster = open_forecaster(run, "cpu", calibrated=True)
    calibration = forecaster.calibration
    group = calibration.group()
    plain = calibration.quantiles(COVERAGE)
    described, rows = {}, []
    for label, path in files.items():
        solved = solved_file(forecaster, path, folder)
        described[label] = {"path": path, "samples": len(solved["truth"]), "frames": solved["frames"],
                            "solve_all_seconds": solved["seconds"],
                            "solver_max_error_vs_stored": solved["solver_max_error_vs_stored"],
                            "loadavg": list(os.getloadavg())}
        for factor in factors:
            # in float32, as the bounds are written: a bound equal to the tolerance is not over it
            tolerance = float(np.float32(factor * plain.max()))
            for score in group.offered:
                row = fallback_row(run, path, solved["truth"], solved["frames"], tolerance, folder / "fallback.h5",
                                   solved["seconds"], score)
                rows.append({"data": label, "score": score, "factor": factor, **row})
                print(json.dumps(rows[-1]))
    return {"run": run, "kind": forecaster.kind, "calibration_samples": group.samples,
            "calibration_score": group.score, "offered": list(group.offered),
            "start": forecaster.given_frames()["start"], "plain_bound": plain.tolist(), "files": described,
            "rows": rows}


def shift_markdown(result: dict[str, Any]) -> str:
    """The fallback table of each calibrated case, per file, tolerance and score."""
    lines = ["# The solver where the bound fails, with the run's own calibration, in distribution and shifted", "",
             f"{describe_machine(result['machine'])}; {describe_load(result)} (the last invocation).", "",
             result["note"], ""]
    for name, c in result["cases"].items():
        lines += [f"## {name}", "", f"Command: `{c['command']}`", "",
                  f"{describe_machine(c['machine'])}; {describe_load(c)}.", "",
                  f"Run {c['run']} ({c['kind']}), its own calibration: {c['calibration_samples']} samples, scores "
                  f"offered {', '.join(c['offered'])}, chosen {c['calibration_score']}; plain bound at "
                  f"{result['coverage']} (largest frame) {max(c['plain_bound']):.4f}.", "",
                  *table_head("data", "samples x frames", "solving all (measured)", "solver vs stored truth",
                              "load average after"),
                  *[f"| {label} | {d['samples']} x {max(d['frames'], 1)} | {d['solve_all_seconds']:.2f} s | "
                    f"{d['solver_max_error_vs_stored']:.1e} | " + joined_loads(d["loadavg"]) + " |"
                    for label, d in c["files"].items()], "",
                  *table_head("data", "score", "tolerance (x plain bound)", "sent to the solver", "of them flagged",
                              "fallback wall time", "solving all: in the same call / once per file",
                              "speed-up: over the same call's / over once per file",
                              "largest true error of the surrogate's answers", "surrogate's answers within tolerance",
                              "load average after")]
        for r in c["rows"]:
            worst = "none answered" if r["max_true_error"] is None else f"{r['max_true_error']:.4f}"
            within = "-" if r["within_tolerance"] is None else f"{r['within_tolerance']:.3f}"
            chosen = " (chosen)" if r["score"] == c["calibration_score"] else ""
            data = c["files"][r["data"]]
            lines.append(f"| {r['data']} | {r['score']}{chosen} | {r['tolerance']:.4f} ({r['factor']:g}x) | "
                         f"{r['to_solver']} of {data['samples']} ({r['share']:.1%}) | "
                         f"{r['flagged']} | {r['seconds']:.2f} s | {r['report_all_solver_seconds']:.2f} s / "
                         f"{data['solve_all_seconds']:.2f} s | "
                         f"{r['report_all_solver_seconds'] / r['seconds']:.2f}x / {r['speedup']:.2f}x | {worst} | "
                         f"{within} | "
                         + joined_loads(r["loadavg"]) + " |")
        lines.append("")
    return page(lines)


SHIFT_NOTE = ("Each run answers with its own calibration, as `opformer predict --tolerance` does (nothing "
              "recalibrated), at coverage 0.9, for every per-sample score the calibration offers: `relative_l2` (one "
              "bound for every input: the fallback before the physics scores), `roughness` and the physics "
              "`residual` (where offered); `--tolerance` itself uses the chosen one. Tolerances are multiples of the "
              "plain bound (the `relative_l2` score's at 0.9, largest frame), in float32 as the bounds are written "
              "(at 1x an operator run's plain bound equals the tolerance, which is not over it). A sample goes to "
              "the solver when its "
              "bound (a forecast's joint bound, at any frame) exceeds the tolerance or its input is flagged as "
              "unlike the calibration data. Forecasts are given the run's t_in frames from the calibration's first "
              "frame and answered over its validated frames; their error is the largest over the frames. Solving "
              "all: every sample of the file solved by the fallback's own solver call from the same given frames, "
              "one thread, measured: once per file before its fallbacks, and by each fallback call itself (its "
              "report's time of solving every sample: the solves of the call where it sent every sample, else the "
              "whole chunk solved again after the timed call; one chunk holds every sample, so both are measured "
              "as the fallback solves them, never extrapolated). The same call's is taken at the same load, so it "
              "is the fairer speed-up on this shared 2-core CPU, whose load drifts (the load averages beside). "
              "Fallback wall time: the whole `predict_with_fallback` call (loading the run and calibration, "
              "predictions, bounds, the solves of the samples sent to the solver, writing the output); speed-up: "
              "solving all over it.")


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
              *[f"| {name} | `{c['command']}` | " + joined_loads(c["loadavg"]) + " |"
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
    parser.add_argument("--calibrated",
                        help="NAME=RUN:FILE: the run's own calibration on FILE (drawn like the calibration data) and "
                             "on each --shifted file, every score it offers (writes fallback_shift.json)")
    parser.add_argument("--shifted", action="append", default=[],
                        help="with --calibrated: LABEL=FILE of shifted physics (repeatable)")
    parser.add_argument("--factors", default="0.5,1.5", help="tolerances as multiples of the largest bound at 0.9")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if bool(args.calibrated) == bool(args.case) or (args.shifted and not args.calibrated):
        parser.error("give --case (repeatable) or --calibrated (with any --shifted), not both")
    load_before = os.getloadavg()
    torch.set_num_threads(1)
    factors = [float(v) for v in args.factors.split(",")]
    with tempfile.TemporaryDirectory(prefix="trust_fallback_") as tmp:
        if args.calibrated:
            name, rest = args.calibrated.split("=", 1)
            run, path = rest.split(":", 1)
            files = {IN_DISTRIBUTION: path, **dict(text.split("=", 1) for text in args.shifted)}
            cases = earlier(args.results, SHIFT_NAME).get("cases", {})
            cases[name] = {**calibrated_case(run, files, factors, Path(tmp)), "command": command(),
                           "machine": machine("numpy", "scipy"), "loadavg_before": list(load_before),
                           "loadavg_after": list(os.getloadavg())}
            write_results(args.results, SHIFT_NAME, {"note": SHIFT_NOTE, "coverage": COVERAGE, "cases": cases},
                          shift_markdown, load_before, "numpy", "scipy")
            return
        cases = earlier(args.results, NAME).get("cases", {})  # cases measured by earlier invocations are kept
        for text in args.case:
            name, rest = text.split("=", 1)
            run, held, *shifted = rest.split(":")
            cases[name] = {**case(name, run, held, factors, args.repeats, Path(tmp), *shifted), "command": command(),
                           "loadavg": list(os.getloadavg())}
            print(json.dumps({name: cases[name]["tolerances"]}, indent=1))
    write_results(args.results, NAME, {"note": NOTE, "cases": cases}, markdown, load_before, "numpy", "scipy")


if __name__ == "__main__":
    main()
