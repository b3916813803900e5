"""``opformer quickstart [burgers | dpot | mesh]``: the built-in demo jobs (``make demo``, ``make demo-dpot``)."""

from __future__ import annotations

import argparse

from opformer.cli.options import DEVICE_HELP, AddCommand

EXAMPLES = {
    "quickstart": "opformer quickstart --out runs/quickstart\n"
                  "  opformer quickstart dpot --out runs/quickstart-dpot\n"
                  "  opformer quickstart dpot --out runs/quickstart-dpot-seed1 --seed 1\n"
                  "  opformer quickstart mesh --out runs/quickstart-mesh",
}

#: job -> its default --out
OUT = {"burgers": "runs/quickstart", "dpot": "runs/quickstart-dpot", "mesh": "runs/quickstart-mesh"}


def cmd_quickstart(args: argparse.Namespace) -> int:
    """``opformer quickstart [JOB]``: generate, train, evaluate and plot in ``--out``."""
    out = args.out or OUT[args.job]
    if args.job == "dpot":
        from opformer.quickstart.dpot import quickstart_dpot

        quickstart_dpot(out, device=args.device, seed=args.seed)
    elif args.job == "mesh":
        from opformer.quickstart.mesh import quickstart_mesh

        quickstart_mesh(out, device=args.device, seed=args.seed)
    else:
        from opformer.quickstart.burgers import quickstart

        quickstart(out, device=args.device, seed=args.seed)
    return 0


def add_parsers(add: AddCommand) -> None:
    """The parser of ``quickstart``."""
    p = add("quickstart", "Generate a small Burgers set, train a Galerkin Transformer, evaluate and plot "
                          "(dpot: a nano DPOT on a tiny mixture of three PDEs).")
    p.add_argument("job", nargs="?", default="burgers", choices=sorted(OUT),
                   help="burgers (default): Galerkin Transformer on Burgers; dpot: a nano DPOT pre-trained on a "
                        "tiny mixture (Navier-Stokes, shallow water, smoke), each member's rollout error beside "
                        "persistence, a rollout plot per member, then fine-tuned on held-out Navier-Stokes at "
                        "nu = 1e-4 beside scratch; mesh: the quadrature-weighted Galerkin Transformer on meshes of the "
                        "built-in elasticity problem, evaluated, calibrated, new geometries with bounds, the error map")
    p.add_argument("--out", default=None, help="folder for data, run and plots (default runs/quickstart, "
                                               "runs/quickstart-dpot for dpot, runs/quickstart-mesh for mesh); "
                                               "a rerun continues there")
    p.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default auto)")
    p.add_argument("--seed", type=int, default=1127802,
                   help="the runs' seed: weights, windows, noise (default 1127802; the data's seeds are fixed)")
    p.set_defaults(func=cmd_quickstart)
