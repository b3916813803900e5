"""The device rule, and retain_freed_memory: a large tensor comes from the heap and its memory stays there when
freed (glibc); release_freed_memory hands it back."""

import subprocess
import sys

import pytest
import torch

from opformer.config import config_from_dict
from opformer.errors import ConfigError
from opformer.train import trainer

SCRIPT = """
import ctypes, sys, torch
from opformer.runtime import retain_freed_memory
libc = ctypes.CDLL(None)
libc.sbrk.restype, libc.sbrk.argtypes = ctypes.c_void_p, [ctypes.c_long]
if sys.argv[1] == "retain":
    assert retain_freed_memory()
start = libc.sbrk(0)
x = torch.ones(16 * 2**20)  # 64 MB, above glibc's largest mmap threshold
end, ptr = libc.sbrk(0), x.data_ptr()
del x
print(int(end - 2**30 < ptr < end), end - start, libc.sbrk(0) - end)  # within the heap top GB
"""


def heap_use(mode: str) -> tuple[int, int, int]:
    """(tensor inside the heap, heap growth for it, heap change when it is freed) in a fresh process."""
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True)
    inside, grown, after_free = map(int, out.stdout.split())
    return inside, grown, after_free


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_large_tensor_is_served_from_the_heap_and_kept_after_free() -> None:
    assert heap_use("default")[0] == 0  # glibc maps it separately and unmaps it when freed
    inside, grown, after_free = heap_use("retain")
    assert inside == 1 and grown > 32 * 2**20 and after_free == 0  # (part may come from free heap space)


RELEASE = """
import resource, torch
from opformer.runtime import release_freed_memory, retain_freed_memory
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()
assert retain_freed_memory()
x = torch.ones(16 * 2**20)  # 64 MB, every page touched
before = resident()
del x
kept = resident()
print(before - kept, int(release_freed_memory()), kept - resident())
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc_trim")
def test_released_memory_leaves_the_resident_set() -> None:
    out = subprocess.run([sys.executable, "-c", RELEASE], capture_output=True, text=True, check=True)
    dropped_on_free, released, dropped_on_release = map(int, out.stdout.split())
    assert dropped_on_free < 2**20  # kept while retained
    assert released == 1 and dropped_on_release > 60 * 2**20


@pytest.mark.parametrize("flag", [True, False])
def test_trainer_follows_the_config_flag(flag, monkeypatch, tmp_path, toy_file, tiny_config) -> None:
    calls = []
    monkeypatch.setattr(trainer, "retain_freed_memory", lambda: calls.append("retain") or True)
    monkeypatch.setattr(trainer, "release_freed_memory", lambda: calls.append("release") or True)
    config = tiny_config(toy_file, epochs=2)
    config["train"]["retain_freed_memory"] = flag
    trainer.Trainer(config_from_dict(config), tmp_path / "run").fit()
    assert calls == (["retain", "release", "release"] if flag else [])  # kept for the steps, released per epoch


def test_the_device_rule():
    import torch

    from opformer.errors import ConfigError
    from opformer.runtime import resolve_device

    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    for name in ("gpu", "mps", "cuda:x", "CPU", ""):
        with pytest.raises(ConfigError, match=rf"^device '{name}': expected auto, cpu, cuda or cuda:N$"):
            resolve_device(name)
    if not torch.cuda.is_available():
        for name in ("cuda", "cuda:1"):
            with pytest.raises(ConfigError, match=rf"^device '{name}': this machine has no usable CUDA device"):
                resolve_device(name)
    else:
        count = torch.cuda.device_count()
        with pytest.raises(ConfigError, match=f"has {count} CUDA device"):
            resolve_device(f"cuda:{count}")


def test_matmul_precision_is_stated_and_tf32_advice_silenced(monkeypatch):
    import warnings

    from opformer.runtime import set_matmul_precision

    before = torch.get_float32_matmul_precision()
    try:
        set_matmul_precision("high")
        assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            set_matmul_precision("highest")
            warnings.warn("TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled.")
        assert torch.get_float32_matmul_precision() == "highest" and not torch.backends.cudnn.allow_tf32
        assert seen == []
        with pytest.raises(ConfigError, match="matmul precision 'medium': expected one of highest, high"):
            set_matmul_precision("medium")
    finally:
        torch.set_float32_matmul_precision(before)


def test_the_compile_cache_outlives_tmp(monkeypatch, tmp_path):
    from opformer.runtime import compile_cache

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache() == str(tmp_path / "opformer" / "inductor")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/elsewhere")
    assert compile_cache() == "/elsewhere"


def test_process_age_counts_from_the_start():
    from opformer.runtime import process_age

    age = process_age()
    assert age is None or 0 < age < 3600
