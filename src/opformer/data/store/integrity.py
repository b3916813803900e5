"""The integrity of opformer's data files: the whole-file SHA-256 in the HDF5 user block (written after the
file, checked by :func:`verify_file`, and before any read of a file without chunk checksums) and the one-line
errors of what HDF5 finds corrupt (see :mod:`opformer.data.store`)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import h5py

from opformer.errors import DataError

if TYPE_CHECKING:
    from opformer.data.store.schema import DatasetInfo

#: The HDF5 user block (bytes HDF5 leaves to the application) holds ``CHECKSUM_MAGIC`` + the file's SHA-256.
USERBLOCK, CHECKSUM_MAGIC = 512, b"opformer-sha256:"
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
#: The files (path, size, modification time) whose whole-file checksum this process has checked.
VERIFIED: set[tuple[str, int, int]] = set()


def file_key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


def file_digest(path: Path) -> str:
    """SHA-256 of everything after the user block (the whole HDF5 image), hex; read 4 MiB at a time."""
    hasher = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(USERBLOCK)
        for block in iter(lambda: f.read(1 << 22), b""):
            hasher.update(block)
    return hasher.hexdigest()


def head(path: Path) -> tuple[bool, int | None]:
    """Whether the file holds an opformer checksum, and the version of its HDF5 superblock (None: no HDF5
    superblock after the user block)."""
    try:
        with open(path, "rb") as f:
            head = f.read(USERBLOCK + len(_HDF5_SIGNATURE) + 1)
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc.__class__.__name__})") from None
    superblock = head[USERBLOCK:USERBLOCK + len(_HDF5_SIGNATURE)] == _HDF5_SIGNATURE
    return head.startswith(CHECKSUM_MAGIC), head[-1] if superblock and len(head) == USERBLOCK + 9 else None


def check_digest(path: Path) -> None:
    """The stored SHA-256 against the file's contents; a mismatch is a one-line DataError."""
    with open(path, "rb") as f:
        head = f.read(len(CHECKSUM_MAGIC) + 64)
    if head[len(CHECKSUM_MAGIC):].decode(errors="replace") != file_digest(path):
        raise DataError(f"{path}: corrupt or changed since it was written (its contents do not match its "
                        "checksum); regenerate or re-copy it")


def verify_checksum(path: Path) -> None:
    """The whole-file check of a file written before chunk checksums (once per process and version of the file),
    before HDF5 reads it: a flipped, zeroed or truncated byte anywhere is a one-line error, where HDF5 could read
    wrong values or hang on a damaged index. Files without a checksum are not checked."""
    key = file_key(path)
    if key in VERIFIED:
        return
    if head(path)[0]:
        check_digest(path)
    VERIFIED.add(key)


def verify_file(path: str | os.PathLike) -> DatasetInfo:
    """``opformer verify``: the whole-file SHA-256 stored in the user block against the file's bytes, then its
    schema (:func:`read_info`); returns the file's description. A file without a stored checksum (written
    before opformer stored one, or edited by another program) cannot be verified: a DataError says so."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such data file")
    if not head(path)[0]:
        raise DataError(f"{path}: holds no opformer checksum to verify it against (written before opformer "
                        "stored one, or edited by another program)")
    check_digest(path)
    VERIFIED.add(file_key(path))
    from opformer.data.store.read import read_info  # reading imports this module: imported at the call
    return read_info(path)


def self_checking(f: h5py.File) -> bool:
    """Whether every dataset of ``f`` is chunked with the fletcher32 filter (HDF5 checks each chunk it reads)."""
    found: list[bool] = []
    f.visititems(lambda name, obj: found.append(obj.chunks is not None and obj.fletcher32)
                 if isinstance(obj, h5py.Dataset) else None)
    return bool(found) and all(found)


def reason(exc: BaseException) -> str:
    """HDF5's reason in h5py's message (the text in its last parentheses), short."""
    text = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0].strip("'\"")
    if "(" in text and text.endswith(")"):
        text = text[text.index("(") + 1:-1]
    if "filter returned failure" in text:
        text = "its checksum does not match"
    elif "checksum" in text:
        text = "a metadata checksum does not match"
    return text[:160] or exc.__class__.__name__


def unreadable(path: Path, checksum: bool, exc: BaseException) -> DataError:
    """The one-line error of a file HDF5 cannot read: corrupt, if it holds opformer's checksum (``checksum``)."""
    if checksum:
        return DataError(f"{path}: corrupt or changed since it was written ({reason(exc)}); regenerate or "
                         "re-copy it")
    return DataError(f"{path}: not a readable HDF5 file ({reason(exc)})")
