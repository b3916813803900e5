"""The layer rule of docs/layout.md: no package imports from one after it (train -> eval, never the reverse)."""

import ast
from pathlib import Path

import opformer

LAYERS = [("__init__", "errors", "io", "runtime", "processes", "grids", "kinds", "meshes", "extras", "validate"), ("pde",), ("data",),
          ("nn",), ("models",), ("config", "recipes"), ("runs",), ("imports",), ("eval",), ("trust",), ("serve",), ("train",),
          ("bench",),
          ("quickstart", "cli", "__main__")]
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
ROOT = Path(opformer.__file__).parent


def unit_of(module: str) -> str:
    """``opformer.train.trainer`` -> ``train``; ``opformer`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def import_edges() -> list[tuple[str, str, str]]:
    """(importing unit, imported unit, file) for every ``from opformer... import`` in the package."""
    edges = []
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT.parent).with_suffix("")
        source = unit_of(".".join(relative.parts[:-1] if relative.name == "__init__" else relative.parts))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "opformer":
                edges.append((source, unit_of(node.module), str(path.relative_to(ROOT))))
    return edges


def test_every_module_belongs_to_a_layer():
    units = {unit_of("opformer." + ".".join(p.relative_to(ROOT).with_suffix("").parts)) for p in ROOT.rglob("*.py")}
    assert units - {"__init__"} <= set(RANK), sorted(units - set(RANK))


def test_no_package_imports_from_a_later_one():
    edges = import_edges()
    assert ("train", "eval") in {(s, d) for s, d, _ in edges}  # the rule is checked on real edges
    upward = sorted({f"{file}: {s} -> {d}" for s, d, file in edges if s != "__init__" and RANK[d] > RANK[s]})
    assert upward == []


def test_serving_imports_nothing_from_evaluation():
    edges = import_edges()
    assert ("serve", "trust") in {(s, d) for s, d, _ in edges}  # the scan sees serve's imports
    assert sorted(file for s, d, file in edges if (s, d) == ("serve", "eval")) == []


def test_solvers_run_without_torch():
    for path in (ROOT / "pde").rglob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module}
        assert "torch" not in imported, path
