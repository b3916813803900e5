"""The Python examples of docs/data-format.md run as they stand, and write what they say."""

import re
from pathlib import Path

import numpy as np

from opformer.data.store import read_arrays, read_fields, read_info, verify_file

PAGE = Path(__file__).resolve().parents[2] / "docs" / "data-format.md"


def section_code(heading: str) -> str:
    """The first ```python block after ``heading`` in docs/data-format.md."""
    text = PAGE.read_text()
    return re.search(r"```python\n(.*?)```", text[text.index(heading):], re.DOTALL).group(1)


def test_the_writers_example_writes_the_exact_heat_solution(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(section_code("## Writing data from Python"), str(PAGE), "exec"), namespace)
    assert capsys.readouterr().out.split() == ["operator", "40"]
    heat = namespace["heat"]
    for name in ("heat_pairs.h5", "heat_inputs.h5", "heat_frames.h5"):
        verify_file(tmp_path / name)
    pairs = read_info("heat_pairs.h5")
    assert pairs.spatial_shape == (64,) and pairs.input_channels == ["u0"] and pairs.target_channels == ["u"]
    x, y = read_arrays("heat_pairs.h5", slice(None))
    np.testing.assert_allclose(x[..., 0], heat(0.0), rtol=0, atol=1e-6)
    np.testing.assert_allclose(y[..., 0], heat(1.0), rtol=0, atol=1e-6)
    inputs = read_info("heat_inputs.h5")
    assert inputs.n_samples == 40 and not inputs.has_target and inputs.target_channels == ["u"]
    frames = read_info("heat_frames.h5")
    assert frames.kind == "trajectory" and frames.input_channels == ["u"] and len(frames.times) == 12
    fields = read_fields("heat_frames.h5", slice(None))
    assert fields.shape == (40, 12, 64, 1)
    np.testing.assert_allclose(fields[:, -1, :, 0], heat(1.0), rtol=0, atol=1e-6)
