"""``opformer export`` then ``opformer import opformer`` of a ``make demo`` run (the Galerkin Transformer on Burgers
that ``opformer quickstart`` trains): the repository's sizes, the time of each command, and whether the imported run
gives the original's numbers: ``opformer evaluate`` at the trained and the stored grid (test split), ``opformer
predict`` on every sample of the demo's file (max |difference|), the checkpoints' tensors; the same import through a
huggingface_hub cache (``HF_HUB_OFFLINE=1``, the repository laid out as the Hub's client lays it out). Every command
runs as a user runs it, in its own process. Results: benchmarks/results/systems/export_roundtrip.json, .md::

    PYTHONPATH=src python -m opformer quickstart --out /tmp/q        # make demo (~3 min on 2 idle cores)
    PYTHONPATH=src python -m benchmarks.systems.export_roundtrip --run /tmp/q/gt --data /tmp/q/burgers.h5
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from benchmarks.harness import ROOT, argument_parser, describe_load, describe_machine, quantity_table, write_results

COMMIT = "0" * 40  # the commit of the laid-out cache


def opformer(*args: str, env: dict[str, str] | None = None) -> float:
    """Run ``opformer ARGS`` in a fresh process; its wall time (s). A failure ends the script."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "opformer", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})})
    if done.returncode:
        sys.exit(f"opformer {' '.join(args)} failed:\n{done.stderr}")
    return time.perf_counter() - start


def lay_out_cache(cache: Path, repo: str, folder: Path) -> None:
    """``folder``'s files as huggingface_hub keeps a download: blobs, a snapshot of symlinks, refs/main."""
    storage = cache / f"models--{repo.replace('/', '--')}"
    for path in folder.iterdir():
        blob = storage / "blobs" / hashlib.sha256(path.read_bytes()).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, blob)
        pointer = storage / "snapshots" / COMMIT / path.name
        pointer.parent.mkdir(parents=True, exist_ok=True)
        pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    (storage / "refs").mkdir(exist_ok=True)
    (storage / "refs" / "main").write_text(COMMIT)


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--run", required=True, help="the make demo run (opformer quickstart's OUT/gt)")
    parser.add_argument("--data", required=True, help="its data file (OUT/burgers.h5)")
    parser.add_argument("--scratch", default="/tmp/export_roundtrip", help="folder of the copies (emptied first)")
    parser.add_argument("--resolutions", default="512,2048", help="grids evaluated")
    args = parser.parse_args()
    load_before = os.getloadavg()
    import torch

    from opformer.runs import Run, load_checkpoint

    scratch = Path(args.scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    exported, imported, from_hub = scratch / "exported", scratch / "imported", scratch / "from_hub"
    seconds = {"export": opformer("export", args.run, str(exported)),
               "import": opformer("import", "opformer", str(exported), "--out", str(imported))}
    lay_out_cache(scratch / "cache", "someone/burgers-gt", exported)
    seconds["import_hub_cache"] = opformer("import", "opformer", "hf://someone/burgers-gt", "--out", str(from_hub),
                                           env={"HF_HUB_CACHE": str(scratch / "cache"), "HF_HUB_OFFLINE": "1"})
    evaluated = {}
    for name, run in (("original", args.run), ("imported", imported), ("from_hub", from_hub)):
        out = scratch / f"evaluate_{name}.json"
        seconds[f"evaluate_{name}"] = opformer("evaluate", str(run), "--data", args.data, "--resolutions",
                                               args.resolutions, "--json", str(out))
        evaluated[name] = json.loads(out.read_text())["results"]
    predicted = {}
    for name, run in (("original", args.run), ("imported", imported)):
        out = scratch / f"predict_{name}.h5"
        seconds[f"predict_{name}"] = opformer("predict", str(run), "--input", args.data, "--output", str(out))
        with h5py.File(out) as f:
            predicted[name] = f["target"][()]
    from opformer.imports.repository import export_run, import_repository  # the work itself, no start-up

    start = time.perf_counter()
    export_run(args.run, scratch / "exported_again")
    seconds["export_in_process"] = time.perf_counter() - start
    start = time.perf_counter()
    import_repository(scratch / "exported_again", scratch / "imported_again")
    seconds["import_in_process"] = time.perf_counter() - start
    surrogate, original = Run(args.run).model("best")
    tensors = [original["state_dict"], *(load_checkpoint(Path(run) / "best.pt")["state_dict"]
                                         for run in (imported, from_hub))]
    result: dict[str, Any] = {
        "run": args.run, "data": args.data, "model": original["spec"]["model"]["name"],
        "parameters": sum(p.numel() for p in surrogate.model.parameters()), "best_epoch": original["epoch"] + 1,
        "files_bytes": {p.name: p.stat().st_size for p in sorted(exported.iterdir())},
        "best_pt_bytes": (Path(args.run) / "best.pt").stat().st_size,
        "seconds": seconds,
        "evaluate": evaluated,
        "evaluate_equal": evaluated["original"] == evaluated["imported"] == evaluated["from_hub"],
        "predictions_shape": list(predicted["original"].shape),
        "predictions_max_abs_difference": float(np.abs(predicted["original"] - predicted["imported"]).max()),
        "tensors_equal": all(torch.equal(t[k], v) for t in tensors[1:] for k, v in tensors[0].items())
                         and all(set(t) == set(tensors[0]) for t in tensors[1:]),
    }
    write_results(args.results, "export_roundtrip", result, markdown, load_before, "safetensors", "huggingface_hub")


def markdown(r: dict[str, Any]) -> str:
    rows = [("run", f"`{r['run']}` ({r['model']}, {r['parameters']:,} parameters, its best epoch "
                    f"{r['best_epoch']})"),
            *[(f"exported {name}", f"{size:,} bytes") for name, size in r["files_bytes"].items()],
            ("the run's best.pt (weights, normalizers, spec, config, history)", f"{r['best_pt_bytes']:,} bytes"),
            *[(f"{name} (s{'' if 'in_process' in name else ', a process of its own'})", f"{value:.2f}")
              for name, value in r["seconds"].items()],
            ("evaluate: original = imported = imported from the Hub cache", str(r["evaluate_equal"])),
            *[(f"relative L2 at {row['resolution']} (original / imported)",
               f"{row['relative_l2']:.6e} / {other['relative_l2']:.6e}")
              for row, other in zip(r["evaluate"]["original"], r["evaluate"]["imported"])],
            (f"predict: max abs difference over {' x '.join(map(str, r['predictions_shape']))}",
             f"{r['predictions_max_abs_difference']:g}"),
            ("checkpoint tensors bit-identical (local and Hub-cache imports)", str(r["tensors_equal"]))]
    return "\n".join([
        "# Export / import round trip of a make demo run", "",
        "`opformer export RUN DIR`, then `opformer import opformer DIR --out COPY` and the same from a "
        "huggingface_hub cache (`HF_HUB_OFFLINE=1`); the copies evaluated and applied beside the original "
        "(benchmarks/systems/export_roundtrip.py).", "",
        *quantity_table(rows), "",
        f"Machine: {describe_machine(r['machine'])}; {describe_load(r)}.", ""])


if __name__ == "__main__":
    main()
