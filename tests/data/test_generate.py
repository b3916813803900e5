"""Resumable trajectory generation: chunks kept beside the output, reused after an interruption."""

from __future__ import annotations

import numpy as np
import pytest

from opformer.data.generate import generate_file
from opformer.data.generation_chunks import GenerationChunks
from opformer.data.store import read_fields, read_info
from opformer.pde.navier_stokes import generate_fno_nu

ARGS = dict(pde="navier-stokes", samples=5, resolution=16, t_final=2.0)


class Interrupt(Exception):
    pass


@pytest.mark.slow
def test_chunked_generation_equals_one_call_and_cleans_up(tmp_path):
    path = generate_file(out=tmp_path / "ns.h5", chunk=2, **ARGS)
    whole, settings = generate_fno_nu(5, 1e-3, resolution=16, t_final=2.0)
    assert np.array_equal(read_fields(path, slice(None)), whole)
    assert list(read_info(path).times) == settings["pde"]["times"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ns.h5"]  # no chunk folder left


@pytest.mark.slow
def test_interrupted_generation_resumes_from_its_chunks(tmp_path):
    out = tmp_path / "ns.h5"
    calls = []

    def stop_after_two_chunks(count: int) -> None:
        calls.append(count)
        if len(calls) == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        generate_file(out=out, chunk=2, progress=stop_after_two_chunks, **ARGS)
    assert not out.exists()
    folder = tmp_path / ".ns.h5.parts"
    assert sorted(p.name for p in folder.glob("*.npy")) == ["00000000.npy"]  # the 2nd chunk was not saved
    first_chunk = np.load(folder / "00000000.npy")

    solved = []
    path = generate_file(out=out, chunk=2, progress=solved.append, **ARGS)
    assert solved == [2, 2, 1]  # the stored chunk is reported, then the rest solved
    fields = read_fields(path, slice(None))
    assert np.array_equal(fields[:2], first_chunk)
    assert np.array_equal(fields, generate_fno_nu(5, 1e-3, resolution=16, t_final=2.0)[0])
    assert not folder.exists()


def test_chunks_of_other_settings_are_discarded(tmp_path):
    parts = GenerationChunks(tmp_path / "x.h5", {"seed": 0})
    parts.save(0, np.ones((2, 3), np.float32), {"pde": {}})
    assert np.array_equal(GenerationChunks(tmp_path / "x.h5", {"seed": 0}).load(0), np.ones((2, 3)))
    assert GenerationChunks(tmp_path / "x.h5", {"seed": 1}).load(0) is None
    assert GenerationChunks(tmp_path / "x.h5", {"seed": 0}).load(0) is None  # the old chunks are gone for good
