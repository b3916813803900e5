"""Measures 1 and 2 of issue 68: the mesh models' accuracy on the built-in elasticity and airfoil sets, and their
error when the mesh changes under them (zero-shot, the same geometries meshed otherwise).

Run from the repository root: ``python -m benchmarks.systems.mesh_accuracy --runs ~/runs/mesh_accuracy`` (resumable:
data and finished runs under ``--runs`` are kept and read again; writes
benchmarks/results/systems/mesh_accuracy.{json,md}, or mesh_accuracy_VARIANT with ``--variant``).

1. Data (``--runs``/data/, seeded): ``opformer generate``'s elasticity (``--elasticity-resolution`` segments an edge)
   and airfoil (``--airfoil-resolution`` airfoil vertices, far circle at ``--far-radius`` chords) sets of
   ``--n-train + --n-val + --n-test`` samples. The test samples (the last ``--n-test``, the same seeds: the
   generators draw the geometry apart from the mesh) are meshed again:
   - ``half``: half the element size (elasticity: twice the segments; airfoil: twice the airfoil's and the far
     circle's vertices);
   - ``graded``: ``grading`` 4 (elasticity: the void at ``h / 2``, the square and the largest cells at ``2 h``;
     airfoil: cells growing from ``h`` at the airfoil to ``4 h`` within the near circle);
   - ``subsampled``: half of the test mesh's points drawn at random (seed: the sample's index), re-triangulated
     (Delaunay of the kept points, triangles whose centroid is outside the original mesh dropped, points no kept
     triangle touches dropped) and their weights re-lumped on those triangles (a triangle whose centroid is in the
     domain may still reach a little into the void or the airfoil, and the random boundary cuts a little off: the
     area within a few percent); the fields are the original mesh's values at the kept points.
   The stored fields are each generator's: elasticity coordinates -> von Mises and the 3 stress components,
   airfoil free stream -> velocity (2) and pressure; the errors are over all target channels.
2. Training: the one trainer (:func:`benchmarks.harness.train_all`, each run a fresh process), every model on the
   same data and budget (``--epochs``, batch ``--batch``, Adam, OneCycle, lr ``--lr``, the quadrature-weighted
   relative L2 as loss and selection metric), seeds ``--seeds``: :data:`MODELS` (GT on meshes and Transolver, each
   with uniform and quadrature weights, and the point-wise MLP; small widths, stated in the results).
3. Evaluation: each run's best checkpoint on the training mesh's test split and on each remeshing: the
   quadrature-weighted relative L2 ``sqrt(sum w |u - v|^2 / sum w |v|^2)`` and the plain one (uniform over the
   points), the mean over samples, and the ratio of each remesh's error to the training mesh's.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from benchmarks.harness import argument_parser, describe_load, describe_machine, earlier, gib, listed, \
    table_head, table_row, train_all, write_results
from opformer.data.generate import generate_file
from opformer.data.mesh_splits import load_mesh_split
from opformer.data.store import read_mesh_samples, write_mesh_dataset
from opformer.data.store.read import read_info
from opformer.eval.metrics import weighted_relative_l2_per_sample
from opformer.io import write_atomic
from opformer.meshes import MeshSample, lumped_weights
from opformer.pde.registry import lookup
from opformer.runs.run import Run

SETS = ("elasticity", "airfoil")
REMESHES = ("half", "graded", "subsampled")
#: the graded remeshing's grading (cells growing about this factor away from the void or the airfoil)
GRADING = 4.0
#: model -> its config (small widths for this CPU; in and out channels come from the data)
MODELS = {
    "gt_uniform": {"name": "galerkin_transformer_mesh", "d_model": 32, "n_head": 4, "n_layers": 3, "dim_ff": 64,
                   "decoder_width": 32, "weighting": "uniform"},
    "gt_quadrature": {"name": "galerkin_transformer_mesh", "d_model": 32, "n_head": 4, "n_layers": 3, "dim_ff": 64,
                      "decoder_width": 32, "weighting": "quadrature"},
    "transolver_uniform": {"name": "transolver", "n_hidden": 32, "n_head": 4, "n_layers": 3, "slice_num": 16,
                           "weighting": "uniform"},
    "transolver_quadrature": {"name": "transolver", "n_hidden": 32, "n_head": 4, "n_layers": 3, "slice_num": 16,
                              "weighting": "quadrature"},
    "mlp": {"name": "mesh_mlp", "width": 64, "n_layers": 4},
}


# Data.

def subsampled(sample: MeshSample, seed: int) -> MeshSample:
    """Half of ``sample``'s points drawn at random (``seed``), re-triangulated and re-lumped (see the module's
    docstring); the fields at the kept points."""
    from matplotlib.tri import Triangulation
    from scipy.spatial import Delaunay

    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(len(sample.points), len(sample.points) // 2, replace=False))
    points = sample.points[keep]
    cells = Delaunay(points).simplices
    inside = Triangulation(*sample.points.T, sample.cells).get_trifinder()(*points[cells].mean(axis=1).T) >= 0
    cells = cells[inside]
    used = np.unique(cells)
    renumber = np.full(len(points), -1)
    renumber[used] = np.arange(len(used))
    points, cells = points[used], renumber[cells]
    return MeshSample(points=points, cells=cells, cell_kind="triangle", weights=lumped_weights(points, cells,
                                                                                              "triangle"),
                      fields={name: values[keep][used] for name, values in sample.fields.items()},
                      settings=sample.settings)


def make_data(folder: Path, name: str, args: Any) -> dict[str, str]:
    """The data files of the set ``name`` under ``folder`` (made where missing): ``{"train": ..., REMESH: ...}``."""
    folder.mkdir(parents=True, exist_ok=True)
    entry = lookup(name)
    samples = args.n_train + args.n_val + args.n_test
    first = args.n_train + args.n_val
    base = ({"resolution": args.elasticity_resolution} if name == "elasticity" else
            {"resolution": args.airfoil_resolution, "far_radius": args.far_radius})
    remesh = {"half": {**base, "resolution": 2 * base["resolution"]}, "graded": {**base, "grading": GRADING}}
    if name == "airfoil":
        remesh["half"]["far_points"] = 128  # twice the default's 64
    far = f"_far{args.far_radius:g}" if name == "airfoil" else ""
    stem = f"{name}_r{base['resolution']}{far}_n{samples}_seed{args.data_seed}"  # another scale: other files
    paths = {"train": folder / f"{stem}.h5", **{key: folder / f"{stem}_{key}.h5" for key in REMESHES}}
    if not paths["train"].exists():
        generate_file(name, paths["train"], samples, seed=args.data_seed, **base)
    inputs, targets = entry.channels
    test = read_mesh_samples(paths["train"], range(first, samples))
    for key, flags in remesh.items():
        if not paths[key].exists():
            made, settings = entry.generator(args.n_test, seed=args.data_seed, first=first, **flags)
            for a, b in zip(made, test):  # the same geometries
                assert all(a.settings[k] == b.settings[k] for k in a.settings if k not in ("circulation", "lift"))
            write_mesh_dataset(paths[key], made, inputs=inputs, targets=targets, pde=name, solver=settings["solver"],
                               seed=args.data_seed, settings={k: v for k, v in settings["pde"].items()
                                                              if k != "name"})
    if not paths["subsampled"].exists():
        info = read_info(paths["train"])
        write_mesh_dataset(paths["subsampled"], [subsampled(s, first + i) for i, s in enumerate(test)],
                           inputs=inputs, targets=targets, pde=name, solver=info.solver, seed=args.data_seed,
                           settings={k: v for k, v in info.pde.items() if k != "name"})
    return {key: str(path) for key, path in paths.items()}


# Runs.

def run_config(data: str, name: str, args: Any) -> dict[str, Any]:
    """The training config of model ``name`` on the data file ``data``."""
    info = read_info(data)
    model = {**MODELS[name], "in_channels": len(info.input_channels), "out_channels": len(info.target_channels)}
    return {"data": {"path": data, "n_train": args.n_train, "n_val": args.n_val, "n_test": args.n_test,
                     "normalize_input": "channel" if info.input_channels else "none",
                     "normalize_target": "channel"},
            "model": model, "optim": {"lr": args.lr}, "train": {"epochs": args.epochs, "batch_size": args.batch,
                                                                "eval_batch_size": 8, "log_every": 10**6},
            "seed": 0}


def errors_on(run: Run, path: str, split: str, args: Any) -> dict[str, float]:
    """The mean quadrature-weighted and plain relative L2 of ``run``'s best checkpoint on ``split`` of ``path``."""
    data = load_mesh_split(path, split, n_train=args.n_train, n_val=args.n_val, n_test=args.n_test)
    surrogate = run.surrogate
    weighted, plain = [], []
    with torch.no_grad():
        for index in torch.arange(len(data)).split(8):
            x, pos, weights, mask, y = data.fetch(index)
            pred = surrogate(x, pos, weights, mask)
            weighted.append(weighted_relative_l2_per_sample(pred, y, weights))
            plain.append(weighted_relative_l2_per_sample(pred, y, mask))
    return {"weighted": float(torch.cat(weighted).mean()), "plain": float(torch.cat(plain).mean()),
            "samples": len(data), "points_mean": float(np.mean(data.point_counts()))}


# Results.

def mean_std(values: list[float]) -> str:
    """``mean +- sample std`` (x 1e-2), or the one value."""
    values = [100 * v for v in values]
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} +- {statistics.stdev(values):.2f}"


def markdown(result: dict[str, Any]) -> str:
    """The accuracy table, the verdicts, the remeshing table and each run's convergence."""
    s = result["scale"]
    lines = ["# Mesh models: accuracy on the built-in elasticity and airfoil sets, and zero-shot remeshing", "",
             f"{describe_machine(result['machine'])}; {describe_load(result)}. The machine's 2 cores were shared "
             f"with other engineers' jobs (load about 7): the times per step are under that load.", "",
             f"Scale: {s['n_train']} train / {s['n_val']} val / {s['n_test']} test samples (data seed "
             f"{s['data_seed']}); elasticity at {s['elasticity_resolution']} segments an edge, airfoil at "
             f"{s['airfoil_resolution']} airfoil vertices and a far circle of {s['far_radius']} chords; "
             f"{s['epochs']} epochs, batch {s['batch']}, Adam lr {s['lr']} with OneCycle, "
             f"{s['threads']} thread(s) per run, {s['jobs']} run(s) at once; training seeds "
             f"{', '.join(map(str, s['seeds']))}. Models: `{result['models']}`.", "",
             "Errors are relative L2 x 1e-2 on the test samples (mean over samples; mean +- sample standard "
             "deviation over seeds): `weighted` is the quadrature-weighted one (the loss and the selection metric), "
             "`plain` the one uniform over the points.", "",
             "Remeshings of the same test geometries: " + result["remeshes"], ""]
    rows = result["runs"]
    for name in result["sets"]:
        mine = [r for r in rows if r["set"] == name]
        if not mine:
            lines += [f"## {name}", "", "No runs finished.", ""]
            continue
        points = {key: mine[0]["errors"][key]["points_mean"] for key in ("train", *REMESHES) if key in
                  mine[0]["errors"]}
        lines += [f"## {name}", "", "Mean points per test sample: " + ", ".join(f"{k} {v:.0f}" for k, v in
                                                                               points.items()) + ".", "",
                  *table_head("model", "seeds", "weighted", "plain", "parameters", "s/step", "peak RSS (GiB)")]
        means = {}
        for model in result["models"]:
            runs = [r for r in mine if r["model"] == model]
            if not runs:
                lines.append(table_row(model, "-", "not run", "", "", "", ""))
                continue
            means[model] = statistics.mean(r["errors"]["train"]["weighted"] for r in runs)
            rss = [r["peak_rss_gib"] for r in runs if r["peak_rss_gib"] is not None]
            lines.append(table_row(model, len(runs), mean_std([r["errors"]["train"]["weighted"] for r in runs]),
                                   mean_std([r["errors"]["train"]["plain"] for r in runs]), runs[0]["parameters"],
                                   f"{statistics.median(r['seconds_per_step'] for r in runs):.4f}",
                                   gib(max(rss) if rss else None)))
        verdicts = []
        for gt in ("gt_uniform", "gt_quadrature"):
            for ts in ("transolver_uniform", "transolver_quadrature"):
                if gt in means and ts in means:
                    ratio = means[gt] / means[ts]
                    ranking = ("holds" if ratio >= 2 else "Transolver lower, by less than 2x" if ratio > 1
                               else "does not hold: the GT is as low or lower")
                    goal = f"; the goal, at most 1.5x: {'met' if ratio <= 1.5 else 'not met'}" \
                        if gt == "gt_quadrature" else ""
                    verdicts.append(f"- {gt} / {ts} = {ratio:.2f} (Transolver's Table 1, GT 2-4x Transolver's "
                                    f"error: {ranking}{goal})")
        lines += ["", *verdicts] if verdicts else []
        lines += ["", "Zero-shot on the remeshed test geometries: error (weighted / plain, x 1e-2, mean over "
                      "seeds) and its ratio to the training mesh's (weighted; within 10%: ratio <= 1.10).", "",
                  *table_head("model", *[f"{k} weighted / plain" for k in REMESHES],
                              *[f"{k} ratio" for k in REMESHES], "all within 10%")]
        worst = {}
        for model in result["models"]:
            runs = [r for r in mine if r["model"] == model]
            if not runs:
                continue
            train = statistics.mean(r["errors"]["train"]["weighted"] for r in runs)
            cells, ratios = [], []
            for key in REMESHES:
                w = statistics.mean(r["errors"][key]["weighted"] for r in runs)
                p = statistics.mean(r["errors"][key]["plain"] for r in runs)
                cells.append(f"{100 * w:.2f} / {100 * p:.2f}")
                ratios.append(w / train)
            worst[model] = max(ratios)
            lines.append(table_row(model, *cells, *[f"{q:.2f}" for q in ratios],
                                   "yes" if max(ratios) <= 1.10 else "no"))
        lines.append("")
        for family in ("gt", "transolver"):
            uniform, quadrature = worst.get(f"{family}_uniform"), worst.get(f"{family}_quadrature")
            if uniform is not None and quadrature is not None:
                verdict = ("smaller: weighting helped" if quadrature < uniform - 0.01 else
                           "larger: weighting did not help" if quadrature > uniform + 0.01 else
                           "about the same (within 0.01): weighting made no difference here")
                lines.append(f"- {family}: the largest remesh ratio is {quadrature:.2f} with quadrature weights and "
                             f"{uniform:.2f} with uniform ones, {verdict}.")
        lines.append("")
    lines += ["## Convergence", "", "Best epoch (by the validation error) against the last; a best epoch at the "
              "last means the run was still improving when its budget ended.", "",
              *table_head("run", "epochs", "best epoch", "best val weighted", "train hours")]
    for r in rows:
        lines.append(table_row(r["name"], r["epochs"], r["best_epoch"], f"{r['best_val_relative_l2']:.4f}",
                               f"{r['train_hours']:.3f}"))
    missing = result.get("missing") or []
    lines += ["", "Missing runs: " + (", ".join(missing) if missing else "none") + "."]
    if result.get("note"):
        lines += ["", result["note"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argument_parser(__doc__, parallel=True)
    parser.add_argument("--runs", default=str(Path.home() / "runs" / "mesh_accuracy"),
                        help="folder of the data and the runs (outside the work tree; resumable; one folder per "
                             "training budget: a finished run in it is read, not trained again)")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--n-train", type=int, default=200)
    parser.add_argument("--n-val", type=int, default=20)
    parser.add_argument("--n-test", type=int, default=40)
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--elasticity-resolution", type=int, default=20)
    parser.add_argument("--airfoil-resolution", type=int, default=24)
    parser.add_argument("--far-radius", type=float, default=4.0)
    parser.add_argument("--only-data", action="store_true", help="make the data files and stop")
    parser.add_argument("--note", default="", help="a paragraph for the results")
    parser.add_argument("--variant", default="", help="results as mesh_accuracy_VARIANT (another budget or scale)")
    args = parser.parse_args()
    sets, models = listed(args.sets, SETS, "--sets"), listed(args.models, list(MODELS), "--models")
    seeds = [int(s) for s in args.seeds.split(",")]
    load = os.getloadavg()
    runs_folder = Path(args.runs).expanduser()
    data = {name: make_data(runs_folder / "data", name, args) for name in sets}
    if args.only_data:
        return
    threads = args.threads or max(1, (os.cpu_count() or 1) // args.jobs)
    jobs, keys = [], {}
    for name in sets:
        for seed in seeds:  # seeds outermost: a partial campaign has every model at its first seeds
            for model in models:
                run = runs_folder / f"{name}_{model}_seed{seed}"
                config = runs_folder / "configs" / f"{name}_{model}.yaml"
                config.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(config, yaml.safe_dump(run_config(data[name]["train"], model, args)))
                jobs.append((str(config), [f"seed={seed}"], str(run)))
                keys[str(run)] = (name, model, seed, str(config))
    summaries = train_all(jobs, args.jobs, threads)
    rows = {}
    for run, (name, model, seed, config) in keys.items():
        summary = summaries[run]
        opened = Run(run)
        errors = {"train": errors_on(opened, data[name]["train"], "test", args)}
        errors.update({key: errors_on(opened, data[name][key], "all", args) for key in REMESHES})
        rows[Path(run).name] = {
            "name": Path(run).name, "set": name, "model": model, "seed": seed, "config": config,
            "parameters": summary["parameters"], "epochs": summary["epochs"], "best_epoch": summary["best_epoch"],
            "seconds_per_step": summary["seconds_per_step"], "train_hours": summary["train_seconds"] / 3600,
            "peak_rss_gib": summary["peak_rss_gib"], "threads": summary["threads"],
            "best_val_relative_l2": summary["best_val_relative_l2"], "errors": errors}
        print(f"{Path(run).name}: " + ", ".join(f"{k} {v['weighted']:.4f}" for k, v in errors.items()), flush=True)
    name = "mesh_accuracy" + (f"_{args.variant}" if args.variant else "")
    previous = {row["name"]: row for row in earlier(args.results, name).get("runs", [])}
    for key, row in rows.items():  # a run read again keeps the peak RSS measured when it trained
        if row["peak_rss_gib"] is None and key in previous:
            row["peak_rss_gib"] = previous[key]["peak_rss_gib"]
    order = [Path(run).name for run in keys]
    missing = [name for name in order if name not in rows]
    scale = {"n_train": args.n_train, "n_val": args.n_val, "n_test": args.n_test, "data_seed": args.data_seed,
             "elasticity_resolution": args.elasticity_resolution, "airfoil_resolution": args.airfoil_resolution,
             "far_radius": args.far_radius, "epochs": args.epochs, "batch": args.batch, "lr": args.lr,
             "threads": threads, "jobs": args.jobs, "seeds": seeds}
    result = {"scale": scale, "sets": sets, "models": {m: MODELS[m] for m in models},
              "remeshes": "half: half the element size; graded: grading 4 (dense near the void or the airfoil, "
                          "coarse far away); subsampled: half of the points at random, re-triangulated (Delaunay, "
                          "triangles whose centroid is outside the original mesh dropped) and the weights re-lumped "
                          "on it",
              "runs": [rows[name] for name in order if name in rows], "missing": missing, "note": args.note,
              "data": {name: {k: str(Path(v).relative_to(runs_folder)) for k, v in files.items()}
                       for name, files in data.items()}, "runs_folder": str(runs_folder)}
    write_results(args.results, name, result, markdown, load, "numpy", "scipy")


if __name__ == "__main__":
    main()
