"""``opformer train``: a run from a YAML config (or resumed), in one process or several started by torchrun."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from opformer.cli.options import DEVICE_HELP, AddCommand, writable_folder
from opformer.errors import ConfigError

EXAMPLES = {
    "train": "opformer train configs/burgers/gt.yaml --out runs/gt --set data.path=data/burgers.h5\n"
             "  opformer train burgers/gt --out runs/gt --set data.path=data/burgers.h5   # a packaged recipe\n"
             "  opformer train --resume runs/gt\n"
             "  opformer train configs/burgers/gt.yaml --out runs/gt2 --nproc 2",
    "recipes": "opformer recipes\n  opformer recipes show burgers/gt > my_gt.yaml",
}


def cmd_train(args: argparse.Namespace) -> int:
    """``opformer train``: train (or resume) a run and print its best validation error."""
    from opformer.config import apply_overrides, config_from_dict, config_to_dict, load_config
    from opformer.recipes import recipe_path
    from opformer.runs import Run, import_record
    from opformer.runtime import resolve_device
    from opformer.train.trainer import train

    if args.resume:
        run_dir = Path(args.resume)
        config = Run(run_dir).config
        imported = config.imported.format if config.imported else (import_record(run_dir) or {}).get("format")
        if imported:
            raise ConfigError(f"--resume {run_dir}: holds imported {imported} weights, not a training "
                              f"run; fine-tune them in a new run with init: {{checkpoint: {run_dir}}}")
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
        writable_folder("--out", args.out, run_dir, create=True)
        config = load_config(recipe_path(args.config), args.set)
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


def cmd_recipes(args: argparse.Namespace) -> int:
    """``opformer recipes [show NAME]``: the packaged recipes, one a line, or one recipe's YAML to copy and edit."""
    from opformer.recipes import describe, recipe_names, recipe_path

    if args.action == "show":
        if not args.name:
            raise ConfigError("recipes show needs NAME, e.g. opformer recipes show burgers/gt")
        print(recipe_path(args.name).read_text(), end="")
        return 0
    if args.name:
        raise ConfigError(f"recipes {args.name}: expected `opformer recipes` or `opformer recipes show NAME`")
    rows = [describe(name) for name in recipe_names()]
    width = max(len(r.name) for r in rows)
    model_width = max(len(r.model) for r in rows)
    for r in rows:
        print(f"{r.name:<{width}}  {r.model:<{model_width}}  {r.reproduces[:100]}")
    print(f"{len(rows)} recipes; `opformer recipes show NAME` prints one, `opformer train NAME --out RUN` runs it "
          "(--set data.path=... where your data lies)")
    return 0


def add_parsers(add: AddCommand) -> None:
    """The parsers of ``train`` and ``recipes``."""
    p = add("train", "Train a model from a YAML config into a run directory (or resume one).")
    p.add_argument("config", nargs="?", help="YAML run config, or a packaged recipe's name (opformer recipes)")
    p.add_argument("--out", help="run directory to create")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. train.epochs=10 (repeatable)")
    p.add_argument("--resume", metavar="RUN", help="continue the run in RUN from its last checkpoint")
    p.add_argument("--device", default=None, help=f"{DEVICE_HELP} (default: the config's train.device, auto)")
    p.add_argument("--nproc", type=int, default=None, metavar="N",
                   help="data-parallel processes on this machine, started with torchrun (train.batch_size is the "
                        "global batch; see docs/training.md for several machines)")
    p.set_defaults(func=cmd_train)
    p = add("recipes", "List the packaged recipes (the papers' run configs), or show one to copy and edit.")
    p.add_argument("action", nargs="?", choices=("list", "show"), default="list", help="list (default) or show")
    p.add_argument("name", nargs="?", help="the recipe to show, e.g. burgers/gt")
    p.set_defaults(func=cmd_recipes)
