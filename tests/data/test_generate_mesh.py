"""`opformer generate` of the finite-element mesh sets: chunks kept as mesh files, resumed after an
interruption, the file verified; flags checked by the CLI in one line."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("skfem")
pytest.importorskip("triangle")

from opformer.cli import main  # noqa: E402
from opformer.data.generate import generate_file  # noqa: E402
from opformer.data.store import read_info, read_mesh_samples, verify_file  # noqa: E402

ARGS = dict(pde="elasticity", samples=5, resolution=10)


class Interrupt(Exception):
    pass


@pytest.mark.slow
def test_interrupted_mesh_generation_resumes_and_equals_one_run(tmp_path):
    whole = generate_file(out=tmp_path / "whole.h5", chunk=5, **ARGS)
    out, calls = tmp_path / "el.h5", []

    def stop_at_the_fourth_sample(count: int) -> None:
        calls.append(count)
        if len(calls) == 4:
            raise Interrupt

    with pytest.raises(Interrupt):
        generate_file(out=out, chunk=2, progress=stop_at_the_fourth_sample, **ARGS)
    folder = tmp_path / ".el.h5.parts"
    assert not out.exists() and sorted(p.name for p in folder.glob("*.h5")) == ["00000000.h5"]
    solved = []
    path = generate_file(out=out, chunk=2, progress=solved.append, **ARGS)
    assert solved == [2, 1, 1, 1] and not folder.exists()  # the kept chunk reported at once, the rest solved
    verify_file(path)
    info = read_info(path)
    assert info.kind == "mesh" and info.mesh["task"] == "operator" and info.mesh["inputs"] == []
    assert info.pde["poisson"] == 0.45 and info.solver["element"] == "P2"
    for a, b in zip(read_mesh_samples(path, range(5)), read_mesh_samples(whole, range(5))):
        np.testing.assert_array_equal(a.points, b.points)
        np.testing.assert_array_equal(a.fields["von_mises"], b.fields["von_mises"])
        assert a.settings == b.settings and a.fields["stress"].shape == (len(a.points), 3)


@pytest.mark.slow
def test_cli_generates_heat_trajectories_and_airfoils(tmp_path, capsys):
    heat, foil = tmp_path / "heat.h5", tmp_path / "foil.h5"
    assert main(["generate", "heat-mesh", "--samples", "2", "--resolution", "16", "--t-final", "0.2",
                 "--frame-dt", "0.1", "--out", str(heat)]) == 0
    info = read_info(heat)
    assert info.mesh["task"] == "trajectory" and info.times == pytest.approx((0.0, 0.1, 0.2))
    (sample,) = read_mesh_samples(heat, [1])
    assert sample.fields["u"].shape == (3, len(sample.points), 1) and sample.weights_from == "lumped"
    assert main(["generate", "airfoil", "--samples", "1", "--resolution", "16", "--far-radius", "3",
                 "--max-alpha", "0", "--out", str(foil)]) == 0
    (sample,) = read_mesh_samples(foil, [0])
    np.testing.assert_allclose(sample.fields["freestream"], [[1.0, 0.0]] * len(sample.points))
    assert read_info(foil).mesh["inputs"] == [["freestream", 2]]


def test_cli_refuses_a_bad_flag_in_one_line(tmp_path, capsys):
    out = tmp_path / "x.h5"
    assert main(["generate", "elasticity", "--samples", "1", "--poisson", "0.5", "--out", str(out)]) == 2
    assert capsys.readouterr().err == "opformer generate: error: --poisson 0.5: expected a ratio in [0, 0.5)\n"
    assert main(["generate", "airfoil", "--samples", "1", "--young", "2", "--out", str(out)]) == 2
    assert capsys.readouterr().err == "opformer generate: error: --young: only used by elasticity (not by airfoil)\n"
    assert not out.exists()
