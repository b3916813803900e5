"""``opformer calibrate``: conformal error bounds for a trained run, stored in its directory."""

from __future__ import annotations

import argparse

from opformer.cli.options import DEVICE_HELP, AddCommand
from opformer.errors import ConfigError

EXAMPLES = {
    "calibrate": "opformer calibrate runs/gt --coverage 0.8,0.9,0.95",
}


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
    from opformer.trust.calibration import CALIBRATION, calibrate_run, format_calibration

    coverages = parse_coverages(args.coverage)
    calibration = calibrate_run(args.run, args.data, split=args.split, frames=args.frames, device=args.device,
                                batch_size=args.batch_size, resolution=args.resolution)
    where = ", ".join(d["path"] for d in calibration.source["data"])
    print(f"{args.run}: calibrated on {where} ({calibration.source['split']} split); bounds on the relative L2 error:")
    print(format_calibration(calibration, coverages))
    print(f"wrote {args.run}/{CALIBRATION}")
    return 0


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
    p.add_argument("--coverage", default="0.8,0.9,0.95", help="levels whose bounds are printed (default 0.8,0.9,0.95)")
    p.add_argument("--batch-size", type=int, help="samples per model call (default: the run's eval_batch_size)")
    p.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default auto)")
    p.set_defaults(func=cmd_calibrate)
