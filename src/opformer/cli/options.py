"""What several ``opformer`` commands share: the --device help, list options, output paths checked before work."""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from opformer.errors import ConfigError

#: What every --device takes (opformer.runtime.resolve_device).
DEVICE_HELP = "auto (CUDA if available, else CPU), cpu, cuda or cuda:N"


def parse_resolutions(text: str) -> list[int]:
    """``"512,2048"`` -> ``[512, 2048]``; grid sizes of at least 2 points, else a one-line ``ConfigError``."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"--resolutions {text!r}: expected comma-separated integers, e.g. 512,2048") from None
    if not values or min(values) < 2:
        raise ConfigError(f"--resolutions {text!r}: expected grid sizes of at least 2 points")
    return values


def parse_names(text: str) -> list[str]:
    """``"a, b,"`` -> ``["a", "b"]``."""
    return [name.strip() for name in text.split(",") if name.strip()]


def output_path(option: str, value: str | None, *, force: bool = True, folders: bool = False) -> Path | None:
    """``value`` as a file that can be written, checked before any work: not a directory, not an existing file
    unless ``force``, its folder writable (with ``folders``, the nearest existing one: the rest is created)."""
    if value is None:
        return None
    path = Path(value)
    if path.is_dir():
        raise ConfigError(f"{option} {value}: cannot write there (it is a directory)")
    if path.exists() and not force:
        raise ConfigError(f"{option} {value}: already exists; add --force to replace it")
    writable_folder(option, value, path.parent, folders)
    return path


def writable_folder(option: str, value: str, folder: Path, create: bool) -> None:
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


#: ``add(name, help)``: a sub-command's parser, its description and example set (``build_parser`` gives it).
AddCommand = Callable[[str, str], argparse.ArgumentParser]
