"""The README: its first screen orients (a short pitch, the two commands first, the models and data tables, then
the Python API), its tables render as tables with every row the header's width, the paths it names exist, its
Python snippet runs as written (on a run made the way `make demo` makes it, shrunk), and every figure of its
Results section is one of the results files it cites (the paper's figures: one of the ledgers', docs/papers/).
The ledgers' counts, which the Results section quotes, are checked with the generated pages (tests/test_ledgers.py)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
if not README.is_file():  # an installed copy without the repository
    pytest.skip("README.md not beside the tests", allow_module_level=True)

markdown_it = pytest.importorskip("markdown_it", reason="the dev extra's markdown-it-py parses the README")


def parse() -> list:
    """The README's block tokens, parsed as CommonMark with GitHub's pipe tables."""
    return markdown_it.MarkdownIt("commonmark").enable("table").parse(README.read_text())


def tables() -> list[dict]:
    """Each table: its source lines ``(first, last)``, header cells and rows of cells (inline text)."""
    tokens, out = parse(), []
    for i, token in enumerate(tokens):
        if token.type == "table_open":
            table = {"lines": token.map, "header": [], "rows": []}
            row, part = None, None
            for t in tokens[i + 1:]:
                if t.type == "table_close":
                    break
                if t.type in ("thead_open", "tbody_open"):
                    part = t.type
                elif t.type == "tr_open":
                    row = []
                elif t.type == "inline":
                    row.append(t.content)
                elif t.type == "tr_close":
                    table["header" if part == "thead_open" else "rows"].append(row)
            table["header"] = table["header"][0]
            out.append(table)
    return out


def source_cells(line: str) -> int:
    """The cells of a pipe-table line as written: unescaped pipes between a leading and a trailing one."""
    return len(re.split(r"(?<!\\)\|", line.strip().strip("|")))


def test_the_first_commands_are_make_demo_and_make_test_and_the_makefile_has_them():
    fences = [t for t in parse() if t.type == "fence"]
    commands = [line.split("#")[0].strip() for line in fences[0].content.splitlines()]
    assert commands[:2] == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    for command in commands:
        assert re.search(rf"^{command.split()[1]}:", makefile, flags=re.M), command


def test_the_first_screen_is_a_short_pitch_the_commands_then_models_data_and_the_api():
    tokens = parse()
    first_fence = next(i for i, t in enumerate(tokens) if t.type == "fence")
    pitch = [t for t in tokens[:first_fence] if t.type == "inline"][1:]  # after the title
    assert len(pitch) == 1 and len(pitch[0].content.splitlines()) <= 3
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h2"]
    order = ["The models", "The data", "The command", "The Python API", "Results"]
    assert [h for h in headings if h in order] == order
    results = README.read_text().split("## Results", 1)[1].split("\n## ", 1)[0]
    for ledger in LEDGERS:
        assert f"docs/papers/{ledger}" in results


def test_every_table_renders_with_rows_as_wide_as_its_header():
    lines = README.read_text().splitlines()
    found = tables()
    assert len(found) >= 4
    for table in found:
        first, last = table["lines"]
        width = len(table["header"])
        assert width >= 2 and all(len(row) == width for row in table["rows"])
        for line in lines[first:last]:  # as written: markdown-it pads short rows and drops extra cells silently
            assert source_cells(line) == width, line
    # every pipe line outside code blocks belongs to a table (a broken delimiter row makes a paragraph instead)
    covered = {n for t in found for n in range(*t["lines"])}
    fenced = {n for t in parse() if t.type == "fence" for n in range(*t.map)}
    piped = {n for n, line in enumerate(lines) if line.startswith("|") and n not in fenced}
    assert piped <= covered, sorted(piped - covered)


def test_the_models_and_data_tables_name_every_family_and_solver():
    from opformer.data.readers.registry import READERS
    from opformer.pde.registry import PDES

    by_header = {tuple(t["header"]): t for t in tables()}
    models = by_header[("family", "paper", "dims", "train one", "verified")]
    families = " ".join(row[0] for row in models["rows"])
    for family in ("Galerkin / Fourier Transformer", "FactFormer", "DPOT", "FNO"):
        assert family in families
    data = " ".join(" ".join(row) for row in by_header[("data", "how", "what", "verified by")]["rows"])
    for name in PDES:
        assert re.search(rf"`(opformer generate )?{name}`", data), name
    for name in READERS:
        assert re.search(rf"`(opformer convert )?{name}`", data), name


def test_the_paths_the_readme_names_exist():
    named = set(re.findall(r"`((?:configs|docs|benchmarks)/[^`\s]*)`", README.read_text()))
    assert len(named) > 10
    assert [p for p in sorted(named) if not (ROOT / p).exists()] == []


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


# The Results section against the results files and the ledgers.

LEDGERS = ("galerkin-transformer.md", "factformer.md", "dpot.md")
#: a figure: digits with thousands commas, decimals and an exponent, not part of a word or a name (``FNO2d``,
#: ``3D``, ``x86_64``, ``^3``); a trailing ``x`` (a ratio) or ``%`` may follow
NUMBER = re.compile(r"(?<![\w.^])\d+(?:,\d{3})*(?:\.\d+)?(?:e[+-]?\d+)?(?!\d|\.\d|[A-Za-wyz_])")
CITED = re.compile(r"(?:benchmarks/results|docs/papers)/[\w./-]+\.(?:md|json)")


def figures(text: str) -> list[str]:
    """The figures of a piece of the README as written: code spans, link targets and the names of the papers'
    tables, figures and examples ("Table 2a") left out."""
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"\b(?:Tables?|Figures?|Examples?) \d+(?:\.\d+)?[a-z]?", " ", text)
    return NUMBER.findall(text)


def file_figures(paths: list[str], with_json: bool = False) -> set[str]:
    """Every figure written in the files ``paths``; ``with_json``: and in the JSON beside a markdown results file
    (whose runs' overrides hold the grid, epochs and samples of the scale column)."""
    found: set[str] = set()
    for path in paths:
        beside = with_json and path.startswith("benchmarks/results/")
        for name in {path, path[:-3] + ".json"} if beside else {path}:
            if (ROOT / name).is_file():
                found.update(NUMBER.findall((ROOT / name).read_text()))
    return found


def results_blocks() -> list[tuple[str, object]]:
    """The Results section's blocks in order: ``("paragraph", text)`` and ``("table", table)``."""
    tokens, blocks, inside = parse(), [], False
    lines = {tuple(t["lines"]): t for t in tables()}
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag == "h2":
            inside = tokens[i + 1].content == "Results"
        elif inside and token.type == "paragraph_open" and token.level == 0:
            blocks.append(("paragraph", tokens[i + 1].content))
        elif inside and token.type == "table_open":
            blocks.append(("table", lines[tuple(token.map)]))
    return blocks


def stale(text: str, sources: list[str], with_json: bool = False) -> list[str]:
    """The figures of ``text`` that none of ``sources`` holds (or all of them when it cites none). A results figure
    must be in the markdown file cited, as a reader finds it there: the JSON beside it holds every epoch's losses,
    where a changed figure would too often match some other value."""
    known = file_figures(sources, with_json)
    return [f for f in figures(text) if f not in known]


def test_every_figure_of_the_results_section_is_in_the_file_it_cites():
    blocks, missing, last_paragraph = results_blocks(), [], ""
    assert len([b for b in blocks if b[0] == "table"]) >= 3
    for kind, block in blocks:
        if kind == "paragraph":
            cited = CITED.findall(block)
            missing += [(f, cited, block[:60]) for f in stale(block, cited)]
            last_paragraph = block
            continue
        header = block["header"]
        ledgers = [c for c in CITED.findall(last_paragraph) if c.startswith("docs/papers/")]
        assert ledgers, f"the paragraph before the table {header} links no ledger"
        for row in block["rows"]:
            cited = CITED.findall(row[header.index("results")])
            assert cited, f"the row {row[0]!r} cites no results file"
            for column, cell in zip(header, row):
                # the paper's figures from the ledger; the scale column holds the paper's scale (the ledger's) beside ours
                sources = ledgers if column == "paper" else cited + ledgers if column.startswith("scale") else cited
                missing += [(f, sources, row[0]) for f in stale(cell, sources, with_json=column.startswith("scale"))]
    assert missing == [], "figures of the README not in the files they cite: " + repr(missing)
