"""The ``opformer`` command. Every sub-command calls the same functions as the Python API."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from opformer import __version__
from opformer.errors import ConfigError, OpformerError

EXAMPLES = {
    "generate": "opformer generate burgers --samples 1224 --resolution 8192 --out data/burgers.h5\n"
                "  opformer generate darcy --samples 1224 --resolution 421 --out data/darcy_421.h5\n"
                "  opformer generate navier-stokes --samples 1200 --nu 1e-3 --out data/ns_1e-3.h5",
    "convert": "opformer convert fno-mat ns_V1e-3_N5000_T50.mat --out data/ns_1e-3.h5 --samples 1200",
    "train": "opformer train configs/burgers/gt.yaml --out runs/gt --set data.path=data/burgers.h5\n"
             "  opformer train --resume runs/gt\n"
             "  opformer train configs/burgers/gt.yaml --out runs/gt2 --nproc 2",
    "evaluate": "opformer evaluate runs/gt --data data/burgers.h5 --resolutions 512,2048,8192 --json gt.json",
    "plot": "opformer plot runs/gt --data data/burgers.h5",
    "predict": "opformer predict runs/gt --input new_inputs.h5 --output predictions.h5",
    "quickstart": "opformer quickstart --out runs/quickstart",
    "bench": "opformer bench --models gt_burgers,fno1d_burgers --resolutions 512,2048,8192 --batch 4 --mode train "
             "--peers --json bench.json --markdown bench.md --plot bench.png\n"
             "  opformer bench --solver burgers --resolutions 512,2048 --mode forward",
}

#: What every --device takes (opformer.runtime.resolve_device).
DEVICE_HELP = "auto (CUDA if available, else CPU), cpu, cuda or cuda:N"


def _parse_resolutions(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"--resolutions {text!r}: expected comma-separated integers, e.g. 512,2048") from None
    if not values or min(values) < 2:
        raise ConfigError(f"--resolutions {text!r}: expected grid sizes of at least 2 points")
    return values


def _progress_bar(total: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="sample", disable=None)


def cmd_generate(args: argparse.Namespace) -> int:
    from opformer.data.generate import generate_file
    from opformer.pde.registry import FLAGS, lookup

    _output_path("--out", args.out, force=args.force, folders=True)
    flags = {name: getattr(args, name) for name in FLAGS}
    resolution = lookup(args.pde).defaults["resolution"] if args.resolution is None else args.resolution
    with _progress_bar(args.samples, f"{args.pde} n={resolution}") as bar:
        path = generate_file(args.pde, args.out, args.samples, seed=args.seed, progress=bar.update, **flags)
    print(f"wrote {args.samples} samples to {path}")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from opformer.data.convert import convert_file
    from opformer.data.readers.registry import OPTIONS

    _output_path("--out", args.out, force=args.force, folders=True)
    path, count = convert_file(args.format, args.src, args.out, samples=args.samples,
                               **{name: getattr(args, name) for name in OPTIONS})
    print(f"wrote {count} samples to {path}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from opformer.config import apply_overrides, config_from_dict, config_to_dict, load_config
    from opformer.runs import load_run_config
    from opformer.runtime import resolve_device
    from opformer.train.trainer import train

    if args.resume:
        run_dir = Path(args.resume)
        config = load_run_config(run_dir)
        if args.config or any(not item.startswith("train.epochs=") for item in args.set):
            raise ConfigError("--resume continues a run with its stored config; give no CONFIG, and --set only "
                              "train.epochs=N to extend it")
        if args.set:
            config = config_from_dict(apply_overrides(config_to_dict(config), args.set))
    else:
        if not args.config or not args.out:
            raise ConfigError("train needs CONFIG and --out RUN (or --resume RUN)")
        run_dir = Path(args.out)
        if (run_dir / "config.yaml").exists():
            raise ConfigError(f"--out {run_dir}: already holds a run; use --resume {run_dir} or another --out")
        _writable_folder("--out", args.out, run_dir, create=True)
        config = load_config(args.config, args.set)
    if args.device is not None:
        resolve_device(args.device)  # a device this machine lacks is refused before any data is read
        config.train.device = args.device
    if args.nproc is not None and args.nproc < 1:
        raise ConfigError(f"--nproc {args.nproc}: expected a number of processes of at least 1")
    if args.nproc and args.nproc > 1:
        return _launch_processes(args, config.train.batch_size)
    summary = train(config, run_dir, resume=bool(args.resume))
    if int(os.environ.get("RANK", "0")) == 0:  # the main process of a data-parallel run speaks for it
        print(f"best validation relative L2 {summary['best_val_relative_l2']:.4e} at epoch {summary['best_epoch']} "
              f"({summary['parameters']:,} parameters); run in {run_dir}")
    return 0


def _launch_processes(args: argparse.Namespace, batch_size: int) -> int:
    """``opformer train --nproc N``: the same command (without ``--nproc``) in N processes started by torchrun's
    launcher on this machine. A failed process has printed a line naming its rank; this returns its exit code."""
    import logging

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run as torchrun

    from opformer.train.distributed import check_batch

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ConfigError("--nproc: this process was already started by torchrun; give --nproc to one of them")
    check_batch(batch_size, args.nproc)
    argv = ["train", *([args.config] if args.config else []), *(["--out", args.out] if args.out else []),
            *[arg for value in args.set for arg in ("--set", value)],
            *(["--resume", args.resume] if args.resume else []), *(["--device", args.device] if args.device else [])]
    for name in list(logging.root.manager.loggerDict):  # the launcher's own lines (each process says what failed)
        if name.startswith("torch.distributed.elastic"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    launch = get_args_parser().parse_args(["--standalone", "--nproc-per-node", str(args.nproc), "--module",
                                           "opformer", *argv])
    try:
        torchrun(launch)
    except ChildFailedError as exc:
        return exc.get_first_failure()[1].exitcode or 1
    except SignalException as exc:  # the launcher has stopped the processes
        raise KeyboardInterrupt from exc
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from opformer.eval.evaluate import evaluate_run, format_table
    from opformer.eval.members import evaluate_mixture, format_mixture_table
    from opformer.io import write_atomic

    from opformer.runs import load_run_config

    json_path = _output_path("--json", args.json)
    data, resolutions = args.data, _parse_resolutions(args.resolutions) if args.resolutions else None
    if args.frames is not None and args.frames < 1:
        raise ConfigError(f"--frames {args.frames}: expected at least 1 frame")
    stored = load_run_config(args.run).data
    if stored.mixture and data is None and resolutions is None:
        rows = evaluate_mixture(args.run, split=args.split, frames=args.frames, paper_lengths=args.paper_lengths,
                                device=args.device)
        print(format_mixture_table(rows, f"{args.run}: each member of its mixture ({args.split} split)"))
    else:
        if args.paper_lengths:
            raise ConfigError("--paper-lengths: only for runs trained on a mixture (evaluated without --data)")
        data, resolutions = data or stored.path, resolutions or [stored.resolution]
        rows = evaluate_run(args.run, data, resolutions, split=args.split, device=args.device, frames=args.frames)
        print(format_table(rows, f"{args.run} on {data} ({args.split} split)"))
    if json_path:
        write_atomic(json_path, json.dumps({"run": str(args.run), "data": str(data), "split": args.split,
                                            "results": rows}, indent=2) + "\n")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from opformer.eval.report import plot_run

    out = args.out or args.run  # the plots go into the run directory without --out
    _writable_folder("--out", out, Path(out), create=True)
    for path in plot_run(args.run, args.data, out_dir=args.out, samples=args.samples, device=args.device):
        print(f"wrote {path}")
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from opformer.eval.report import predict_file

    _output_path("--output", args.output, force=args.force, folders=True)
    path = predict_file(args.run, args.input, args.output, batch_size=args.batch_size, device=args.device)
    print(f"wrote predictions to {path}")
    return 0


def cmd_quickstart(args: argparse.Namespace) -> int:
    from opformer.quickstart import quickstart

    quickstart(args.out, device=args.device)
    return 0


def _parse_names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _output_path(option: str, value: str | None, *, force: bool = True, folders: bool = False) -> Path | None:
    """``value`` as a file that can be written, checked before any work: not a directory, not an existing file
    unless ``force``, its folder writable (with ``folders``, the nearest existing one: the rest is created)."""
    if value is None:
        return None
    path = Path(value)
    if path.is_dir():
        raise ConfigError(f"{option} {value}: cannot write there (it is a directory)")
    if path.exists() and not force:
        raise ConfigError(f"{option} {value}: already exists; add --force to replace it")
    _writable_folder(option, value, path.parent, folders)
    return path


def _writable_folder(option: str, value: str, folder: Path, create: bool) -> None:
    """``folder`` (with ``create``: its nearest existing ancestor) must be a writable directory."""
    folder = folder.absolute()
    while create and not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:  # a real file, not os.access: root passes that check on a read-only mount
        fd, probe = tempfile.mkstemp(prefix=".opformer-write-test.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError:
        raise ConfigError(f"{option} {value}: cannot write there (missing or read-only folder {folder})") from None


def cmd_bench(args: argparse.Namespace) -> int:
    from opformer.bench.report import plot_bench, to_markdown
    from opformer.bench.solver_timing import solver_case, solver_comparison
    from opformer.bench.sweep import BenchSettings, run_bench
    from opformer.runtime import resolve_device
    from opformer.io import write_atomic

    try:
        resolutions = [int(v) for v in args.resolutions.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"--resolutions {args.resolutions!r}: expected comma-separated integers") from None
    outputs = {name: _output_path(f"--{name}", getattr(args, name)) for name in ("json", "markdown", "plot")}
    models = _parse_names(args.models or "gt_burgers,ft_burgers,st_burgers,lt_burgers,fno1d_burgers")
    settings = BenchSettings(models=models, resolutions=resolutions, batch=args.batch,
                             mode=args.mode, repeats=args.repeats, warmup=args.warmup, peers=args.peers,
                             device=str(resolve_device(args.device)))
    if args.threads is not None:
        settings.threads = args.threads
    if args.time_budget is not None:
        settings.time_budget = args.time_budget
    if args.memory_budget is not None:
        settings.memory_budget = args.memory_budget * 1024**3
    settings.validate()
    if args.solver is not None:
        solver_case(args.solver)
    report = solver = None
    if args.solver is None or args.models is not None:
        report = run_bench(settings)
    if args.solver is not None:
        solver = solver_comparison(settings, args.solver)
        if report is None:
            report = {"settings": vars(settings), "machine": {}, "cells": [], "slopes": {}}
        report["solver"] = solver
    command = "opformer bench " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["bench"] else ""
    report["command"] = command
    if report["cells"]:
        print(to_markdown(report, command))
    if outputs["json"]:
        write_atomic(outputs["json"], json.dumps(report, indent=2) + "\n")
    if outputs["markdown"]:
        write_atomic(outputs["markdown"], to_markdown(report, command))
    if outputs["plot"]:
        print(f"wrote {plot_bench(report, outputs['plot'])}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``opformer`` command."""
    parser = argparse.ArgumentParser(
        prog="opformer", description="Transformer neural operators: generate PDE data, train, evaluate, plot.",
        epilog="examples:\n  " + "\n  ".join(EXAMPLES.values()), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"opformer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, epilog="example:\n  " + EXAMPLES[name],
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    from opformer.pde.registry import FLAGS, PDES, dashed, flag_help

    p = add("generate", "Generate a data set with a built-in numerical solver.")
    p.add_argument("pde", choices=sorted(PDES), help="which PDE: " + "; ".join(
        f"{name}, {pde.summary}" for name, pde in PDES.items()))
    p.add_argument("--samples", type=int, required=True, help="number of samples")
    p.add_argument("--out", required=True, help="HDF5 file to write")
    p.add_argument("--seed", type=int, default=0, help="random seed of the initial data")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    for name, flag in FLAGS.items():
        p.add_argument(dashed(name), type=flag.type, default=None, help=flag_help(name))
    p.set_defaults(func=cmd_generate)

    from opformer.data.readers.registry import OPTIONS, READERS, option_help

    p = add("convert", "Convert a published data set to opformer's HDF5 format.")
    p.add_argument("format", choices=sorted(READERS), help="the file's layout: " + "; ".join(
        f"{name}, {reader.summary}" for name, reader in READERS.items()))
    p.add_argument("src", help="the published file")
    p.add_argument("--out", required=True, help="HDF5 file to write")
    p.add_argument("--samples", type=int, default=None, help="convert the first N samples (default: all)")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    for name in OPTIONS:
        p.add_argument(f"--{name}", default=None, help=option_help(name))
    p.set_defaults(func=cmd_convert)

    p = add("train", "Train a model from a YAML config into a run directory (or resume one).")
    p.add_argument("config", nargs="?", help="YAML run config")
    p.add_argument("--out", help="run directory to create")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. train.epochs=10 (repeatable)")
    p.add_argument("--resume", metavar="RUN", help="continue the run in RUN from its last checkpoint")
    p.add_argument("--device", default=None, help=f"{DEVICE_HELP} (default: the config's train.device, auto)")
    p.add_argument("--nproc", type=int, default=None, metavar="N",
                   help="data-parallel processes on this machine, started with torchrun (train.batch_size is the "
                        "global batch; see docs/training.md for several machines)")
    p.set_defaults(func=cmd_train)

    p = add("evaluate", "Relative L2 error of a trained run at one or more resolutions.")
    p.add_argument("run", help="run directory")
    p.add_argument("--data", help="HDF5 data file (default: the run's training data)")
    p.add_argument("--resolutions", "--resolution", dest="resolutions",
                   help="comma-separated grid sizes, e.g. 512,2048,8192 (default: the run's training grid; "
                        "--resolution is the same option)")
    p.add_argument("--split", default="test", choices=["train", "val", "test", "all"],
                   help="samples to use (run's splits; 'all' for a separate file); default test")
    p.add_argument("--frames", type=int,
                   help="frames to roll out after the given ones (trajectory data; default: the run's eval_frames, "
                        "else all)")
    p.add_argument("--paper-lengths", action="store_true",
                   help="a mixture run: roll out each member for the DPOT paper's number of frames")
    p.add_argument("--json", help="also write the results to this JSON file")
    p.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default auto)")
    p.set_defaults(func=cmd_evaluate)

    p = add("plot", "Loss curves and predicted vs true solutions as PNG files.")
    p.add_argument("run", help="run directory")
    p.add_argument("--data", help="data file for the prediction plot (default: the run's training data)")
    p.add_argument("--out", help="output folder (default: the run directory)")
    p.add_argument("--samples", type=int, default=4, help="test samples to plot")
    p.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default auto)")
    p.set_defaults(func=cmd_plot)

    p = add("predict", "Apply a trained surrogate to every input of a data file.")
    p.add_argument("run", help="run directory")
    p.add_argument("--input", required=True, help="HDF5 data file with inputs")
    p.add_argument("--output", required=True, help="HDF5 file to write the predictions to")
    p.add_argument("--force", action="store_true", help="replace --output if it exists")
    p.add_argument("--batch-size", type=int, default=32, help="inputs per model call (default 32)")
    p.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default auto)")
    p.set_defaults(func=cmd_predict)

    p = add("quickstart", "Generate a small Burgers set, train a Galerkin Transformer, evaluate and plot.")
    p.add_argument("--out", default="runs/quickstart", help="folder for data, run and plots")
    p.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default auto)")
    p.set_defaults(func=cmd_quickstart)

    p = add("bench", "Time, memory and FLOPs per step of models across resolutions (peers side by side).")
    p.add_argument("--models", default=None, metavar="PRESETS",
                   help="comma-separated model presets (default gt_burgers,ft_burgers,st_burgers,lt_burgers,"
                        "fno1d_burgers)")
    p.add_argument("--resolutions", default="512,2048,8192", help="comma-separated grid sizes per axis")
    p.add_argument("--batch", type=int, default=4, help="samples per step (default 4)")
    p.add_argument("--mode", default="train", choices=["forward", "train"],
                   help="forward: inference; train: forward + backward + Adam step (default)")
    p.add_argument("--repeats", type=int, default=10, help="timed steps per cell (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's default)")
    p.add_argument("--device", default="cpu", help=f"{DEVICE_HELP} (default cpu: timings are per device)")
    p.add_argument("--time-budget", type=float, default=None,
                   help="seconds per cell; longer cells are skipped (predicted) or stopped (default 300)")
    p.add_argument("--memory-budget", type=float, default=None,
                   help="GiB per cell; larger cells are skipped or stopped (default 75%% of the RAM)")
    p.add_argument("--peers", action="store_true",
                   help="also run the published implementations (pip install 'opformer[peers]')")
    p.add_argument("--solver", default=None, metavar="PDE",
                   help="time the built-in solver of burgers, darcy, navier-stokes or kolmogorov per sample against "
                        "its surrogates' batched inference (docs/bench.md)")
    p.add_argument("--json", help="write the full results as JSON")
    p.add_argument("--markdown", help="write the table as markdown")
    p.add_argument("--plot", help="write the log-log time/memory plot (PNG)")
    p.set_defaults(func=cmd_bench)
    return parser


def _import_torch() -> None:
    """Import torch; a failure (a broken install, or too little memory to map its libraries) is one line."""
    try:
        importlib.import_module("torch")
    except ImportError as exc:
        raise ConfigError(f"cannot import torch ({_first_line(exc)}); is it installed, and is there memory "
                          "to load it?") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [exc.__class__.__name__])[0][:160]


def _out_of_memory(exc: BaseException) -> bool:
    """Python's MemoryError, torch's CPU allocator failure or CUDA's out-of-memory error."""
    text = str(exc)
    return (isinstance(exc, MemoryError) or "DefaultCPUAllocator: can't allocate memory" in text
            or "out of memory" in text.lower())


class _Interrupts:
    """Handler of SIGINT and SIGTERM: both unwind like Ctrl-C (temporary files removed, child processes
    stopped), and the first one received sets the exit code, 128 + its number (130, 143), even where library
    code swallowed the ``KeyboardInterrupt`` or an interrupted import raised something else instead.

    Until :meth:`arm` it only records the signal: while numpy, scipy and torch are imported, an exception
    raised into their extension modules' start-up can abort the process (a pybind11 ``std::terminate``).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self.armed = False

    def __call__(self, signum: int, frame: object) -> None:
        if self.received is None:
            self.received = signum
        if self.armed:
            raise KeyboardInterrupt

    def arm(self) -> None:
        """From now on a signal raises ``KeyboardInterrupt``; one that came during the imports does so now."""
        self.armed = True
        if self.received is not None:
            raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; user errors print one line to stderr and exit 2, without a traceback; SIGINT and SIGTERM
    exit 130 and 143 with one line."""
    interrupts = _Interrupts()
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, interrupts) for s in interrupts.SIGNALS} if in_main_thread else {}
    words = sys.argv[1:] if argv is None else list(argv)
    command, code = (words[0] if words and not words[0].startswith("-") else ""), 0
    try:
        _import_torch()  # first (the parser's PDE registry imports it too), while signals are only recorded
        args = build_parser().parse_args(argv)  # imports numpy and scipy (the PDE registry)
        command = args.command
        interrupts.arm()
        code = args.func(args)
    except OpformerError as exc:
        if interrupts.received is None:
            print(f"opformer {command}: error: {exc}", file=sys.stderr)
            code = 2
    except KeyboardInterrupt:
        interrupts.received = interrupts.received or signal.SIGINT
    except ImportError as exc:  # a library missing, or too little memory to map it (ulimit -v)
        if interrupts.received is None:
            print(f"opformer {command}: error: cannot import {exc.name or 'a library'} ({_first_line(exc)}); is it "
                  "installed, and is there memory to load it?", file=sys.stderr)
            code = 2
    except (MemoryError, RuntimeError) as exc:
        if interrupts.received is None:
            if not _out_of_memory(exc):
                raise
            print(f"opformer {command}: error: out of memory ({_first_line(exc)}); try a smaller batch size, "
                  "resolution or model", file=sys.stderr)
            code = 2
    except Exception:
        if interrupts.received is None:
            raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if interrupts.received is not None:
        name = signal.Signals(interrupts.received).name
        print(f"opformer {command or '(starting)'}: interrupted by {name}", file=sys.stderr)
        return 128 + interrupts.received
    return code


def run() -> None:
    """The console script: :func:`main`, then exit with its code.

    After SIGINT/SIGTERM the process leaves with ``os._exit`` once everything is unwound and flushed: a
    ``KeyboardInterrupt`` raised inside an extension's start-up code can leave CPython's "unhandled
    KeyboardInterrupt" flag set, and the normal interpreter shutdown would then kill the process with SIGINT
    instead of exiting 130 / 143 (seen in about 1 of 10 signals during the first second).
    """
    code = main()
    if code in (128 + signal.SIGINT, 128 + signal.SIGTERM):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
