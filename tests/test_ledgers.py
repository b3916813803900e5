"""The paper ledgers kept as data (benchmarks/papers/ledgers/*.yaml): the verdict rule on small cases, every cited
results file and key, every command, every paper figure found in the paper's text, and the generated pages (the
ledgers and the README's Results parts) equal to what is committed."""

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "benchmarks" / "papers" / "ledger.py").is_file():  # an installed copy without the repository
    pytest.skip("benchmarks/ not beside the tests", allow_module_level=True)

from benchmarks.papers import ledger  # noqa: E402

PAPERS = ROOT.parent / "shared" / "papers"


def fig(value: float, noise: float = 0.0) -> "ledger.Figure":
    return ledger.Figure(value, noise, 1)


# The rule.

def test_an_order_one_noise_width_apart_is_within_noise_not_a_direction():
    found = ledger.order_verdict(fig(1.0, 0.1 / 2**0.5), fig(1.1, 0.1 / 2**0.5))  # combined noise 0.1, gap 0.1
    assert found.verdict == "within noise"
    assert ledger.order_verdict(fig(1.1, 0.1 / 2**0.5), fig(1.0, 0.1 / 2**0.5)).verdict == "within noise"


def test_an_order_beyond_twice_the_combined_noise_is_a_direction_or_reversed():
    assert ledger.order_verdict(fig(1.0, 0.03), fig(1.1, 0.03)).verdict == "direction reproduced"  # 2.36 widths
    assert ledger.order_verdict(fig(1.1, 0.03), fig(1.0, 0.03)).verdict == "not reproduced"
    assert ledger.order_verdict(fig(1.0, 0.3), fig(2.0, 0.4)).verdict == "within noise"  # exactly 2 widths


def test_a_figure_within_ten_percent_or_its_noise_is_reproduced_only_at_equal_scale():
    assert ledger.value_verdict(1.0, fig(1.099), []).verdict == "reproduced"
    assert ledger.value_verdict(1.0, fig(1.101), []).verdict == "not reproduced"
    assert ledger.value_verdict(1.0, fig(0.85, 0.2), []).verdict == "reproduced"  # the noise is larger
    assert ledger.value_verdict(1.0, fig(1.0), ["trained at 512, evaluated zero-shot"]).verdict == "not comparable"


def test_a_justified_difference_keeps_a_figure_comparable():
    claim = {"differs": {"scale": "64^2"}, "justified": {"scale": "the paper's own ablation grid"}}
    assert ledger.differences(claim) == []
    assert ledger.differences({"differs": {"scale": "64^2"}}) == ["64^2"]
    with pytest.raises(ledger.LedgerError):
        ledger.differences({"differs": {"seeds": "one"}})


def test_the_noise_of_one_seed_is_the_larger_of_the_standard_error_and_the_seed_spread(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger, "ROOT", tmp_path)
    (tmp_path / "r.json").write_text('{"runs": [{"m": "a", "e": 2.0, "s": 1.0, "n": 4}, {"m": "b", "e": 3.0}]}')
    ref = {"file": "r.json", "key": "runs[m=a].e", "std": "runs[m=a].s", "samples": "runs[m=a].n"}
    assert ledger.figure(ref, 0.1) == ledger.Figure(2.0, 0.5, 1)  # 1 / sqrt(4) > 10% of 2
    assert ledger.figure(ref, 0.5) == ledger.Figure(2.0, 1.0, 1)
    seeds = ledger.figure({"file": "r.json", "seeds": [{"key": "runs[m=a].e"}, {"key": "runs[m=b].e"}]}, 0.1)
    assert seeds.value == 2.5 and seeds.noise == pytest.approx(0.5**0.5) and seeds.seeds == 2


def test_a_key_path_selects_one_entry_or_fails():
    data = {"a": [{"k": 1, "v": {"0.01": 5}}, {"k": 2, "j": 3, "v": 6}]}
    assert ledger.lookup(data, "a[k=1].v[0.01]") == 5
    assert ledger.lookup(data, "a[j=-].v[0.01]") == 5  # a field it lacks
    assert ledger.lookup(data, "a[1].v") == 6
    with pytest.raises(KeyError):
        ledger.lookup(data, "a[k=3].v")


# The data files.

LEDGERS = {name: ledger.load(name) for name in ledger.NAMES}  #: each data file read once


def all_rows() -> list[tuple[str, dict]]:
    return [(name, row) for name in ledger.NAMES for row in ledger.rows(LEDGERS[name])]


def refs(claim: dict) -> list[dict]:
    """Every results reference of a claim (seeds expanded)."""
    found = [claim[k] for k in ("ours",) if isinstance(claim.get(k), dict)]
    found += [claim[side]["ours"] for side in ("lower", "higher") if side in claim]
    out = []
    for ref in found:
        out += [dict(seed, file=seed.get("file", ref.get("file"))) for seed in ref.get("seeds", [])]
        if "file" in ref and "seeds" not in ref:
            out.append(ref)
    return out


def test_every_ledger_has_a_data_file_and_every_row_a_verdict():
    assert "galerkin-transformer" in ledger.NAMES
    for name in ledger.NAMES:
        judged = ledger.judged(LEDGERS[name])
        assert len(judged) > 20 and all(v.verdict in ledger.VERDICTS for _, v in judged)


def test_every_cited_results_file_exists_and_every_figure_sits_under_its_key():
    missing = []
    for name, row in all_rows():
        for ref in refs(row["claim"]):
            try:
                ledger.figure(ref, 0.0)
            except (ledger.LedgerError, KeyError, IndexError, TypeError, ValueError) as error:
                missing.append(f"{name}: {row['row']}: {error}")
    assert missing == []


CITED = re.compile(r"`([\w./-]+\.(?:md|json|png|yaml))`|`((?:benchmarks|configs|docs)/[\w./-]+)`")


def stale_names(text: str, results: list[str]) -> list[str]:
    """The files ``text`` names in backticks that do not exist: a path from the repository root, else a file of
    benchmarks/results/ or configs/ ending so (placeholders in capitals, such as NAME or RUN/, aside)."""
    stale = []
    for match in CITED.finditer(text):
        cited = match.group(1) or match.group(2)
        if any(part.isupper() for part in cited.split("/")[:-1]) or "NAME" in cited or (ROOT / cited).exists():
            continue
        if not any(p == cited or p.endswith("/" + cited) for p in results):
            stale.append(cited)
    return stale


def test_every_file_a_row_or_a_ledger_names_exists():
    results = [p.relative_to(ROOT).as_posix() for folder in ("benchmarks/results", "configs")
               for p in (ROOT / folder).rglob("*")]
    stale = [f"{name}: {row['row']}: {cited}" for name, row in all_rows()
             for column in ("paper", "ours", "scale", "command", "note")
             for cited in stale_names(str(row.get(column, "")), results)]
    stale += [f"{name}: {cited}" for name in ledger.NAMES for block in LEDGERS[name]["blocks"]
              if "markdown" in block for cited in stale_names(block["markdown"], results)]
    assert stale == []


def command_targets(command: str) -> list[str]:
    """The modules and scripts a row's command runs: ``python -m MOD``, ``bash FILE``, ``python FILE``."""
    found = []
    for span in re.findall(r"`([^`]*)`", command):
        words = shlex.split(span, posix=True) if span.count("'") % 2 == 0 else span.split()
        for i, word in enumerate(words[:-1]):
            if word == "-m" and words[i + 1] != "opformer":
                found.append(words[i + 1].replace(".", "/") + ".py")
            elif word in ("python", "bash") and words[i + 1].endswith((".py", ".sh")):
                found.append(words[i + 1])
    return found


def test_every_command_names_a_module_or_script_that_exists():
    """The rows' commands and those of the ledgers' prose (a copy of the tree elsewhere, an absolute path, aside)."""
    stale = [f"{name}: {row['row']}: {target}" for name, row in all_rows()
             for target in command_targets(str(row["command"])) if not (ROOT / target).is_file()]
    stale += [f"{name}: {target}" for name in ledger.NAMES for block in LEDGERS[name]["blocks"]
              if "markdown" in block for target in command_targets(block["markdown"])
              if not target.startswith("/") and not (ROOT / target).is_file()]
    assert stale == []
    assert command_targets("`python -m benchmarks.papers.galerkin.burgers --models gt`") == [
        "benchmarks/papers/galerkin/burgers.py"]
    assert command_targets("`python benchmarks/burgers.py --models gt`") == ["benchmarks/burgers.py"]  # a stale one


def test_every_gpu_row_is_a_row_of_the_gpu_script():
    script = (ROOT / "benchmarks" / "systems" / "gpu_rows.sh").read_text()
    for name, row in all_rows():
        if row["claim"]["type"] == "gpu":
            assert f"row_{row['claim']['row']}()" in script, (name, row["row"])


def squeeze(text: str) -> str:
    """A paper's text without what OCR and markdown put between a figure's characters."""
    text = re.sub(r"</?b>|\$|\\", "", text).replace("−", "-").replace("×", "x")
    return re.sub(r"\s+", "", text)


def paper_figures(claim: dict) -> list[dict]:
    found = [claim.get("paper")] + [claim[side].get("paper") for side in ("lower", "higher") if side in claim]
    return [p for p in found if isinstance(p, dict) and p.get("text")]


@pytest.mark.skipif(not PAPERS.is_dir(), reason="the papers' text is not beside the repository")
def test_every_paper_figure_is_in_the_papers_text():
    texts = {path.name[:3]: squeeze(path.read_text()) for path in PAPERS.glob("0*.txt")}
    missing = []
    for name, row in all_rows():
        allowed = LEDGERS[name]["papers"]
        for paper in paper_figures(row["claim"]):
            where = [paper["paper"]] if "paper" in paper else allowed
            if not any(squeeze(str(paper["text"])) in texts[w] for w in where):
                missing.append(f"{name}: {row['row']}: {paper['text']!r} ({paper.get('where')})")
            assert paper.get("where"), (name, row["row"])
    assert missing == []


def test_the_committed_pages_are_the_generated_ones():
    stale = [str(path.relative_to(ROOT)) for path, text in ledger.generated().items() if path.read_text() != text]
    assert stale == [], "run python -m benchmarks.papers.ledger"


def test_each_ledger_and_the_readme_state_the_counts_the_rule_gives():
    readme = " ".join(ledger.README.read_text().split())
    for name in ledger.NAMES:
        tally = ledger.counts(LEDGERS[name])
        page = " ".join((ledger.DOCS / f"{name}.md").read_text().split())
        assert f"**Verdicts: {ledger.count_line(tally['accuracy'])}." in page
        assert f"its verdicts: {ledger.count_line(tally['accuracy'])}; other rows: " in readme


def test_every_readme_row_states_the_papers_scale_and_ours():
    shown = [(name, row) for name, row in all_rows() if "readme" in row]
    assert len(shown) > 30
    for name, row in shown:
        scale = row["readme"]["scale"]
        assert scale.startswith("paper: ") and "; here: " in scale, (name, row["row"], scale)
