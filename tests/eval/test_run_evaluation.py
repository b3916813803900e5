"""``evaluate(run)`` dispatches on the run's kind: imported trajectory weights as a member of a mixture, imported
operator weights on the file at a resolution, and the kinds' options refused in one line; no module dispatches on
an import format's name or spells a data kind itself."""

import ast
from pathlib import Path

import pytest

import opformer
from opformer.errors import ConfigError
from opformer.eval.mixture import evaluate_file
from opformer.eval.run_evaluation import evaluate
from opformer.imports.convert import import_run
from opformer.kinds import IMPORTED, TRAJECTORY
from tests.toy_data import write_toy_heat

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
SOURCE = Path(opformer.__file__).parent


def test_no_module_compares_an_import_format_or_spells_a_data_kind():
    found = []
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                for side in (node.left, *node.comparators):
                    if isinstance(side, ast.Attribute) and side.attr == "format" and "imported" in ast.unparse(side):
                        found.append(f"{path.name}:{node.lineno} compares {ast.unparse(side)}")
                    if isinstance(side, ast.Constant) and side.value in ("trajectory", "operator"):
                        found.append(f"{path.name}:{node.lineno} compares {side.value!r}")
    assert found == []


@pytest.mark.slow
def test_imported_trajectory_weights_are_evaluated_as_a_member(tmp_path):
    run = import_run("dpot", FIXTURES / "dpot_tiny.pth", tmp_path / "dpot")[0]
    heat = write_toy_heat(tmp_path / "heat.h5", samples=2, n=16, frames=7)
    with pytest.raises(ConfigError, match="give the data to evaluate them on with --data FILE"):
        evaluate(run)
    for options, message in (({"resolutions": [16]}, "--resolutions: imported trajectory weights are evaluated on"),
                             ({"well_windows": [(0, 1)]}, "--metrics well: for runs evaluated on one data file"),
                             ({"input_noise": 0.1}, "--input-noise: for runs evaluated on one file of operator"),
                             ({"paper_lengths": True}, "--paper-lengths: member 'heat' has no rollout length")):
        with pytest.raises(ConfigError, match=message):
            evaluate(run, heat, **options)
    evaluation = evaluate(run, heat, frames=2, device="cpu")
    assert evaluation.split == "all" and evaluation.data == str(heat)
    assert evaluation.rows == evaluate_file(run, heat, frames=2, device="cpu")
    assert evaluation.notes == evaluation.rows[0]["notes"] and evaluation.notes
    assert evaluation.table.splitlines()[0] == f"{run} (dpot weights of {FIXTURES / 'dpot_tiny.pth'}) on {heat} (all split)"


@pytest.mark.slow
def test_imported_operator_weights_are_evaluated_on_the_file_at_its_resolution(tmp_path, toy_file):
    from opformer.runs import Run

    run = import_run("galerkin-transformer", FIXTURES / "gt_small.pt", tmp_path / "gt",
                     config=str(FIXTURES / "gt_small.yaml"))[0]
    assert Run(run).kind == IMPORTED and Run(run).data_kind != TRAJECTORY and not Run(run).as_member
    evaluation = evaluate(run, toy_file, device="cpu")
    (row,) = evaluation.rows
    assert row["trained_at"] is None and evaluation.split == "all" and evaluation.notes == []
    assert evaluation.table.splitlines()[0] == f"{run} on {toy_file} (all split)"
    with pytest.raises(ConfigError, match="--paper-lengths: only for runs trained on a mixture"):
        evaluate(run, toy_file, paper_lengths=True)
