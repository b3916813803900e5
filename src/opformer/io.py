"""Atomic file writes (every file opformer writes goes to a temporary sibling and is renamed into place), and
the tolerant read of the small JSON records that a command can do without.

A killed process therefore leaves either the old file or the new one, never a partial one; the temporary
file (``.NAME.PID.XXXX.tmp`` beside the target) is removed on any error, and one that a ``kill -9`` left is
removed by the next write of the same file.
"""

from __future__ import annotations

import errno
import hashlib
import glob
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opformer.errors import StorageError


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Remove the temporary siblings of ``path`` left by writers that were killed (their process is gone).

    A temporary is named ``.NAME.PID.XXXXXXXX.SUFFIX``; one without a readable PID (an older opformer's) counts
    as stale too. Returns what was removed.
    """
    removed = []
    for candidate in path.parent.glob(f".{glob.escape(path.name)}.*"):
        rest = candidate.name[len(path.name) + 2:].split(".")  # [PID, XXXXXXXX, SUFFIX] or an older [XXXXXXXX, tmp]
        older = rest[-1:] == ["tmp"] and len(rest) == 2
        if not candidate.is_file() or not (older or len(rest) == 3 and rest[0].isdigit()):
            continue  # not one of ours (e.g. the folder of resumable chunks)
        if older or (int(rest[0]) != os.getpid() and not _alive(int(rest[0]))):
            candidate.unlink(missing_ok=True)
            removed.append(candidate)
    return removed


#: Errors of the file system (no room, read-only, no permission, a failing disk) that become one-line errors.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EIO})


def _umask() -> int:
    """This process's file-creation mask (read by setting and restoring it)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


def atomic_path(path: Path, suffix: str = ".tmp") -> Path:
    """A new, empty temporary sibling of ``path`` (ordinary file permissions) to write before the rename.

    Temporaries that killed writers left for the same ``path`` are removed first.
    """
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # the permissions of an ordinary new file, not mkstemp's 0600
    return Path(tmp)


#: Room left beyond an estimated size before a write starts (file-format overhead, metadata).
SPACE_MARGIN = 1.05, 4 * 2**20


def check_free_space(path: Path, size: int) -> None:
    """Refuse, before writing, a file of about ``size`` bytes that the disk under ``path`` has no room for, or
    that is larger than this process may write (``ulimit -f``): HDF5 fails on such a write at close time, in ways
    that crash the process at exit."""
    free = shutil.disk_usage(path.parent).free
    needed = int(size * SPACE_MARGIN[0] + SPACE_MARGIN[1])
    if needed > free:
        raise StorageError(f"{path}: needs about {needed / 2**20:.0f} MiB but {path.parent} has "
                           f"{free / 2**20:.0f} MiB free")
    limit = _file_size_limit()
    if needed > limit:
        raise StorageError(f"{path}: needs about {needed / 2**20:.0f} MiB but files are limited to "
                           f"{limit / 2**20:.1f} MiB here (ulimit -f)")


def _file_size_limit() -> float:
    """The largest file this process may write, in bytes (infinite where there is no limit)."""
    try:
        import resource
    except ImportError:  # Windows
        return float("inf")
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return float("inf") if soft == resource.RLIM_INFINITY else soft


@contextmanager
def atomic_replace(path: str | os.PathLike, suffix: str = ".tmp", size: int | None = None) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` to write; on success it is renamed over ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was; an ``OSError`` of the
    file system (no space, read-only) becomes a one-line :class:`StorageError`. ``size`` (an estimate in bytes)
    is checked against the free space first. ``suffix`` lets writers that pick a format by the file name
    (Pillow's GIF writer) see the right one.
    """
    path = Path(path)
    if size is not None:
        check_free_space(path, size)
    try:
        tmp = atomic_path(path, suffix)
    except OSError as exc:
        raise StorageError(f"{path}: cannot be written ({exc.strerror or exc})") from None
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        if exc.errno not in STORAGE_ERRNOS:
            raise
        # the system's words: h5py's own strerror runs over several lines
        raise StorageError(f"{path}: could not be written ({os.strerror(exc.errno)}); nothing was replaced") from None
    finally:
        tmp.unlink(missing_ok=True)


def sha256_file(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes (hex)."""
    hasher = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def read_json(path: str | os.PathLike) -> Any:
    """A JSON file's contents, ``None`` where it is absent or unreadable (for records a command can do without)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write a small text file via a temporary name and a rename."""
    with atomic_replace(path) as tmp:
        tmp.write_text(text)


@contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a new temporary sibling folder of ``path`` (absent or empty) to fill; on success it is renamed to
    ``path``, so a failed writer leaves nothing. The folder gets ordinary permissions (as ``mkdir`` makes it)."""
    path = Path(path)
    parent = path.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent))
        tmp.chmod(0o777 & ~_umask())  # not mkdtemp's private one
    except OSError as exc:
        raise StorageError(f"{path}: cannot be written ({exc.strerror or exc})") from None
    try:
        yield tmp
        if path.is_dir():
            path.rmdir()  # empty: the renamed folder takes its place
        os.replace(tmp, path)
    except OSError as exc:
        if exc.errno not in STORAGE_ERRNOS | {errno.ENOTEMPTY}:
            raise
        raise StorageError(f"{path}: could not be written ({os.strerror(exc.errno)}); nothing was written") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
