"""``opformer import``: weights trained by another code base (DPOT's and FactFormer's authors, the Galerkin
Transformer package, neuraloperator) as a run directory that every other command takes."""

from __future__ import annotations

import argparse
from pathlib import Path

from opformer.cli.options import AddCommand, writable_folder

#: the formats of :mod:`opformer.imports` (named here so that the parser does not import torch's models)
FORMATS = ("dpot", "factformer", "galerkin-transformer", "neuraloperator")

EXAMPLES = {
    "import": "opformer import dpot model_Ti.pth --out runs/dpot_ti\n"
              "  opformer import factformer checkpoint_final.pth --config ns2d_fact_lm.yml --out runs/ff_imported\n"
              "  opformer import galerkin-transformer burgers_gt.pt --config burgers.yaml --out runs/gt_imported\n"
              "  opformer import neuraloperator fno1d_state_dict.pt --out runs/fno_imported",
}


def cmd_import(args: argparse.Namespace) -> int:
    """``opformer import FORMAT SRC --out RUN``: convert, check and write the run; print what was found."""
    from opformer.imports import import_run

    writable_folder("--out", args.out, Path(args.out), create=True)
    out, imported = import_run(args.format, args.source, args.out, config=args.config, modes=args.modes,
                               grid=args.grid)
    parameters = sum(t.numel() for t in imported.state.values())
    model = imported.config["name"] + (f" ({imported.preset})" if imported.preset else "")
    print(f"imported {args.format} weights of {args.source}: {model}, {parameters:,} parameters"
          + (f"; {'; '.join(imported.notes)}" if imported.notes else ""))
    print(f"wrote {out}")
    return 0


def add_parsers(add: AddCommand) -> None:
    """The parser of ``import``."""
    p = add("import", "Weights of DPOT's or FactFormer's authors, the Galerkin Transformer package or "
                      "neuraloperator as a run directory (docs/models.md).")
    p.add_argument("format", choices=FORMATS, help="the code base the weights come from")
    p.add_argument("source", help="the weights file (read without unpickling code)")
    p.add_argument("--out", required=True, help="run directory to write (absent or empty)")
    p.add_argument("--config", help="galerkin-transformer: the SimpleTransformer config (YAML or JSON) if the file "
                                    "holds none; factformer: the authors' YAML config the model was trained with")
    p.add_argument("--modes", type=int, help="dpot: Fourier modes of the mixer (default: the file's args.modes, "
                                             "else the authors' default 32)")
    p.add_argument("--grid", default="nodes", choices=["nodes", "periodic"],
                   help="galerkin-transformer: the coordinates the model was trained with: nodes (linspace(0, 1, n), "
                        "the package's Burgers data; default) or periodic (i / n)")
    p.set_defaults(func=cmd_import)
