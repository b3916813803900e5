"""The README's Python snippet runs as written (on a run made the way `make demo` makes it, shrunk)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
if not README.is_file():  # an installed copy without the repository
    pytest.skip("README.md not beside the tests", allow_module_level=True)


def test_the_python_api_snippet_runs_as_written(tmp_path, monkeypatch, toy_writer, tiny_config):
    from opformer.config import config_from_dict
    from opformer.train.trainer import train

    (snippet,) = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    monkeypatch.chdir(tmp_path)
    data = toy_writer(tmp_path / "toy.h5", n=1024)
    train(config_from_dict(tiny_config(data, epochs=1)), tmp_path / "runs" / "quickstart" / "gt")
    scope: dict = {}
    exec(compile(snippet, str(README), "exec"), scope)
    assert scope["u"].shape == (4, 1024, 1) and scope["prediction"].shape == (4, 1024, 1)
    assert sum(p.numel() for p in scope["model"].parameters()) == 530_305
    assert "gt_burgers" in scope["PRESETS"]
