"""The optional extras one by one: each installed with the package (not editable) into a fresh virtual environment
that sees neither the source tree nor another extra, then its modules imported and `opformer --version` run there.

    python -m benchmarks.systems.extras [--extras hub,mesh] [--torch torch==2.13.0]

Writes benchmarks/results/systems/extras.{json,md}: per extra, whether it installed, whether every module imported,
the seconds each took. Needs the package registries (the extras' packages are downloaded).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

from benchmarks.harness import argument_parser, describe_load, describe_machine, page, table_head, table_row, \
    write_results

ROOT = Path(__file__).resolve().parents[2]
#: the modules each extra brings, imported in the fresh environment
MODULES = {"hub": ["huggingface_hub"], "peers": ["neuralop", "galerkin_transformer"], "docs": ["mkdocs", "mkdocstrings"],
           "tensorboard": ["tensorboard", "torch.utils.tensorboard"], "mesh": ["meshio", "skfem", "triangle"],
           "onnx": ["onnx", "onnxruntime", "onnxscript"]}


def extras() -> list[str]:
    """The user-facing extras of pyproject.toml (``dev`` is the developers' set)."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return [name for name in declared if name != "dev"]


def check(extra: str, torch_requirement: str, folder: Path) -> dict[str, Any]:
    """Install ``torch_requirement`` then ``opformer[extra]`` into a fresh venv under ``folder``; import the
    extra's modules and opformer there, from a folder outside the tree."""
    venv = folder / extra
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    row: dict[str, Any] = {"extra": extra, "modules": MODULES.get(extra, [])}
    start = time.perf_counter()
    for requirement in (torch_requirement, f"{ROOT}[{extra}]"):
        done = subprocess.run([python, "-m", "pip", "install", "--quiet", requirement], env=env, capture_output=True,
                              text=True)
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip() and "WARNING" not in line]
            return {**row, "installed": False, "imported": False, "error": (lines or ["?"])[-1][:300],
                    "install_s": time.perf_counter() - start}
    row.update(installed=True, install_s=time.perf_counter() - start)
    start = time.perf_counter()
    code = "import importlib, opformer; [importlib.import_module(m) for m in %r]; print(opformer.__file__)" % (
        row["modules"],)
    done = subprocess.run([python, "-c", code], env=env, cwd=folder, capture_output=True, text=True)
    version = subprocess.run([python, "-m", "opformer", "--version"], env=env, cwd=folder, capture_output=True,
                             text=True)
    if done.returncode != 0:
        error = (done.stderr.strip().splitlines() or ["?"])[-1][:300]
    else:
        error = f"opformer imported from the source tree: {done.stdout.strip()}" if str(ROOT) in done.stdout else ""
    row.update(imported=not error, import_s=time.perf_counter() - start, version=version.stdout.strip(), error=error)
    return row


def markdown(result: dict[str, Any]) -> str:
    """The table of extras."""
    lines = ["# The optional extras, one by one in fresh environments", "",
             f"{describe_machine(result['machine'])}; {describe_load(result)}. Each extra: `pip install "
             f"{result['torch']}`, then `pip install '.[EXTRA]'` (not editable) into a new venv; its modules and "
             "opformer imported from a folder outside the tree.", "",
             *table_head("extra", "modules", "installed", "imported", "install s", "opformer --version", "error")]
    for row in result["extras"]:
        lines.append(table_row(row["extra"], ", ".join(row["modules"]), "yes" if row["installed"] else "no",
                               "yes" if row["imported"] else "no", f"{row['install_s']:.0f}",
                               row.get("version", ""), row.get("error", "")))
    return page(lines)


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--extras", default=None, help="comma-separated extras (default: every one but dev)")
    parser.add_argument("--torch", default="torch==2.13.0", help="the torch requirement installed first")
    args = parser.parse_args()
    load = os.getloadavg()
    chosen = args.extras.split(",") if args.extras else extras()
    with tempfile.TemporaryDirectory() as folder:
        rows = [check(extra, args.torch, Path(folder)) for extra in chosen]
    write_results(args.results, "extras", {"torch": args.torch, "extras": rows}, markdown, load)


if __name__ == "__main__":
    main()
