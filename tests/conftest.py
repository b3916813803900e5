"""Shared fixtures: tiny synthetic data files so tests never wait for a solver (the writers themselves are in
tests/toy_data.py and tests/foreign_formats.py)."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import h5py
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from opformer.models import registry
from tests.foreign_formats import (write_fno_v5, write_fno_v73, write_pdearena, write_pdebench_2d,
                                   write_pdebench_cfd, write_well_file)
from tests.toy_data import (TimeMix, tiny_darcy_config, tiny_mixture_config, tiny_run_config, write_toy_burgers,
                            write_toy_darcy, write_toy_heat, write_toy_member)


@pytest.fixture(autouse=True)
def _torch_threads():
    """Each test starts with the process's torch thread count: a run with ``train.num_threads`` sets it for the
    process, and a later test comparing an in-process run with a subprocess would then sum in another order."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def toy_file(tmp_path):
    """Path of a small toy 1D operator data set (24 samples at n = 64)."""
    return write_toy_burgers(tmp_path / "toy.h5")


@pytest.fixture
def toy_writer():
    """The toy data writer itself, for tests that need several files or sizes."""
    return write_toy_burgers


@pytest.fixture
def tiny_config():
    """Factory of tiny run configs (see :func:`tiny_run_config`)."""
    return tiny_run_config


@pytest.fixture
def darcy_file(tmp_path):
    """Path of a small toy 2D Darcy-like data set (12 samples on a 17 x 17 closed grid)."""
    return write_toy_darcy(tmp_path / "toy_darcy.h5")


@pytest.fixture
def darcy_config():
    """Factory of tiny 2D run configs (see :func:`tiny_darcy_config`)."""
    return tiny_darcy_config


@pytest.fixture
def darcy_writer():
    """The toy Darcy writer itself, for tests that need other grids (``square=False``)."""
    return write_toy_darcy


@pytest.fixture
def heat_file(tmp_path):
    """Path of a toy trajectory data set (10 trajectories of 12 frames on a 16 x 16 periodic grid)."""
    return write_toy_heat(tmp_path / "heat.h5")


@pytest.fixture
def time_mix(monkeypatch):
    """Register :class:`TimeMix` as the model ``time_mix`` for one test."""
    monkeypatch.setitem(registry.MODELS, "time_mix", registry.ModelEntry(TimeMix))
    return TimeMix


class LargestOutput(TorchDispatchMode):
    """Records the largest number of elements of any tensor an op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.fixture
def largest_output():
    """The recorder of the largest tensor any op returns (a dispatch mode: ``with largest_output() as m``)."""
    return LargestOutput


@contextmanager
def _edit_h5(path):
    """Open a data file for editing with h5py, then drop its checksums (an edited file would read as corrupt): the
    whole-file one in the user block and the attributes' one."""
    from opformer.data.store import ATTRS_DIGEST, CHECKSUM_MAGIC

    with h5py.File(path, "a") as f:
        yield f
        if ATTRS_DIGEST in f.attrs:
            del f.attrs[ATTRS_DIGEST]
    with open(path, "r+b") as raw:
        raw.write(bytes(len(CHECKSUM_MAGIC)))


@pytest.fixture
def edit_h5():
    """``with edit_h5(path) as f:`` edits a data file as another program would (its checksums are dropped)."""
    return _edit_h5


class _Interrupt(Exception):
    """Raised by the progress callback of an interrupted generation."""


def _interrupted_then_resumed(pde: str, out, samples: int, **flags) -> list[int]:
    """Generate ``pde`` into ``out``, interrupted after its first chunk, then again with the same arguments; returns
    the second run's progress counts (the chunks it solved, or took from the first run)."""
    from opformer.data.generate import generate_file

    def stop(count: int) -> None:
        raise _Interrupt

    with pytest.raises(_Interrupt):
        generate_file(pde, out, samples, progress=stop, **flags)
    counts: list[int] = []
    generate_file(pde, out, samples, progress=counts.append, **flags)
    return counts


@pytest.fixture
def resume_after_interrupt():
    """``resume_after_interrupt(pde, out, samples, chunk=..., **flags)``: an interrupted, then resumed generation."""
    return _interrupted_then_resumed


@pytest.fixture
def layouts():
    """The writers of the published layouts: ``layouts.fno_v5(path, u, a)``, ``layouts.pdearena(...)``, ..."""
    return SimpleNamespace(fno_v5=write_fno_v5, fno_v73=write_fno_v73, pdebench_cfd=write_pdebench_cfd,
                           pdebench_2d=write_pdebench_2d, pdearena=write_pdearena, the_well=write_well_file)


@pytest.fixture
def member_writer():
    """The toy mixture-member writer itself, for tests that need other grids, channels or frames."""
    return write_toy_member


@pytest.fixture
def toy_mixture(tmp_path):
    """Two mixture members: a.h5, 1 channel on a periodic 16^2 grid, and b.h5, 2 channels on 32^2 cells (6
    trajectories of 7 frames each)."""
    return [write_toy_member(tmp_path / "a.h5"),
            write_toy_member(tmp_path / "b.h5", n=32, channels=2, grid="cells", seed=1)]


@pytest.fixture
def mixture_config():
    """Factory of tiny mixture run configs (see :func:`tiny_mixture_config`)."""
    return tiny_mixture_config
