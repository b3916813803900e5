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

import contextlib
import ctypes
import os
import re
import sys
import warnings
from typing import Any

import torch

from opformer.errors import ConfigError


DEVICES = "auto, cpu, cuda or cuda:N"


def resolve_device(name: str = "auto") -> torch.device:
    """The one device rule of every command: ``auto`` is CUDA when available, else the CPU; ``cpu``; ``cuda`` or
    ``cuda:N``. A device this machine lacks, or any other name, is a one-line :class:`ConfigError`."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    match = re.fullmatch(r"cpu|cuda(?::(\d+))?", name)
    if match is None:
        raise ConfigError(f"device {name!r}: expected {DEVICES}")
    if name != "cpu":
        if not torch.cuda.is_available():
            raise ConfigError(f"device {name!r}: this machine has no usable CUDA device (torch {torch.__version__}"
                              f"{'' if torch.backends.cuda.is_built() else ', a build without CUDA'}); use cpu or auto")
        index, count = int(match.group(1) or 0), torch.cuda.device_count()
        if index >= count:
            raise ConfigError(f"device {name!r}: this machine has {count} CUDA device(s), cuda:0..cuda:{count - 1}")
    return torch.device(name)


#: ``train.precision`` -> the autocast dtype of the training steps (None: full float32).
PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The context of a training step at ``precision``: ``fp32`` changes nothing; ``bf16``/``fp16`` run the
    matrix products in that type under ``torch.autocast`` (spectral layers keep their FFTs and mode products in
    float32, and the losses reduce in float32, since the targets are float32)."""
    dtype = PRECISIONS[precision]
    return contextlib.nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


#: ``train.matmul_precision`` -> PyTorch's float32 matrix-product precision: ``highest`` computes in float32,
#: ``high`` lets CUDA use TF32 tensor cores (a 10-bit mantissa for the products' inputs, float32 sums)
MATMUL_PRECISIONS = ("highest", "high")


def set_matmul_precision(precision: str) -> None:
    """Set float32 matrix products (and cuDNN convolutions) to ``highest`` (full float32) or ``high`` (TF32 on
    CUDA; no change on the CPU). Stated explicitly, so ``torch.compile`` has no TF32 advice to give."""
    if precision not in MATMUL_PRECISIONS:
        raise ConfigError(f"matmul precision {precision!r}: expected one of {', '.join(MATMUL_PRECISIONS)}")
    torch.set_float32_matmul_precision(precision)
    torch.backends.cudnn.allow_tf32 = precision == "high"
    if precision == "highest":  # a choice the config states, not an oversight inductor need point out
        warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores for float32 matrix multiplication")


def compile_cache() -> str:
    """The folder of ``torch.compile``'s on-disk caches (compiled graphs, kernels, autotuning), kept across runs:
    ``TORCHINDUCTOR_CACHE_DIR`` where set, else ``$XDG_CACHE_HOME/opformer/inductor`` (``~/.cache/...``), not
    inductor's default under /tmp, which a reboot or a fresh machine empties. A second run of the same model and
    shapes then loads what the first compiled instead of compiling it again."""
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(base, "opformer", "inductor")
    return os.environ["TORCHINDUCTOR_CACHE_DIR"]


def grad_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """Loss scaling for ``fp16`` (whose small gradients underflow); a no-op scaler otherwise."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")


def process_age() -> float | None:
    """Seconds since this process started (from ``/proc``), or None where that cannot be read."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after "pid (command)": field 3 onwards
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime, in clock ticks
    except (OSError, ValueError, IndexError, AttributeError):
        return None


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
