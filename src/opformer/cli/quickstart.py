"""``opformer quickstart``: the built-in default job (``make demo``)."""

from __future__ import annotations

import argparse

from opformer.cli.options import DEVICE_HELP, AddCommand

EXAMPLES = {
    "quickstart": "opformer quickstart --out runs/quickstart",
}


def cmd_quickstart(args: argparse.Namespace) -> int:
    """``opformer quickstart``: generate, train, evaluate and plot in ``--out``."""
    from opformer.quickstart import quickstart

    quickstart(args.out, device=args.device)
    return 0


def add_parsers(add: AddCommand) -> None:
    """The parser of ``quickstart``."""
    p = add("quickstart", "Generate a small Burgers set, train a Galerkin Transformer, evaluate and plot.")
    p.add_argument("--out", default="runs/quickstart", help="folder for data, run and plots")
    p.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default auto)")
    p.set_defaults(func=cmd_quickstart)
