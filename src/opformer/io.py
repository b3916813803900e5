"""Atomic file writes: every file opformer writes goes to a temporary sibling and is renamed into place.

A killed process therefore leaves either the old file or the new one, never a partial one; the temporary
file (``.NAME.XXXX.tmp`` beside the target) is removed on any error.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def atomic_path(path: Path, suffix: str = ".tmp") -> Path:
    """A new, empty temporary sibling of ``path`` (ordinary file permissions) to write before the rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # the permissions of an ordinary new file, not mkstemp's 0600
    return Path(tmp)


@contextmanager
def atomic_replace(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` to write; on success it is renamed over ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was. ``suffix`` lets writers
    that pick a format by the file name (Pillow's GIF writer) see the right one.
    """
    path = Path(path)
    tmp = atomic_path(path, suffix)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write a small text file via a temporary name and a rename."""
    with atomic_replace(path) as tmp:
        tmp.write_text(text)
