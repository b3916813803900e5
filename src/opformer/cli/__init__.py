"""The ``opformer`` command: the parser of every sub-command and the entry point (one-line errors, exit codes,
signals). Each group of sub-commands lives in its own module and calls the same functions as the Python API."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence

from opformer import __version__
from opformer.cli import bench, data, importing, quickstart, results, training, trust
from opformer.errors import ConfigError, OpformerError

#: The command groups in the order of ``opformer --help``.
GROUPS = (data, training, results, trust, importing, quickstart, bench)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``opformer`` command."""
    examples = {name: text for group in GROUPS for name, text in group.EXAMPLES.items()}
    parser = argparse.ArgumentParser(
        prog="opformer", description="Transformer neural operators: generate PDE data, train, evaluate, plot.",
        epilog="examples:\n  " + "\n  ".join(examples.values()), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"opformer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, epilog="example:\n  " + examples[name],
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    for group in GROUPS:
        group.add_parsers(add)
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

