"""``opformer generate``, ``opformer convert`` and ``opformer verify``: data sets made by the built-in solvers or
read from published files, and their whole-file check."""

from __future__ import annotations

import argparse
import sys

from opformer.cli.options import AddCommand, output_path, parse_names
from opformer.errors import OpformerError

EXAMPLES = {
    "generate": "opformer generate burgers --samples 1224 --resolution 8192 --out data/burgers.h5\n"
                "  opformer generate darcy --samples 1224 --resolution 421 --out data/darcy_421.h5\n"
                "  opformer generate navier-stokes --samples 1200 --nu 1e-3 --out data/ns_1e-3.h5",
    "convert": "opformer convert fno-mat ns_V1e-3_N5000_T50.mat --out data/ns_1e-3.h5 --samples 1200\n"
               "  opformer convert the-well shear_flow/data/{train,valid,test}/*.hdf5 --out data/shear_flow.h5",
    "verify": "opformer verify data/ns_1e-3.h5 data/burgers.h5",
}


def cmd_generate(args: argparse.Namespace) -> int:
    """``opformer generate PDE``: solve and store a data set."""
    from opformer.cli.progress import CountProgress
    from opformer.data.generate import generate_file
    from opformer.pde.registry import FLAGS, lookup

    output_path("--out", args.out, force=args.force, folders=True)
    flags = {name: getattr(args, name) for name in FLAGS}
    resolution = lookup(args.pde).defaults["resolution"] if args.resolution is None else args.resolution
    with CountProgress(args.samples, f"generate {args.pde} n={resolution}") as bar:
        path = generate_file(args.pde, args.out, args.samples, seed=args.seed, progress=bar.update, **flags)
    print(f"wrote {args.samples} samples to {path}")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    """``opformer convert FORMAT SRC...``: a published file (or files of one data set) in opformer's format."""
    from opformer.data.convert import convert_file
    from opformer.data.readers.registry import OPTIONS

    output_path("--out", args.out, force=args.force, folders=True)
    channels = parse_names(args.channels) if args.channels is not None else None
    path, count = convert_file(args.format, args.src, args.out, samples=args.samples, channels=channels,
                               **{name: getattr(args, name) for name in OPTIONS})
    print(f"wrote {count} samples to {path}")
    if args.format == "the-well":
        from opformer.data.store import read_info

        splits = read_info(path).pde["the_well"]["splits"]  # those of the samples written
        print("The Well's splits: " + ", ".join(f"{name} samples {a}..{b - 1} ({b - a})"
                                                for name, (a, b) in splits.items())
              + " (data.n_train, n_val, n_test of a run, in this order)")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """``opformer verify FILE...``: each file's whole-file SHA-256 and schema; one line per file, exit 2 if any
    fails."""
    from opformer.data.store import verify_file

    failed = 0
    for name in args.files:
        try:
            verify_file(name)
        except OpformerError as exc:
            print(f"opformer verify: error: {exc}", file=sys.stderr, flush=True)
            failed += 1
        else:
            print(f"{name}: ok", flush=True)
    return 2 if failed else 0


def add_parsers(add: AddCommand) -> None:
    """The parsers of ``generate``, ``convert`` (their flags come from the PDE and reader registries) and
    ``verify``."""
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

    from opformer.data.readers.registry import OPTIONS, READERS

    p = add("convert", "Convert a published data set to opformer's HDF5 format (`opformer convert FORMAT --help`: "
                       "a format's own options).")
    formats = p.add_subparsers(dest="format", required=True, metavar="FORMAT", help="the file's layout:")
    for name, reader in READERS.items():
        f = formats.add_parser(name, help=reader.summary, description=f"opformer convert {name}: {reader.summary}.",
                               epilog="example:\n  " + reader.example,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        f.add_argument("src", nargs="+", metavar="SRC", help="the files of one data set, train first" if reader.many
                       else "the published file")
        f.add_argument("--out", required=True, help="HDF5 file to write")
        f.add_argument("--samples", type=int, default=None, help="convert the first N samples (default: all)")
        f.add_argument("--channels", default=None,
                       help="name the channels, comma-separated: operator pairs the inputs' then the targets' (e.g. "
                            "a,u), trajectories the fields' (default: the layout's names)")
        f.add_argument("--force", action="store_true", help="replace --out if it exists")
        for option in OPTIONS:  # another layout's option is refused in one line (`only used by`), not listed
            f.add_argument(f"--{option}", default=None,
                           help=OPTIONS[option].help if option in reader.options else argparse.SUPPRESS)
        f.set_defaults(func=cmd_convert)

    p = add("verify", "Check data files against the SHA-256 stored when they were written (reads each whole "
                      "file; reads by train, evaluate and predict check every chunk they read instead).")
    p.add_argument("files", nargs="+", metavar="FILE", help="opformer HDF5 data files")
    p.set_defaults(func=cmd_verify)
