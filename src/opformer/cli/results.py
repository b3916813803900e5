"""``opformer evaluate``, ``plot`` and ``predict``: what a trained run gets right, drawn, and applied to new
inputs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from opformer.cli.options import DEVICE_HELP, AddCommand, output_path, parse_resolutions, writable_folder
from opformer.errors import ConfigError

EXAMPLES = {
    "evaluate": "opformer evaluate runs/gt --data data/burgers.h5 --resolutions 512,2048,8192 --json gt.json\n"
                "  opformer evaluate runs/well_fno --metrics well --windows 6:12,13:30 --frames 30",
    "plot": "opformer plot runs/gt --data data/burgers.h5",
    "predict": "opformer predict runs/gt --input new_inputs.h5 --output predictions.h5\n"
               "  opformer predict runs/ns --input last_frames.npy --output forecast.npy --frames 20\n"
               "  opformer predict runs/gt --input new_inputs.h5 --output predictions.h5 --tolerance 0.01",
}


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``opformer evaluate RUN``: print the error table (and write it as JSON)."""
    from opformer.eval.run_evaluation import evaluate
    from opformer.io import write_atomic

    json_path = output_path("--json", args.json)
    if args.frames is not None and args.frames < 1:
        raise ConfigError(f"--frames {args.frames}: expected at least 1 frame")
    windows = _windows(args) if args.metrics == "well" else None
    if windows is None and args.windows is not None:
        raise ConfigError("--windows: only with --metrics well")
    evaluation = evaluate(args.run, args.data,
                          resolutions=parse_resolutions(args.resolutions) if args.resolutions else None,
                          split=args.split, frames=args.frames, paper_lengths=args.paper_lengths,
                          well_windows=windows, input_noise=args.input_noise, device=args.device)
    print(evaluation.table)
    for note in evaluation.notes:
        print(f"note: {note}")
    if json_path:
        write_atomic(json_path, json.dumps({"run": str(args.run), "data": str(evaluation.data),
                                            "split": evaluation.split, "results": evaluation.rows}, indent=2) + "\n")
    return 0


def _windows(args: argparse.Namespace) -> tuple[tuple[int, int], ...]:
    """``--windows`` (default The Well's 6:12,13:30) as (first, stop) pairs of predicted frames."""
    from opformer.eval.metrics import WELL_WINDOWS, parse_windows

    if args.windows is None:
        return WELL_WINDOWS
    try:
        return parse_windows(args.windows)
    except ValueError:
        raise ConfigError(f"--windows {args.windows}: expected START:STOP[,START:STOP...], 0 <= START < STOP "
                          "(predicted frames START..STOP-1, 0 the first predicted)") from None


def cmd_plot(args: argparse.Namespace) -> int:
    """``opformer plot RUN``: loss curves and predictions as PNG files."""
    from opformer.eval.run_plots import check_bands, plot_run
    from opformer.runs import Run

    if Path(args.run).is_file():  # a mesh data file: its samples, meshes and weights
        from opformer.eval.mesh_plots import plot_mesh_file

        out = args.out or str(Path(args.run).parent)
        writable_folder("--out", out, Path(out), create=True)
        for path in plot_mesh_file(args.run, out, samples=args.samples):
            print(f"wrote {path}")
        return 0
    out = args.out or args.run  # the plots go into the run directory without --out
    writable_folder("--out", out, Path(out), create=True)
    run, bounds = Run(args.run), None
    if args.coverage is not None:
        from opformer.trust.conformal import check_coverage
        from opformer.trust.storage import load_calibration

        coverage = check_coverage(args.coverage, "--coverage")
        check_bands(run)
        calibration = load_calibration(run)  # checked against the run's checkpoint
        chosen = calibration.group().score
        # the plotted rollouts start at the first frame, with no frames before it for a backtest
        bounds = calibration.at(coverage, score="relative_l2" if chosen == "backtest" else None)
    for path in plot_run(run, args.data, out_dir=args.out, samples=args.samples, device=args.device, bounds=bounds,
                         bound_label=f"bound at coverage {args.coverage:g}" if bounds else "bound"):
        print(f"wrote {path}")
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    """``opformer predict RUN``: the surrogate applied to every sample of a file (trajectory runs: a forecast)."""
    import warnings

    from opformer.serve.predict import PositionWarning, predict_file

    output_path("--output", args.output, force=args.force, folders=True)
    if _is_mesh_run(args.run):
        return _predict_mesh(args)
    if args.tolerance is not None:
        from opformer.serve.fallback import REPORT_SUFFIX, predict_with_fallback

        coverage = 0.9 if args.coverage is None else args.coverage
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PositionWarning)
            report = predict_with_fallback(args.run, args.input, args.output, args.tolerance, coverage,
                                           frames=args.frames, batch_size=args.batch_size, device=args.device,
                                           member=args.member, score=args.score, start=args.start)
        _notes(caught)
        print(report.text())
        print(f"wrote predictions to {args.output} with error bounds at coverage {coverage:g}; the report to "
              f"{args.output}{REPORT_SUFFIX}")
        return 0
    if args.joint and args.coverage is None:
        raise ConfigError("--joint: bounds at a coverage; give --coverage C too")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PositionWarning)
        path = predict_file(args.run, args.input, args.output, frames=args.frames, batch_size=args.batch_size,
                            device=args.device, member=args.member, coverage=args.coverage, joint=args.joint,
                            start=args.start, score=args.score)
    _notes(caught)
    print(f"wrote predictions to {path}"
          + (f" with error bounds at coverage {args.coverage:g}" if args.coverage is not None else ""))
    return 0


def _is_mesh_run(path: str) -> bool:
    """Whether ``path`` is a run directory of a mesh run (errors about the run are left to the command)."""
    from opformer.errors import OpformerError
    from opformer.kinds import MESH
    from opformer.runs import Run

    try:
        return Run(path).kind == MESH
    except OpformerError:
        return False


def _predict_mesh(args: argparse.Namespace) -> int:
    """``opformer predict`` on a mesh run: a mesh file in, a mesh file of predicted fields out."""
    from opformer.runs import Run
    from opformer.serve.mesh_predict import predict_mesh_file

    grid = {"--frames": args.frames, "--member": args.member, "--start": args.start, "--score": args.score,
            "--joint": args.joint or None, "--tolerance": args.tolerance}
    for option, value in grid.items():
        if value is not None:
            raise ConfigError(f"{option}: not for a mesh run ({args.run} predicts each sample of a mesh file)")
    path = predict_mesh_file(Run(args.run), args.input, args.output, batch_size=args.batch_size,
                             device=args.device, coverage=args.coverage)
    print(f"wrote predictions to {path}"
          + (f" with error bounds at coverage {args.coverage:g}" if args.coverage is not None else ""))
    return 0


def _notes(caught: list) -> None:
    """Print the prediction's notes (:class:`~opformer.serve.predict.PositionWarning`); other warnings go on as
    they were raised."""
    import warnings

    from opformer.serve.predict import PositionWarning

    for record in caught:
        if issubclass(record.category, PositionWarning):
            print(f"note: {record.message}")
        else:
            warnings.showwarning(record.message, record.category, record.filename, record.lineno)


def add_parsers(add: AddCommand) -> None:
    """The parsers of ``evaluate``, ``plot`` and ``predict``."""
    p = add("evaluate", "Relative L2 error of a trained run at one or more resolutions.")
    p.add_argument("run", help="run directory")
    p.add_argument("--data", help="HDF5 data file (default: the run's training data)")
    p.add_argument("--resolutions", "--resolution", dest="resolutions",
                   help="comma-separated grid sizes, e.g. 512,2048,8192 (default: the run's training grid; "
                        "--resolution is the same option)")
    p.add_argument("--split", choices=["train", "val", "test", "all"],
                   help="samples to use (run's splits; 'all' for a separate file); default test, all for a run of "
                        "imported weights")
    p.add_argument("--frames", type=int,
                   help="frames to roll out after the given ones (trajectory data; default: the run's eval_frames, "
                        "else all)")
    p.add_argument("--paper-lengths", action="store_true",
                   help="a mixture run: roll out each member for the DPOT paper's number of frames")
    p.add_argument("--metrics", choices=["l2", "well"], default="l2",
                   help="l2: relative L2 (default); well: also The Well's VRMSE and NRMSE per channel over rollout "
                        "windows (trajectory data)")
    p.add_argument("--windows", help="with --metrics well: windows of predicted frames START:STOP,... (0 the first "
                                     "predicted frame; default 6:12,13:30, The Well's)")
    p.add_argument("--input-noise", type=float, metavar="EPS",
                   help="operator data: evaluate with input noise EPS (on the normalized inputs) instead of the "
                        "run's training level, e.g. 0.02 for a run trained at 0.01")
    p.add_argument("--json", help="also write the results to this JSON file")
    p.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default auto)")
    p.set_defaults(func=cmd_evaluate)

    p = add("plot", "Loss curves and predicted vs true solutions as PNG files.")
    p.add_argument("run", help="run directory, or a mesh data file (its samples' fields on their triangulation "
                   "and their meshes with the quadrature weights)")
    p.add_argument("--data", help="data file for the prediction plot (default: the run's training data)")
    p.add_argument("--out", help="output folder (default: the run directory)")
    p.add_argument("--samples", type=int, default=4, help="test samples to plot")
    p.add_argument("--coverage", type=float,
                   help="draw the calibrated band at this level, e.g. 0.9 (after `opformer calibrate RUN`): around 1D "
                        "predictions, and each frame's bound beside the rollout errors")
    p.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default auto)")
    p.set_defaults(func=cmd_plot)

    p = add("predict", "Apply a trained surrogate to every sample of a file: predictions of an operator run, "
                       "forecasts of a trajectory run.")
    p.add_argument("run", help="run directory")
    p.add_argument("--input", required=True,
                   help="opformer HDF5 file (inputs; trajectories: the given frames, the forecast continues after the "
                        "last of them), or a .npy/.npz array on the run's grid and channels ((N, *grid, C); "
                        "trajectories (N, T, *grid, C); one channel may leave out C)")
    p.add_argument("--output", required=True,
                   help="where to write the predictions: .npy, .npz (operator runs: x the inputs, y the "
                        "predictions, truth the input's true targets where it holds them; trajectories: fields, "
                        "times), else opformer HDF5 (trajectories: the forecast frames with the input's attributes, "
                        "times continued)")
    p.add_argument("--frames", type=int,
                   help="trajectory runs: frames to roll out after the given ones (default: as many as the run was "
                        "validated on)")
    p.add_argument("--member",
                   help="a mixture run: the member the input's samples belong to, by name (its time stride, rollout "
                        "length and calibration; needed for an array, found from the file for a member's own file)")
    p.add_argument("--coverage", type=float,
                   help="also write calibrated error bounds at this level, e.g. 0.9 (after `opformer calibrate RUN`): "
                        "bound_relative_l2 per sample (and frame), band_half_width beside the predictions, flagged "
                        "(1: input unlike the calibration data, bounds not guaranteed); .npz or HDF5 output")
    p.add_argument("--start", type=int,
                   help="trajectory runs: forecast after the t_in context frames from this stored frame (default: "
                        "the last t_in frames of each input are the context); with --coverage, a context at another "
                        "frame than the calibration's (`opformer calibrate --start`) flags every sample")
    p.add_argument("--score",
                   help="with --coverage or --tolerance: the per-sample score of the bounds, one the calibration "
                        "offers (relative_l2, roughness, residual, backtest; default: its choice on the validation "
                        "split)")
    p.add_argument("--joint", action="store_true",
                   help="trajectory runs: bounds on each forecast's relative L2 error that hold for all its calibrated "
                        "frames at once (wider than the per-frame ones; --tolerance always uses them)")
    p.add_argument("--tolerance", type=float,
                   help="relative L2 error the answers must keep (at --coverage, default 0.9): samples whose bound "
                        "exceeds it or is not guaranteed are solved again by the built-in solver (data made by "
                        "`opformer generate`; else only listed) and marked to_solver; report in OUTPUT.fallback.json")
    p.add_argument("--force", action="store_true", help="replace --output if it exists")
    p.add_argument("--batch-size", type=int, help="samples per model call (default: the run's eval_batch_size)")
    p.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default auto)")
    p.set_defaults(func=cmd_predict)
