"""Where and how computation runs: the device rule shared by every command, and the host allocator.

Allocator: glibc serves blocks above 32 MB with ``mmap`` and unmaps them when freed, so each training step
maps its large activations anew and the kernel zeroes every page on first touch: 110 ms for a 177 MB tensor
here, against 45 ms for the copy into it. A FactFormer Darcy step (85^2, batch 8, one core) spent a third of
its time so (19.2 -> 12.7 s). :func:`retain_freed_memory` sets glibc's ``M_MMAP_MAX`` to 0 (every block
from the heap) and raises ``M_TRIM_THRESHOLD``, so freed blocks are reused; the resident size then stays at
the step's peak instead of falling between steps. :func:`release_freed_memory` hands the kept blocks back
(``malloc_trim``), for a process about to do something else.
"""


from __future__ import annotations

import ctypes
import sys
from typing import Any

import torch


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # mallopt parameters (malloc.h)
TRIM_THRESHOLD = 2**31 - 1  # the largest value mallopt takes (a C int)


def _libc_function(name: str) -> Any:
    """A glibc function, or None off Linux or where the C library lacks it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None


def retain_freed_memory() -> bool:
    """Ask the C library to keep freed memory for reuse; ``False`` where it has no ``mallopt`` (non-glibc)."""
    mallopt = _libc_function("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def release_freed_memory() -> bool:
    """Return the freed memory the C library keeps to the system (``malloc_trim(0)``); ``False`` if none was
    returned or the C library has no ``malloc_trim``."""
    malloc_trim = _libc_function("malloc_trim")
    if malloc_trim is None:
        return False
    malloc_trim.argtypes, malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    return bool(malloc_trim(0))
