"""Make tests/fixtures/exports/: a model repository of format version 1 (``opformer export``) that every later
opformer must keep loading (tests/imports/test_repository.py), and the input and output it must give.

A tiny 2D Galerkin Transformer (pointwise normalisers, Dirichlet output) trained for two epochs on the toy Darcy
data of tests/conftest.py, exported to ``v1/``; ``v1_io.safetensors`` holds four test inputs and the trained run's
predictions of them. Run from the repository root (a few seconds)::

    PYTHONPATH=src python benchmarks/imports/export_fixture.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import tiny_darcy_config, write_toy_darcy  # noqa: E402

from opformer.config import config_from_dict  # noqa: E402
from opformer.data.store import read_arrays  # noqa: E402
from opformer.imports.repository import export_run  # noqa: E402
from opformer.runs import Run  # noqa: E402
from opformer.train.trainer import train  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "exports"


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)  # the run records its data file as toy_darcy.h5, not a scratch path
        write_toy_darcy("toy_darcy.h5")
        train(config_from_dict(tiny_darcy_config("toy_darcy.h5", epochs=2)), "run")
        shutil.rmtree(OUT / "v1", ignore_errors=True)
        export_run("run", OUT / "v1")
        surrogate, _ = Run("run").model()
        inputs = torch.from_numpy(read_arrays("toy_darcy.h5", slice(8, 12))[0]).float()
        with torch.no_grad():
            outputs = surrogate(inputs)
        save_file({"input": inputs.contiguous(), "output": outputs.contiguous()}, str(OUT / "v1_io.safetensors"))
    for path in sorted(OUT.rglob("*.*")):
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
