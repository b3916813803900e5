"""The documentation: every object the API reference names exists, every page of docs/ is in the site's nav, the
pages cite nothing a reader outside the repository lacks, and comments in src/ carry no issue numbers or dates."""

import importlib
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
if not (ROOT / "mkdocs.yml").is_file():  # an installed copy without the repository
    pytest.skip("mkdocs.yml not beside the tests", allow_module_level=True)

#: what a page must not cite: files of the machines opformer was developed on, issue numbers, dates
OUTSIDE = re.compile(r"\bshared/(?:spec|gpu|papers)\b|\.library\b|device README|\bissues? #?\d+|\b20\d\d-\d\d-\d\d\b",
                     re.IGNORECASE)
HISTORY = re.compile(r"\bissues? #?\d+|\b20\d\d-\d\d-\d\d\b", re.IGNORECASE)


def resolve(path: str) -> object:
    """The object a dotted path names: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(path)


def test_every_object_of_the_api_reference_exists():
    paths = re.findall(r"^::: (\S+)", (DOCS / "api.md").read_text(), re.MULTILINE)
    assert "opformer.config.load_config" in paths
    for path in paths:
        assert callable(resolve(path)), path


def pages(nav: list) -> set[str]:
    """The pages of a mkdocs nav, sections included."""
    found = set()
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            found |= pages(value) if isinstance(value, list) else {value}
    return found


def test_every_page_is_in_the_nav():
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    assert pages(nav) == {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}


def test_the_pages_cite_nothing_outside_the_repository():
    pages = [*DOCS.rglob("*.md"), ROOT / "README.md", ROOT / "DEVELOPERS.md"]
    cited = [f"{page.relative_to(ROOT)}:{i}: {m[0]}" for page in pages
             for i, line in enumerate(page.read_text().splitlines(), 1) for m in OUTSIDE.finditer(line)]
    assert cited == []


def test_the_sources_carry_no_issue_numbers_or_dates():
    found = [f"{path.relative_to(ROOT)}:{i}: {m[0]}" for path in (ROOT / "src").rglob("*.py")
             for i, line in enumerate(path.read_text().splitlines(), 1) for m in HISTORY.finditer(line)]
    assert found == []


@pytest.mark.slow
def test_the_api_pages_example_trains_from_a_mapping_and_predicts(tmp_path, monkeypatch):
    import torch

    monkeypatch.chdir(tmp_path)
    for page, heading in (("data-format.md", "## Writing data from Python"),
                          ("api.md", "## From your arrays to predictions")):
        text = (DOCS / page).read_text()
        code = re.search(r"```python\n(.*?)```", text[text.index(heading):], re.DOTALL).group(1)
        namespace: dict = {}
        exec(compile(code, page, "exec"), namespace)
    assert namespace["config"].data.n_train == 24 and namespace["config"].train.device == "cpu"
    assert namespace["summary"]["epochs"] == 2 and (tmp_path / "runs" / "heat" / "best.pt").is_file()
    prediction = namespace["prediction"]
    assert prediction.shape == (8, 64, 1) and torch.isfinite(prediction).all()
