"""`opformer generate darcy`: the file it writes, its defaults and its one-line errors."""

import numpy as np
import pytest

from opformer.cli import main
from opformer.grids import stride_for
from opformer.data.store import read_arrays, read_info


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, *needles):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_generate_darcy_writes_a_self_describing_file(capsys, tmp_path):
    out = tmp_path / "d.h5"
    code, stdout, _ = run_cli(capsys, "generate", "darcy", "--samples", 3, "--resolution", 13, "--seed", 4,
                              "--workers", 1, "--out", out)
    assert code == 0 and "wrote 3 samples" in stdout
    info = read_info(out)
    assert info.spatial_shape == (13, 13) and info.n_samples == 3 and info.seed == 4
    assert info.input_channels == ["a"] and info.target_channels == ["u"]
    assert info.domain == {"lengths": [1.0, 1.0], "periodic": [False, False]}
    assert info.pde["name"] == "darcy" and info.pde["coefficient"]["tau"] == 3.0
    assert "harmonic" in info.solver["face_coefficient"] and info.solver["tolerance"] == 1e-10
    a, u = read_arrays(out, slice(0, 3))
    assert a.shape == u.shape == (3, 13, 13, 1)
    assert set(np.unique(a).tolist()) == {3.0, 12.0}
    assert np.all(u[:, 0] == 0) and np.all(u[:, :, -1] == 0) and u[:, 1:-1, 1:-1].min() > 0
    assert stride_for(13, 7, periodic=False) == 2  # closed grid: (13 - 1) / 2 + 1 nodes


@pytest.mark.parametrize("argv, needle", [
    (["--samples", 0], "--samples 0: expected a positive number"),
    (["--samples", 1, "--resolution", 2], "--resolution 2: expected at least 3 grid nodes"),
    (["--samples", 1, "--resolution", 5, "--workers", 0], "--workers 0: expected a positive number"),
])
def test_bad_arguments_give_one_line_errors(capsys, tmp_path, argv, needle):
    out = tmp_path / "bad.h5"
    one_line_error(*run_cli(capsys, "generate", "darcy", *argv, "--out", out)[::2], needle)
    assert not out.exists()


def test_workers_is_rejected_for_burgers(capsys, tmp_path):
    one_line_error(*run_cli(capsys, "generate", "burgers", "--samples", 1, "--workers", 2,
                            "--out", tmp_path / "b.h5")[::2], "--workers: only used by darcy")
