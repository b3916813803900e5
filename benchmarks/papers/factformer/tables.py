"""FactFormer benchmark (issue 5; Li et al. 2023, Tables 1, 2 and 4 and Figure 3) at this machine's scale.

Parts (``--parts``, any subset; ``--configs`` narrows them to some of their runs; ``--set KEY=VALUE``, repeatable,
overrides every run's config, e.g. a smaller budget, and is recorded in its row; ``--seeds`` trains each run again
with other seeds (runs NAME_seedS) and adds their mean and spread). Each run's row replaces only that run's row in
benchmarks/results/papers/factformer/tables.json, with its own command, so the tables can be filled one run per
invocation over several sessions; training runs resume where they stopped.

1. ``kolmogorov``: FactFormer-LM, FactFormer-AR, F-FNO-LM and FNO2d-LM (configs/factformer/kolmogorov_*.yaml)
   on Kolmogorov flow at 64^2: rollout of 16 frames from 10 given ones, trajectory-averaged and final-frame
   relative L2 of the vorticity, inference seconds per trajectory (batch 10), parameters.
2. ``attention``: the rollout error of the full-grid linear attention variant trained like FactFormer-LM, and
   ``attention_cost``: factorised versus full-grid linear attention in the same model, same heads (the paper's
   Table 4), forward and forward+backward seconds and peak memory at 64^2 and 128^2 (``opformer bench``, a
   fresh process per cell, batch 4).
3. ``turbulence3d``: FactFormer against FNO3d, F-FNO3d and Dil-ResNet3d on forced isotropic turbulence at 32^3,
   each trained by latent marching (LM, 2 frames per call) and autoregressively (AR, 1 frame per call on 2-call
   unrolls): each predicts the velocity u = (u, v, w) and the pressure p, and the table gives the error of each
   (the paper's Table 2 columns; files generated before the pressure existed hold u only, and give the u columns).
4. ``darcy``: FactFormer trained at 85 and evaluated zero-shot at 141 and 211, beside the Galerkin
   Transformer of benchmarks/papers/galerkin/darcy.py (its row in benchmarks/results/papers/galerkin/darcy.json).

Run from the repository root::

    .venv/bin/opformer generate kolmogorov --samples 140 --t-final 4 --solve-resolution 128 --out data/kolmogorov.h5
    .venv/bin/opformer generate turbulence3d --samples 140 --out data/turbulence3d.h5
    .venv/bin/python -m benchmarks.papers.factformer.tables --parts kolmogorov,attention

Kolmogorov data are solved on 128^2 and stored at 64^2 (the paper: 256^2 data trained at 128^2; docs/solvers.md
has the check); trajectories of 4 time units (65 frames every 1/16) after a 30-unit spin-up.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    GIB, RESULTS, ROOT, argument_parser, chosen_seeds, command, earlier, gib, listed, merged_runs, per_model_epochs,
    run_record, seed_of, seed_runs, seed_spread, table_head, table_row, to_measure, train_all, write_results)

from opformer.data.store import read_info

CONFIGS = ROOT / "configs" / "factformer"
PARTS = {
    "kolmogorov": ("kolmogorov", ["kolmogorov_factformer_lm", "kolmogorov_factformer_ar", "kolmogorov_ffno_lm",
                                  "kolmogorov_fno2d_lm"]),
    "attention": ("kolmogorov", ["kolmogorov_linear"]),
    "attention_cost": ("", []),
    "turbulence3d": ("turbulence3d", [f"turbulence3d_{model}_{protocol}" for protocol in ("lm", "ar")
                                      for model in ("factformer", "fno3d", "ffno3d", "dil_resnet")]),
    "darcy": ("darcy", ["darcy_factformer"]),
}
DARCY_FINE, DARCY_ZERO_SHOT = 85, (141, 211)
ATTENTION_PRESETS = ["factformer_kolmogorov", "linear_kolmogorov"]


def main() -> None:
    parser = argument_parser(__doc__, parallel=True)
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--configs", default="", help="only these runs of the parts (default: all of them)")
    parser.add_argument("--kolmogorov", default="data/kolmogorov.h5")
    parser.add_argument("--turbulence3d", default="data/turbulence3d.h5")
    parser.add_argument("--darcy", default="data/darcy_421.h5")
    parser.add_argument("--epochs", default="", help="N, or config=N,... per config (default: the configs')")
    parser.add_argument("--runs", default="runs/factformer-benchmark", help="folder of the run directories")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for every run (repeatable)")
    parser.add_argument("--seeds", default="",
                        help="comma-separated seeds to train each run with beside its config's (runs NAME_seedS)")
    args = parser.parse_args()

    parts = listed(args.parts, list(PARTS), "--parts")
    configs = [name for part in parts for name in PARTS[part][1]]
    if args.configs:
        chosen = args.configs.split(",")
        if set(chosen) - set(configs):
            raise SystemExit(f"--configs: {', '.join(sorted(set(chosen) - set(configs)))} not in the parts "
                             f"{args.parts}; expected some of {', '.join(configs)}")
        configs = chosen
    epochs = per_model_epochs(args.epochs, configs) if args.epochs else {}
    data = {"kolmogorov": args.kolmogorov, "turbulence3d": args.turbulence3d, "darcy": args.darcy}
    seeds = chosen_seeds(parser, args)
    jobs: dict[str, tuple[str, str, list[str], str]] = {}
    for part in parts:
        kind, names = PARTS[part]
        for name in (n for n in names if n in configs):
            sets = [f"data.path={data[kind]}"] + ([f"train.epochs={epochs[name]}"] if name in epochs else [])
            if kind == "darcy":
                sets.append(f"data.resolution={DARCY_FINE}")
            sets += args.set
            for run, _, seed in seed_runs(name, seeds):
                jobs[run] = (data[kind], str(CONFIGS / f"{name}.yaml"), sets + seed, str(Path(args.runs) / run))

    results = Path(args.results)
    result = earlier(results, "tables") or {"parts": {}}
    load_before = os.getloadavg()
    start = time.perf_counter()
    summaries = train_all([(config, sets, run) for _, config, sets, run in jobs.values()], args.jobs, args.threads)
    wall = time.perf_counter() - start
    invocation = command()
    tabulated = [row["name"] for entry in result["parts"].values() for row in entry.get("runs", [])]
    rows = {name: {**evaluate(name, *jobs[name], summaries[jobs[name][3]]), "command": invocation,
                   "wall_seconds": wall}
            for name in to_measure({name: job[3] for name, job in jobs.items()}, summaries, tabulated)}

    from opformer.eval.evaluate import persistence_row

    for part in parts:
        entry = result["parts"].setdefault(part, {})
        if PARTS[part][1]:
            previous = entry.get("runs", [])
            order = with_seeds(PARTS[part][1], [row["name"] for row in previous] + list(rows))
            entry["runs"] = merged_runs(previous, rows, order)
        trained = [name for name in PARTS[part][1] if name in rows]
        if part in ("kolmogorov", "turbulence3d") and trained:  # the same test frames for every run of a part;
            # from a run of this invocation, as earlier runs' folders may be gone (a new machine)
            entry["persistence"] = persistence_row(Path(args.runs) / trained[0], data[part])
            entry["grid"] = list(read_info(data[part]).spatial_shape)
            if part == "turbulence3d":
                entry["persistence"]["fields"] = field_errors(str(Path(args.runs) / trained[0]), data[part],
                                                              persistence=True)
        if part == "attention_cost":
            threads = args.threads or max(1, (os.cpu_count() or 1) // args.jobs)
            entry.update(bench=attention_costs(threads), command=invocation)
        if part == "darcy":
            entry["galerkin_transformer"] = darcy_gt_row(RESULTS / "papers" / "galerkin")
    write_results(results, "tables", result, markdown, load_before)
    if "turbulence3d" in parts:
        plot_frames(result["parts"]["turbulence3d"], results / "turbulence_frames.png")


def evaluate(name: str, data: str, config: str, sets: list[str], run: str, summary: dict[str, Any]) -> dict[str, Any]:
    """Test errors of a trained run (rollouts, or Darcy at 85 and zero-shot) with the inference time."""
    from opformer.config import load_config
    from opformer.eval.evaluate import evaluate_run

    resolutions = [DARCY_FINE, *DARCY_ZERO_SHOT] if name.startswith("darcy") else [None]
    started = time.perf_counter()
    evaluation = evaluate_run(run, data, resolutions)
    seconds = time.perf_counter() - started
    loaded = load_config(config, sets)
    fields = {"fields": field_errors(run, data)} if name.startswith("turbulence3d") else {}
    return {"name": name, "seed": loaded.seed, **run_record(summary, config, sets), "test": evaluation,
            "evaluation_seconds_per_sample": seconds / (loaded.data.n_test * len(resolutions)), **fields}


def config_of(run: str) -> tuple[str, int | None]:
    """A run's config name and the seed its name gives: ``NAME_seedS`` is (NAME, S), any other run (NAME, None),
    trained at its config's seed."""
    name, marker, seed = run.rpartition("_seed")
    return (name, int(seed)) if marker and seed.isdigit() else (run, None)


def with_seeds(names: list[str], present: list[str]) -> list[str]:
    """The order of a part's rows: each of its runs ``names``, then its runs of other seeds among ``present``
    (NAME_seedS) by seed."""
    seeded = sorted({config_of(run) for run in present}, key=lambda pair: pair[1] or 0)
    return [run for name in names
            for run in (name, *(f"{name}_seed{seed}" for base, seed in seeded if base == name and seed is not None))]


def _fields_spread(runs: list[dict[str, Any]]) -> list[str]:
    """Table 2's columns over the seeds of each model that has runs of several (NAME and NAME_seedS)."""
    groups: dict[str, list[tuple[int, list[float]]]] = {}
    for row in runs:
        if "fields" in row and set(FIELDS) <= set(row["fields"]):
            values = [row["fields"][f][key] for f in FIELDS for key in ("relative_l2", "final_relative_l2")]
            groups.setdefault(config_of(row["name"])[0], []).append((seed_of(row), values))
    return seed_spread(groups, ["u avg.", "u final", "p avg.", "p final"], 3)


#: Table 2's fields: the velocity (its three components together) and the pressure
FIELDS = {"u": ["u", "v", "w"], "p": ["p"]}


def field_errors(run: str, data: str, persistence: bool = False) -> dict[str, dict[str, Any]]:
    """The test rollouts' relative L2 of each field of :data:`FIELDS` the data hold, per frame (over the grid and
    the field's channels), averaged over the rolled-out frames and at the last one (means over the trajectories),
    as the paper's Table 2, and each frame's (``per_frame``); of the persistence baseline with ``persistence``."""
    from opformer.eval.evaluate import run_rollout
    from opformer.eval.metrics import persistence as repeat_last, relative_l2_per_sample

    row, split, preds, opened = run_rollout(run, data, step=repeat_last if persistence else None)
    t_in, channels = opened.surrogate.spec["data"]["t_in"], split.info.input_channels
    truth = split.fields[:, t_in:t_in + row["frames"]]
    errors = {}
    for field, names in FIELDS.items():
        if set(names) <= set(channels):
            index = [channels.index(name) for name in names]
            per_frame = relative_l2_per_sample(preds[..., index].flatten(0, 1), truth[..., index].flatten(0, 1))
            per_frame = per_frame.reshape(len(split), row["frames"])
            errors[field] = {"relative_l2": float(per_frame.mean()),
                             "final_relative_l2": float(per_frame[:, -1].mean()),
                             "per_frame": [float(e) for e in per_frame.mean(dim=0)]}
    return errors


def attention_costs(threads: int) -> list[dict[str, Any]]:
    """``opformer bench`` cells of factorised and full attention, forward and train, at 64^2 and 128^2, each in a
    fresh process with ``threads`` threads."""
    from opformer.bench.sweep import BenchSettings, run_bench

    cells = []
    for mode in ("forward", "train"):
        settings = BenchSettings(models=ATTENTION_PRESETS, resolutions=[64, 128], batch=4, mode=mode, repeats=5,
                                 warmup=1, threads=threads, time_budget=900.0)
        cells += run_bench(settings)["cells"]
    return cells


def darcy_gt_row(results: Path) -> dict[str, Any] | None:
    """The forward GT run of benchmarks/papers/galerkin/darcy.py's results in the folder ``results`` (None if that
    benchmark has not run)."""
    runs = earlier(results, "darcy").get("runs", [])
    return next((r for r in runs if r["model"] == "gt" and r["problem"] == "forward"), None)


def _rollout_table(runs: list[dict[str, Any]], baseline: dict[str, Any] | None = None) -> list[str]:
    lines = table_head("model", "parameters", "traj. rel. L2 (test)", "final frame", "inference s/traj", "s/step",
                       "threads", "train h", "peak RSS GiB", "best epoch")
    if baseline is not None:
        lines.append(f"| persistence (last given frame repeated) | 0 | {baseline['relative_l2']:.3e} | "
                     f"{baseline['final_relative_l2']:.3e} | | | | | | |")
    for row in runs:
        (test,) = row["test"]
        lines.append(f"| {row['name']} | {row['parameters']:,} | {test['relative_l2']:.3e} | "
                     f"{test['final_relative_l2']:.3e} | {row['evaluation_seconds_per_sample']:.3f} | "
                     f"{row['seconds_per_step']:.3f} | {row['threads'] or '-'} | {row['train_hours']:.2f} | "
                     f"{gib(row['peak_rss_gib'])} | {row['best_epoch']}/{row['epochs']} |")
    return lines


def _attention_table(cells: list[dict[str, Any]]) -> list[str]:
    lines = table_head("grid", "mode", "factorised s", "full (linear) s", "full / factorised time",
                       "tensor peak GiB (fact. / full)", "full / factorised tensor peak", "peak RSS GiB (fact. / full)")
    for mode in ("forward", "train"):
        for n in (64, 128):
            fact, full = (next((c for c in cells if c["model"] == p and c["mode"] == mode and c["resolution"] == n),
                               {"status": "missing"}) for p in ATTENTION_PRESETS)
            if fact["status"] != "ok" or full["status"] != "ok":
                lines.append(f"| {n}^2 | {mode} | {fact['status']} | {full['status']} | | | | |")
                continue
            tensors = (f"{fact['peak_tensor_bytes'] / GIB:.2f} / {full['peak_tensor_bytes'] / GIB:.2f} | "
                       f"{full['peak_tensor_bytes'] / fact['peak_tensor_bytes']:.2f}" if "peak_tensor_bytes" in fact
                       else "not measured | ")
            lines.append(f"| {n}^2 | {mode} | {fact['seconds_median']:.3f} | {full['seconds_median']:.3f} | "
                         f"{full['seconds_median'] / fact['seconds_median']:.2f} | {tensors} | "
                         f"{fact['peak_memory_bytes'] / GIB:.2f} / {full['peak_memory_bytes'] / GIB:.2f} |")
    return lines


def _fields_table(runs: list[dict[str, Any]], baseline: dict[str, Any] | None = None) -> list[str]:
    """Table 2's columns: the error of u and of p, averaged over the rolled-out frames and at the last one."""
    lines = table_head("model", "parameters", "u avg. error", "u final error", "p avg. error", "p final error",
                       "inference s/traj", "s/step", "threads", "train h", "best epoch")

    def errors(fields: dict[str, dict[str, float]]) -> str:
        return " | ".join(f"{fields[f][key]:.3e}" if f in fields else "not stored"
                          for f in FIELDS for key in ("relative_l2", "final_relative_l2"))

    if baseline is not None and "fields" in baseline:
        lines.append(f"| persistence (last given frame repeated) | 0 | {errors(baseline['fields'])} | | | | | |")
    for row in runs:
        if "fields" not in row:  # a row from before the fields were measured: its errors are in the table above
            continue
        lines.append(f"| {row['name']} | {row['parameters']:,} | {errors(row['fields'])} | "
                     f"{row['evaluation_seconds_per_sample']:.3f} | {row['seconds_per_step']:.3f} | "
                     f"{row['threads'] or '-'} | {row['train_hours']:.2f} | {row['best_epoch']}/{row['epochs']} |")
    return lines


def has_frames(row: dict[str, Any]) -> bool:
    """Whether a turbulence row holds each field's per-frame errors (rows measured before they were kept do not)."""
    return bool(row.get("fields")) and all("per_frame" in errors for errors in row["fields"].values())


def plot_frames(part: dict[str, Any], path: Path) -> None:
    """The paper's frame-wise error trends (its appendix figures): each field's test error per rolled-out frame
    of every run of its config's seed (LM solid, AR dotted) and of persistence; runs measured before the per-frame
    errors were kept are left out."""
    from opformer.eval.plots import _pyplot, _save

    shown = [row for row in part["runs"] if config_of(row["name"])[1] is None and has_frames(row)]
    if not shown:
        return
    base = part.get("persistence", {}).get("fields", {})
    plt = _pyplot()
    fields = list(shown[0]["fields"])
    fig, axes = plt.subplots(1, len(fields), figsize=(5.5 * len(fields), 4), squeeze=False, layout="constrained")
    for ax, field in zip(axes[0], fields):
        if "per_frame" in base.get(field, {}):
            frames = range(1, len(base[field]["per_frame"]) + 1)
            ax.plot(frames, base[field]["per_frame"], "k--", label="persistence")
        for row in shown:
            errors = row["fields"][field]["per_frame"]
            ax.plot(range(1, len(errors) + 1), errors, ":" if row["name"].endswith("_ar") else "-",
                    label=row["name"].removeprefix("turbulence3d_"))
        ax.set(xlabel="rolled-out frame", ylabel=f"relative L2 of {field}", title=field)
    axes[0][-1].legend(fontsize=7)
    _save(fig, path)


def markdown(result: dict[str, Any]) -> str:
    """The parts that have run, as markdown tables with the command."""
    parts = result["parts"]
    commands = [r["command"] for part in parts.values() for r in part.get("runs", []) if "command" in r]
    commands += [part["command"] for part in parts.values() if "command" in part]
    lines = ["# FactFormer benchmark (Li et al. 2023) on this machine", "",
             "Commands: " + ", ".join(f"`{c}`" for c in dict.fromkeys(commands)) + " (runs at a time as given "
             "there, threads per run in the tables; 2 cores). Model selection on the validation trajectories' "
             "rollout error (Darcy: on the validation relative L2). Budgets (epochs) per run in the tables.", ""]
    if "kolmogorov" in parts:
        n = parts["kolmogorov"].get("grid", [64])[0]  # results from before the grid was kept: 64^2
        lines += [f"## Kolmogorov flow, {n}^2 (the paper's Table 1)", "",
                  "10 given frames, 16 rolled out; LM: 4 frames per call.", "",
                  *_rollout_table(parts["kolmogorov"]["runs"], parts["kolmogorov"].get("persistence")),
                  ""]
    if "attention" in parts or "attention_cost" in parts:
        lines += ["## Factorised versus full-grid linear attention (the paper's Table 4)", "",
                  "Same model (d 128, 4 layers, latent marching 4 steps), batch 4; the paper measured about 3x the "
                  "time and 2.3x the memory for full attention at 128^2 on a GPU (peak allocated CUDA memory). The tensor "
                  "peak is its CPU counterpart: the most tensor memory alive at once (weights, input, and what a "
                  "step allocates, from torch's allocator events; `opformer.bench.memory`). The peak RSS of each cell "
                  "process is also given: it includes freed blocks the C allocator keeps for reuse, as the trainer "
                  "asks it to (`train.retain_freed_memory`).", ""]
        if "attention_cost" in parts:
            lines += [*_attention_table(parts["attention_cost"]["bench"]), ""]
        if "attention" in parts:
            lines += ["Rollout error of the full-attention model:", "", *_rollout_table(parts["attention"]["runs"]), ""]
    if "turbulence3d" in parts:
        turbulence = parts["turbulence3d"]
        lines += ["## 3D isotropic turbulence (the paper's Table 2 at CPU scale)", "",
                  "10 given frames, the rest rolled out; LM: 2 frames per call. The grid, budget and data of each run "
                  "are its overrides in the JSON and the command above. Errors over all stored channels:", "",
                  *_rollout_table(turbulence["runs"], turbulence.get("persistence")), ""]
        if any("fields" in row for row in turbulence["runs"]):
            lines += ["Table 2's columns: the relative L2 of the velocity u = (u, v, w) and of the pressure p, each "
                      "per frame, averaged over the rolled-out frames and at the last one:", "",
                      *_fields_table(turbulence["runs"], turbulence.get("persistence")),
                      *_fields_spread(turbulence["runs"]), ""]
            if any(has_frames(row) for row in turbulence["runs"]):
                lines += ["Each field's error per rolled-out frame (the paper's appendix figures): "
                          "`turbulence_frames.png`.", ""]
    if "darcy" in parts:
        lines += ["## Darcy flow, trained at 85, zero-shot at 141 and 211 (the paper's Figure 3)", "",
                  *table_head("model", "parameters", "rel. L2 (test)", "s/step", "threads", "train h", "peak RSS GiB",
                              "best epoch")]
        gt = parts["darcy"]["galerkin_transformer"]
        for name, row in [("FactFormer", parts["darcy"]["runs"][0]), ("Galerkin Transformer", gt)]:
            if row is None:
                lines.append(f"| {name} | not run (benchmarks/papers/galerkin/darcy.py) | | | | | | |")
                continue
            errors = ", ".join(f"{r['resolution']}: {r['relative_l2']:.3e}" for r in row["test"])
            lines.append(table_row(name, f"{row['parameters']:,}", errors, f"{row['seconds_per_step']:.3f}",
                                   row["threads"], f"{row['train_hours']:.2f}", gib(row['peak_rss_gib']),
                                   f"{row['best_epoch']}/{row['epochs']}"))
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
