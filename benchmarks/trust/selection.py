"""The score calibration chooses, before and after the rule that weighs robustness (a physics score whenever its
bounds are within 10% of the sharpest, :func:`opformer.trust.calibrating.choose_score`), checked against the
shift table (``benchmarks/results/trust/shift.json``, :mod:`benchmarks.trust.shift`) without running anything again.

Before: the score each case's calibration chose on its validation split by the earlier rule (recorded in the shift
table). After: where that was a physics score, the same (the earlier rule chose a normalized score only where it
was the sharpest of all, so it lies within any margin of the sharpest); otherwise :func:`choose_score` applied to
the held-out file's mean per-frame bounds, the shift table's measure of sharpness (the validation ratios the
calibration measured are not in the table, and the runs are not kept with it). For each case, the silent failures
on every file with the default score before and after, per frame and joint, and the held-out file's coverage and
mean bound (the guarantee in distribution is exact for either score: the choice is made on data the calibration
never uses).

Run from the repository root::

    python -m benchmarks.trust.selection

Writes benchmarks/results/trust/selection.json and .md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from benchmarks.harness import argument_parser, describe_load, earlier, page, table_head, table_row, write_results
from opformer.trust.calibrating import ROBUST_SCORES, ROBUSTNESS_MARGIN, choose_score

NAME = "selection"
HELD_OUT = "held-out (calibration's physics)"


def chosen_after(case: dict[str, Any]) -> tuple[str, str]:
    """The score the new rule chooses for a case of the shift table, and how it was decided."""
    before = case["calibration_score"]
    if before in ROBUST_SCORES:
        return before, "the earlier choice, the sharpest on validation"
    held = {score: files[HELD_OUT]["per_frame"]["mean_bound"] for score, files in case["scores"].items()
            if HELD_OUT in files and "per_frame" in files[HELD_OUT]}
    return choose_score(held), "choose_score on the held-out mean bounds " + ", ".join(
        f"{score} {value:.4f}" for score, value in held.items())


def selection(shift: dict[str, Any]) -> dict[str, Any]:
    """Per case of the shift table: the choice before and after, and what each did on every file."""
    cases = {}
    for name, case in shift["cases"].items():
        after, how = chosen_after(case)
        before = case["calibration_score"]
        files = {label: {when: case["scores"][score][label] for when, score in (("before", before), ("after", after))}
                 for label in case["scores"][before]}
        cases[name] = {"before": before, "after": after, "how": how, "files": files}
    return {"rule": f"a physics score ({', '.join(ROBUST_SCORES)}) whenever its bounds are at most "
                    f"{ROBUSTNESS_MARGIN:g} times the sharpest", "coverage": shift["coverage"], "cases": cases}


def markdown(result: dict[str, Any]) -> str:
    """The before/after table of every case."""
    lines = ["# The score calibration chooses, checked against the shift table", "", describe_load(result) + ".", "",
             f"Rule: {result['rule']}; else the sharpest normalized score where it is 10% sharper than relative_l2; "
             f"else relative_l2. Coverage {result['coverage']}. Silent failures: the share of all (sample, frame) "
             "units unflagged and outside their bound (goal on a shifted file: at most 0.15).", "",
             *table_head("case", "data", "score before / after", "silent failures per frame, before / after",
                         "joint, before / after", "coverage, before / after", "mean bound, before / after")]
    for name, case in result["cases"].items():
        for label, entry in case["files"].items():
            cells = []
            for key in ("silent_failures", "joint", "coverage", "mean_bound"):
                pair = []
                for when in ("before", "after"):
                    m = entry[when].get("joint" if key == "joint" else "per_frame")
                    value = None if m is None else m["silent_failures" if key == "joint" else key]
                    pair.append("-" if value is None else f"{value:.{4 if key == 'mean_bound' else 3}f}")
                cells.append(" / ".join(pair))
            lines.append(table_row(name, label, f"{case['before']} / {case['after']}", *cells))
    lines += ["", "How the choice after was decided:", ""]
    lines += [f"- {name}: {case['after']} ({case['how']})" for name, case in result["cases"].items()]
    return page(lines)


def main() -> None:
    parser = argument_parser(__doc__)
    args = parser.parse_args()
    load_before = os.getloadavg()
    shift = earlier(Path(args.results), "shift")
    write_results(args.results, NAME, selection(shift), markdown, load_before)


if __name__ == "__main__":
    main()
