"""``opformer quickstart mesh``: the Galerkin Transformer on meshes, end to end in a few minutes on 2 CPU cores.

A small set of the built-in elasticity problem (Geo-FNO's unit cell with a random void, solved by P2 finite
elements; the coordinates in, the von Mises stress and the stress components out) is generated, the
quadrature-weighted GT on meshes trained on it (a small width), evaluated (the weighted relative L2 beside the
plain one), calibrated on the test split and applied to freshly generated geometries with bounds at 90% coverage;
the error map on the triangulation and the bounds are written beside the run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from opformer.config import config_from_dict
from opformer.data.generate import generate_file
from opformer.data.store import MeshFile, read_mesh_samples
from opformer.eval.run_evaluation import evaluate
from opformer.eval.run_plots import plot_run
from opformer.io import write_atomic
from opformer.runs import Run
from opformer.runtime import resolve_device
from opformer.serve.mesh_predict import predict_mesh_file
from opformer.train.trainer import train
from opformer.trust.mesh_calibration import calibrate_mesh_run

#: The splits of the generated set, the new geometries predicted with bounds, and the boundary segments per edge.
SAMPLES = {"n_train": 160, "n_val": 20, "n_test": 40}
NEW, RESOLUTION, COVERAGE = 8, 16, 0.9
#: The GT on meshes at a small width (quadrature-weighted Galerkin attention, the paper's layer norms).
MODEL = {"name": "galerkin_transformer_mesh", "d_model": 32, "n_head": 2, "n_layers": 2, "dim_ff": 64,
         "decoder_width": 32, "in_channels": 0, "out_channels": 4, "weighting": "quadrature"}
EPOCHS = 25


def quickstart_config(data_path: str, seed: int = 1127802) -> dict[str, Any]:
    """The run config of the mesh quickstart."""
    return {"seed": seed, "model": dict(MODEL),
            "data": {"path": data_path, **SAMPLES, "normalize_input": "channel", "normalize_target": "channel"},
            "optim": {"name": "adamw", "lr": 3e-3, "weight_decay": 1e-5}, "schedule": {"name": "onecycle"},
            "train": {"epochs": EPOCHS, "batch_size": 8, "grad_clip": 1.0}}


def quickstart_mesh(out: str | os.PathLike = "runs/quickstart-mesh", device: str = "auto", seed: int = 1127802
                    ) -> dict[str, Any]:
    """Generate, train, evaluate, calibrate, predict new geometries with bounds, plot; returns the results (also
    written as ``results.json``). A rerun continues in ``out``."""
    resolve_device(device)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data, new = out / "elasticity.h5", out / "new_geometries.h5"
    start = time.perf_counter()
    if not data.is_file():
        print(f"[1/5] generating {sum(SAMPLES.values())} elasticity samples (P2 finite elements, {RESOLUTION} "
              f"segments on an edge) -> {data}")
        generate_file("elasticity", data, sum(SAMPLES.values()), resolution=RESOLUTION, seed=0)
    if not new.is_file():
        generate_file("elasticity", new, NEW, resolution=RESOLUTION, seed=1)
    run = out / "gt_mesh"
    config = config_from_dict(quickstart_config(str(data), seed))
    config.train.device = device
    resume = (run / "config.yaml").exists()
    print(f"[2/5] training the quadrature-weighted Galerkin Transformer on meshes -> {run}"
          + (" (resuming)" if resume else ""))
    train(config, run, resume=resume)
    print("[3/5] evaluating on the test split")
    evaluation = evaluate(run, device=device)
    print(evaluation.table)
    print(f"[4/5] calibrating on the test split, then {NEW} new geometries predicted with bounds at coverage "
          f"{COVERAGE:g}")
    calibration = calibrate_mesh_run(Run(run), device=device)
    bound, _ = calibration.quantiles(COVERAGE)
    predicted = predict_mesh_file(Run(run), new, out / "new_predictions.h5", device=device, coverage=COVERAGE)
    rows = _bounds_rows(new, predicted)
    print(f"{'sample':>6}  {'points':>6}  {'rel. L2':>9}  {'bound':>9}  {'within':>6}  {'flagged':>7}")
    for row in rows:
        print(f"{row['sample']:>6}  {row['points']:>6}  {row['relative_l2']:>9.3e}  {row['bound']:>9.3e}  "
              f"{'yes' if row['within'] else 'no':>6}  {'yes' if row['flagged'] else 'no':>7}")
    paths = plot_run(run, out_dir=out, device=device)
    print("[5/5] plots: " + ", ".join(str(p) for p in paths) + f"; predictions with bounds: {predicted}")
    results = {"evaluation": evaluation.rows, "calibration_samples": calibration.samples,
               "bound_at_coverage": {str(COVERAGE): bound}, "new_geometries": rows}
    write_atomic(out / "results.json", json.dumps(results, indent=2) + "\n")
    print(f"done in {time.perf_counter() - start:.0f} s")
    return results


def _bounds_rows(truth_path: Path, predicted_path: Path) -> list[dict[str, Any]]:
    """Per new geometry: its points, the weighted relative L2 of its prediction, its bound and flag."""
    rows = []
    with MeshFile(predicted_path) as predicted:
        count, names = len(predicted), [name for name, _ in predicted.info.mesh["targets"]]
    for i, (truth, pred) in enumerate(zip(read_mesh_samples(truth_path, range(count)),
                                          read_mesh_samples(predicted_path, range(count)))):
        w = truth.weights / truth.weights.sum()
        diff = sum((w[:, None] * (pred.fields[n] - truth.fields[n]) ** 2).sum() for n in names)
        norm = sum((w[:, None] * truth.fields[n] ** 2).sum() for n in names)
        error, bound = float((diff / norm) ** 0.5), pred.settings["bound_relative_l2"]
        rows.append({"sample": i, "points": len(truth.points), "relative_l2": error, "bound": bound,
                     "within": error <= bound, "flagged": bool(pred.settings["flagged"])})
    return rows
