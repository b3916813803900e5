"""``opformer import``: weights trained by another code base (DPOT's and FactFormer's authors, the Galerkin
Transformer package, neuraloperator) or an exported opformer model, from a file, a folder or the Hugging Face Hub,
as a run directory that every other command takes; ``opformer export``: a run as a model repository others can
load."""

from __future__ import annotations

import argparse
from pathlib import Path

from opformer.cli.options import AddCommand, writable_folder
from opformer.imports.formats import FORMATS, check_options

EXAMPLES = {
    "import": "\n  ".join(example for entry in FORMATS.values() for example in entry.examples),
    "export": "opformer export runs/gt exported/gt --metrics gt.json\n"
              "  opformer export runs/fno exported/fno --format onnx",
}


def cmd_import(args: argparse.Namespace) -> int:
    """``opformer import FORMAT SRC --out RUN``: convert, check and write the run; print what was found."""
    from opformer.imports.convert import import_run

    writable_folder("--out", args.out, Path(args.out), create=True)
    check_options(args.format, args.config, args.modes, args.grid)
    if FORMATS[args.format].repository:
        from opformer.imports.repository import import_repository

        out, repository = import_repository(args.source, args.out, args.revision)
        spec, summary = repository.config["spec"], repository.config["training"].get("summary") or {}
        parameters = f", {summary['parameters']:,} parameters" if isinstance(summary.get("parameters"), int) else ""
        print(f"imported the opformer model of {repository.source} (format version "
              f"{repository.config['format_version']}): {spec['model']['name']}{parameters}")
        calibration = repository.config.get("calibration") or {}
        print("with its calibration (opformer predict --coverage answers)" if repository.calibration is not None
              else f"without a calibration: {calibration.get('why', 'the repository holds none')}")
        print(f"wrote {out}")
        return 0
    out, imported = import_run(args.format, args.source, args.out, args.revision, config=args.config,
                               modes=args.modes, grid=args.grid)
    parameters = sum(t.numel() for t in imported.state.values())
    model = imported.config["name"] + (f" ({imported.preset})" if imported.preset else "")
    print(f"imported {args.format} weights of {args.source}: {model}, {parameters:,} parameters"
          + (f"; {'; '.join(imported.notes)}" if imported.notes else ""))
    print(f"wrote {out}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``opformer export RUN DIR``: the run's best checkpoint as a model repository."""
    from opformer.imports.export import CONFIG_JSON, export_run
    from opformer.io import read_json

    writable_folder("DIR", args.dir, Path(args.dir), create=True)
    out = export_run(args.run, args.dir, args.metrics, args.format, args.opset)
    sizes = ", ".join(f"{p.name} {p.stat().st_size:,} bytes" for p in sorted(out.iterdir()))
    print(f"exported {args.run} to {out}: {sizes}")
    calibration = read_json(out / CONFIG_JSON)["calibration"]
    print("with its calibration" if calibration["included"] else f"without a calibration: {calibration['why']}")
    return 0


def add_parsers(add: AddCommand) -> None:
    """The parsers of ``import`` and ``export``."""
    p = add("import", "Weights of DPOT's or FactFormer's authors, the Galerkin Transformer package, neuraloperator "
                      "or an exported opformer model, local or from the Hugging Face Hub, as a run directory "
                      "(docs/models.md).")
    p.add_argument("format", choices=list(FORMATS), help="the code base the weights come from (opformer: a model "
                                                   "repository written by opformer export)")
    p.add_argument("source", help="the weights file (read without unpickling code), the exported folder (format "
                                  "opformer), or hf://OWNER/NAME[@REVISION][/PATH] on the Hugging Face Hub "
                                  "(through huggingface_hub's cache; HF_HUB_OFFLINE=1: the cache only)")
    p.add_argument("--out", required=True, help="run directory to write (absent or empty)")
    p.add_argument("--revision", help="hf:// sources: the branch, tag or commit to take (default main); the "
                                      "commit it resolves to is recorded in run.json")
    p.add_argument("--config", help="galerkin-transformer: the SimpleTransformer config (YAML or JSON) if the file "
                                    "holds none; factformer: the authors' YAML config the model was trained with")
    p.add_argument("--modes", type=int, help="dpot: Fourier modes of the mixer (default: the file's args.modes, "
                                             "else the authors' default 32)")
    p.add_argument("--grid", default="nodes", choices=["nodes", "periodic"],
                   help="galerkin-transformer: the coordinates the model was trained with: nodes (linspace(0, 1, n), "
                        "the package's Burgers data; default) or periodic (i / n)")
    p.set_defaults(func=cmd_import)
    p = add("export", "A run's best checkpoint as a Hub-style model repository: model.safetensors, config.json, "
                      "README.md (docs/models.md).")
    p.add_argument("run", help="the run directory")
    p.add_argument("dir", help="the folder to write (absent or empty); upload it as a Hub model repository")
    p.add_argument("--metrics", help="a JSON file of opformer evaluate --json whose results go into the model card")
    p.add_argument("--format", default="safetensors", choices=["safetensors", "onnx"],
                   help="onnx: model.onnx too, the surrogate (normalizers inside) as an ONNX graph that runs in "
                        "onnxruntime on a CPU, checked against torch at export (needs the onnx extra)")
    p.add_argument("--opset", type=int, help="--format onnx: the graph's ONNX opset (default: torch's exporter's)")
    p.set_defaults(func=cmd_export)
