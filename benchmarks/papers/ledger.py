"""The paper ledgers: rows as data (``benchmarks/papers/ledgers/*.yaml``), verdicts by one rule, markdown generated.

``python -m benchmarks.papers.ledger`` rewrites ``docs/papers/*.md`` and the ledger parts of the README's Results
section from the data files; ``--check`` only says whether they are up to date (exit 1 when not).

A row holds the paper's figure with its source (table, column, page), opformer's figure as a results file and a
key path inside it (so code reads it), the scale on both sides, the protocol, convergence and the noise. Its
verdict is :func:`verdict`'s, never written by hand. The rule (:data:`RULE`, printed at the top of each ledger):

- **reproduced**: the same metric and protocol, the paper's scale (or a scale the row justifies), a converged
  run, and opformer's figure within 10% of the paper's, or within its noise where the noise is larger;
- **direction reproduced**: the paper's order of two figures holds by more than twice their combined noise;
- **within noise**: the two figures differ by at most twice their combined noise (counted apart; never a direction);
- **not reproduced**: the paper's order reversed by more than twice the combined noise, or a figure off by more
  than the tolerance at equal metric, protocol, scale and convergence (or an outcome, such as training without
  diverging, that the paper reports and opformer does not see);
- **not comparable**: a single figure measured at another scale or protocol, with another metric or unconverged,
  or an order measured with another metric or protocol: no verdict on it, the reason given;
- **not run** and **GPU script ready, not run**: no committed result (the reason given; a row of
  ``benchmarks/systems/gpu_rows.sh``).

The noise of a figure: over seeds, their standard deviation; of one seed, the larger of the test mean's standard
error (the per-sample spread over the square root of the test samples) and the ledger's seed spread (a relative
figure measured over seeds, stated with its source in the ledger). Two figures' combined noise is the root of the
sum of their squares.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import math
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from opformer.io import write_atomic

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "ledgers"
DOCS = ROOT / "docs" / "papers"
README = ROOT / "README.md"
NAMES = ("galerkin-transformer", "factformer", "dpot")  #: the ledgers, in the README's order

TOLERANCE = 0.10  #: a figure within 10% of the paper's is reproduced (or within its noise, where that is larger)
WIDTHS = 2.0  #: an order holds, or is reversed, beyond this many combined noise widths

VERDICTS = ("reproduced", "direction reproduced", "within noise", "not reproduced", "not comparable", "not run",
            "GPU script ready, not run")
KINDS = {"accuracy": "accuracy rows", "other": "other rows (parameter counts, settings, timings)"}
#: the comparabilities a single figure needs to be reproduced or not
DIFFERS = ("metric", "protocol", "scale", "converged")

RULE = f"""How a verdict is computed (`benchmarks/papers/ledger.py`, from the data file
`benchmarks/papers/ledgers/NAME.yaml`; nobody writes one):

- **reproduced:** the same metric and protocol, the paper's scale (or a scale the row justifies), a converged run
  (the paper's own schedule run to its end, or the last fifth of a longer run improving by under 5%), and
  opformer's figure within {TOLERANCE:.0%} of the paper's, or within its noise where the noise is larger;
- **direction reproduced:** the paper's order of two figures holds by more than {WIDTHS:g} times their combined noise;
- **within noise:** the two figures differ by at most {WIDTHS:g} times their combined noise: counted apart, never a
  direction;
- **not reproduced:** the paper's order reversed by more than {WIDTHS:g} times the combined noise, or a figure off by
  more than the tolerance at equal metric, protocol, scale and convergence, or an outcome the paper reports (a
  setting trains, or fails) that opformer does not see at comparable scale;
- **not comparable:** a single figure at another scale or protocol, with another metric or not converged, or an
  order measured with another metric or protocol: no verdict on it (the reason given);
- **not run:** no committed result (the reason given); **GPU script ready, not run:** a row of
  `benchmarks/systems/gpu_rows.sh`, waiting for a lent GPU.

The noise of a figure: over seeds, their standard deviation; of one seed, the larger of the test mean's standard
error and the ledger's seed spread (below). Two figures' combined noise is the root of the sum of their squares.
Rows that are not accuracy results (parameter counts, settings, timings) follow the same rule and are counted
apart; their figures are exact unless the row states a noise (a timing's spread over repeats)."""


class LedgerError(ValueError):
    """A ledger data file that does not say what the rule needs (the file and row named)."""


# Figures read from results files.

SEGMENT = re.compile(r"([^.\[\]]+)((?:\[[^\]]*\])*)")


def lookup(data: Any, path: str) -> Any:
    """The value under a key path: dotted names, each optionally followed by ``[i]`` (a list index), ``[name]`` (a
    key holding dots), ``[k=v,...]`` (the one list entry whose fields ``k`` read ``v``; ``-`` for a field it lacks)
    or ``[*]`` (every entry: a list of what the rest of the path reads in each)."""
    steps = [(name, selector) for name, selectors in SEGMENT.findall(path)
             for selector in [None, *re.findall(r"\[([^\]]*)\]", selectors)]]
    return walk(data, [(n, s) for n, s in steps if s is not None or n.strip()], path)


def walk(data: Any, steps: list[tuple[str, str | None]], path: str) -> Any:
    """:func:`lookup` along its parsed steps: ``(name, None)`` a key, ``(_, selector)`` a bracket."""
    for i, (name, selector) in enumerate(steps):
        if selector is None:
            if not isinstance(data, dict) or name not in data:
                raise KeyError(f"{path}: no key {name!r}")
            data = data[name]
        elif selector == "*":
            return [walk(entry, steps[i + 1:], path) for entry in data]
        elif selector.lstrip("-").isdigit() and isinstance(data, list):
            data = data[int(selector)]
        elif "=" not in selector:
            if selector not in data:
                raise KeyError(f"{path}: no key {selector!r}")
            data = data[selector]
        else:
            wanted = dict(part.split("=", 1) for part in selector.split(","))
            found = [e for e in data if all(str(e.get(k, "-")) == v for k, v in wanted.items())]
            if len(found) != 1:
                raise KeyError(f"{path}: [{selector}] matches {len(found)} entries, not one")
            data = found[0]
    return data


@functools.lru_cache(maxsize=None)
def read_file(name: str, raw: bool = False) -> Any:
    """A results file: JSON parsed (``raw``: as text), anything else as text; read once a process (not to be
    changed by its callers)."""
    path = ROOT / name
    if not path.is_file():
        raise LedgerError(f"{name}: no such results file")
    text = path.read_text()
    return json.loads(text) if name.endswith(".json") and not raw else text


@dataclass(frozen=True)
class Figure:
    """A figure of opformer's, read from its results file, and its noise (absolute)."""

    value: float
    noise: float
    seeds: int


def figure(ref: dict, spread: float) -> Figure:
    """Read ``ref`` (``file`` with ``key`` (a list under it: its mean) or ``text``, ``times``, ``std`` and
    ``samples``; or ``seeds``: refs) with the ledger's relative seed spread ``spread`` for one seed."""
    if "seeds" in ref:
        values = [figure(dict(seed, file=seed.get("file", ref.get("file"))), spread).value for seed in ref["seeds"]]
        return Figure(statistics.fmean(values), statistics.stdev(values), len(values))
    data = read_file(ref["file"], raw="key" not in ref)
    times = float(ref.get("times", 1.0))
    if "key" in ref:
        found = lookup(data, ref["key"])
        value = (statistics.fmean(found) if isinstance(found, list) else float(found)) * times
    else:
        text = str(ref["text"])
        if text not in data:
            raise LedgerError(f"{ref['file']}: the text {text!r} is not in it")
        value = float(text.replace(",", "").removesuffix("e-3")) * (1e-3 if text.endswith("e-3") else 1.0) * times
    error = 0.0
    if "std" in ref:
        samples = ref["samples"] if isinstance(ref["samples"], int) else lookup(data, ref["samples"])
        error = float(lookup(data, ref["std"])) * times / math.sqrt(float(samples))
    return Figure(value, max(error, spread * abs(value)), 1)


# The rule.

@dataclass(frozen=True)
class Verdict:
    """A row's verdict and the reason the rule gives."""

    verdict: str
    reason: str


def differences(claim: dict) -> list[str]:
    """What keeps a single figure from being compared with the paper's: ``differs`` entries not ``justified``."""
    differs, justified = claim.get("differs") or {}, claim.get("justified") or {}
    unknown = set(differs) - set(DIFFERS)
    if unknown:
        raise LedgerError(f"differs: unknown {sorted(unknown)}; expected some of {DIFFERS}")
    return [f"{differs[k]}" for k in DIFFERS if k in differs and k not in justified]


def said(figure: Figure) -> str:
    """A figure as the rule read it: 4 significant digits, its noise, and its seeds when more than one."""
    text = f"{figure.value:.4g}" + (f" +- {figure.noise:.2g}" if figure.noise else "")
    return text + (f" ({figure.seeds} seeds)" if figure.seeds > 1 else "")


def value_verdict(paper: float, ours: Figure, differs: list[str]) -> Verdict:
    """A single figure against the paper's."""
    relative = ours.value / paper - 1.0
    read = f"{said(ours)} against the paper's {paper:.4g}"
    if differs:
        return Verdict("not comparable", f"{read} ({relative:+.0%}), but " + "; ".join(differs))
    tolerance = max(TOLERANCE * abs(paper), ours.noise)
    within = abs(ours.value - paper) <= tolerance
    return Verdict("reproduced" if within else "not reproduced",
                   f"{read}: {relative:+.1%} ({'within' if within else 'beyond'} the tolerance "
                   f"{tolerance / abs(paper):.0%})")


def order_verdict(lower: Figure, higher: Figure) -> Verdict:
    """The paper's order (``lower`` below ``higher``) against opformer's figures and their noise."""
    gap, noise = higher.value - lower.value, math.hypot(lower.noise, higher.noise)
    widths = gap / noise if noise > 0 else math.copysign(math.inf, gap) if gap else 0.0
    share = f"{gap / abs(higher.value):+.0%}" if higher.value else f"{gap:+.3g}"
    read = f"here {said(lower)} against {said(higher)}, the paper's lower one first"
    gap_said = (f"the gap, {share} of the figure the paper has higher, is {abs(widths):.1f} combined noise widths"
                if noise > 0 else f"the gap, {share} of the figure the paper has higher (exact figures, no noise)")
    if widths > WIDTHS:
        return Verdict("direction reproduced", f"the paper's order: {read}; {gap_said}")
    if widths < -WIDTHS:
        return Verdict("not reproduced", f"the order reversed: {read}; {gap_said}")
    return Verdict("within noise", f"{read}; {gap_said} ({'the paper' if gap > 0 else 'against the paper'}'s order)")


def verdict(claim: dict, spread: float) -> Verdict:
    """A row's verdict from its claim (``type``: value, order, outcome, setting, not_run, gpu)."""
    kind = claim.get("type")
    if kind == "not_run":
        return Verdict("not run", claim["reason"])
    if kind == "gpu":
        return Verdict("GPU script ready, not run", f"row {claim['row']} of `benchmarks/systems/gpu_rows.sh`")
    spread = float(claim.get("spread", spread))
    if kind == "value":
        return value_verdict(float(claim["paper"]["value"]), figure(claim["ours"], spread), differences(claim))
    if kind == "order":
        blocking = [claim["differs"][k] for k in ("metric", "protocol") if k in (claim.get("differs") or {})
                    and k not in (claim.get("justified") or {})]
        if blocking:
            return Verdict("not comparable", "; ".join(blocking))
        return order_verdict(figure(claim["lower"]["ours"], spread), figure(claim["higher"]["ours"], spread))
    if kind == "outcome":
        differs = differences(claim)
        if differs:
            return Verdict("not comparable", "; ".join(differs))
        same = claim["paper"]["outcome"] == claim["ours"]["outcome"]
        return Verdict("reproduced" if same else "not reproduced",
                       f"the paper: {claim['paper']['outcome']}; here: {claim['ours']['outcome']}")
    if kind == "setting":
        same = claim["matches"] is True
        return Verdict("reproduced" if same else "not reproduced",
                       "the paper's setting" if same else str(claim["matches"]))
    raise LedgerError(f"claim type {kind!r}; expected value, order, outcome, setting, not_run or gpu")


# The data files.

def load(name: str) -> dict:
    """A ledger's data file, read with ``yaml.safe_load`` (once a process; each call gets its own copy)."""
    return copy.deepcopy(parsed(name))


@functools.lru_cache(maxsize=None)
def parsed(name: str) -> dict:
    """A ledger's data file as parsed, checked for what the rule needs."""
    path = DATA / f"{name}.yaml"
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or "blocks" not in data or "spread" not in data:
        raise LedgerError(f"{path.relative_to(ROOT)}: expected a mapping with 'title', 'spread' and 'blocks'")
    return data


def rows(ledger: dict) -> list[dict]:
    """Every row of a ledger's tables, in order."""
    return [row for block in ledger["blocks"] if "table" in block for row in block["table"]["rows"]]


def judged(ledger: dict) -> list[tuple[dict, Verdict]]:
    """Every row with its verdict (a row the rule cannot judge names itself in the error)."""
    out = []
    for row in rows(ledger):
        try:
            spread = float(ledger["spread"]["relative"]) if row.get("kind", "accuracy") == "accuracy" else 0.0
            out.append((row, verdict(row["claim"], spread)))
        except (KeyError, TypeError, ValueError) as error:
            raise LedgerError(f"{ledger['title']}: row {row.get('row')!r}: {error}") from error
    return out


def counts(ledger: dict) -> dict[str, dict[str, int]]:
    """Verdicts counted by kind of row (accuracy; other)."""
    out = {kind: dict.fromkeys(VERDICTS, 0) for kind in KINDS}
    for row, found in judged(ledger):
        out[row.get("kind", "accuracy")][found.verdict] += 1
    return out


def count_line(tally: dict[str, int]) -> str:
    """``"3 reproduced, 1 within noise (4 rows)"``: the verdicts that occur, in the rule's order."""
    said = ", ".join(f"{n} {v}" for v, n in tally.items() if n)
    return f"{said} ({sum(tally.values())} rows)"


# Markdown.

def cell(text: Any) -> str:
    """A table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def paper_cell(row: dict) -> str:
    """The paper's figure and where it is printed."""
    source = row.get("source") or (row["claim"].get("paper") or {}).get("where")
    return row["paper"] + (f" ({source})" if source and source not in row["paper"] else "")


def scale_cell(row: dict, table: dict) -> str:
    """The scale on both sides: the paper's (the row's, else its table's) and opformer's."""
    paper = row.get("paper_scale", table.get("paper_scale"))
    return (f"paper: {paper}; here: " if paper else "") + str(row["scale"])


def verdict_cell(row: dict, found: Verdict) -> str:
    """The verdict, the rule's reason and the row's note."""
    return f"**{found.verdict}**: {found.reason}" + (f"; {row['note']}" if row.get("note") else "")


def render(name: str) -> str:
    """A ledger's markdown page."""
    ledger = load(name)
    verdicts = {id(row): found for row, found in judged(ledger)}
    tally = counts(ledger)
    spread = ledger["spread"]
    lines = [ledger["title"], "",
             f"**Verdicts: {count_line(tally['accuracy'])}. {KINDS['other'].capitalize()}: "
             f"{count_line(tally['other'])}.**", "",
             f"<!-- generated by `python -m benchmarks.papers.ledger` from `benchmarks/papers/ledgers/{name}.yaml`;"
             " edit that file, not this page -->", "", RULE, "",
             f"The seed spread of one seed's figure: {spread['relative']:.0%} of it ({spread['source']}).", ""]
    for block in ledger["blocks"]:
        if "markdown" in block:
            lines += [block["markdown"].rstrip("\n"), ""]
            continue
        table = block["table"]
        head = list(table["head"]) + ["verdict"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in table["rows"]:
            values = [row["row"], paper_cell(row), row["ours"], scale_cell(row, table), row["seeds"],
                      row["command"], verdict_cell(row, verdicts[id(row)])]
            lines.append("| " + " | ".join(cell(v) for v in values) + " |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def readme_part(name: str) -> str:
    """A ledger's part of the README's Results section: its counts, its lead text and its headline rows."""
    ledger = load(name)
    part, tally = ledger["readme"], counts(ledger)
    verdicts = {id(row): found for row, found in judged(ledger)}
    lines = [f"**{ledger['short']}** ([`docs/papers/{name}.md`](docs/papers/{name}.md); its verdicts: "
             f"{count_line(tally['accuracy'])}; other rows: {count_line(tally['other'])}){part['lead']}", "",
             "| row | paper | opformer | scale (the paper's; here) | verdict | results |", "|---|---|---|---|---|---|"]
    for row in rows(ledger):
        if "readme" not in row:
            continue
        short = row["readme"]
        values = [short["row"], short["paper"], short["ours"], short["scale"],
                  verdicts[id(row)].verdict + (f": {short['note']}" if short.get("note") else ""),
                  ", ".join(f"`{f}`" for f in short["results"])]
        lines.append("| " + " | ".join(cell(v) for v in values) + " |")
    if part.get("after"):
        lines += ["", part["after"].rstrip("\n")]
    return "\n".join(lines)


def marker(name: str) -> tuple[str, str]:
    """The README's comments around a ledger's generated part."""
    return f"<!-- ledger {name}: generated by `python -m benchmarks.papers.ledger` -->", f"<!-- end of ledger {name} -->"


def readme(text: str, names: tuple[str, ...] = NAMES) -> str:
    """The README with each ledger's part between its markers replaced by the generated one."""
    for name in names:
        start, end = marker(name)
        if start not in text or end not in text:
            raise LedgerError(f"README.md: no markers {start!r} ... {end!r}")
        before, rest = text.split(start, 1)
        text = before + start + "\n" + readme_part(name) + "\n" + end + rest.split(end, 1)[1]
    return text


def generated(names: tuple[str, ...] = NAMES) -> dict[Path, str]:
    """Every generated file and its text."""
    out = {DOCS / f"{name}.md": render(name) for name in names}
    out[README] = readme(README.read_text(), names)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether the pages are up to date")
    parser.add_argument("--names", default=",".join(NAMES), help="the ledgers (default: all)")
    args = parser.parse_args(argv)
    names = tuple(args.names.split(","))
    stale = []
    for path, text in generated(names).items():
        if path.read_text() != text:
            stale.append(str(path.relative_to(ROOT)))
            if not args.check:
                write_atomic(path, text)
    for name in names:
        tally = counts(load(name))
        print(f"{name}: {count_line(tally['accuracy'])}; other: {count_line(tally['other'])}")
    if stale:
        print(("stale: " if args.check else "rewritten: ") + ", ".join(stale))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
