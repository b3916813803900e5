"""FactFormer's Table 3 (3D smoke buoyancy; Li et al. 2023) at CPU scale: FNO3d, F-FNO3d, Dil-ResNet3d and
FactFormer, each trained LM (latent marching with pushforward, 4 frames per call) and AR (one frame per call,
2-call unrolls), on 32^3 smoke in a closed box; 4 given frames, 16 rolled out.

Table 3's columns per run: the relative L2 of the smoke d and of the velocity u = (u, v, w), averaged over the 16
frames and at the last one (mean over the test trajectories), the inference seconds of one rollout of a batch of
4 sequences, the parameters; the paper's figures beside them and a persistence row. Plots: the per-frame errors
and a vertical slice of d through the box (``smoke3d_frames.png``, ``smoke3d_slice.png``).

``--seeds 1,2`` trains each chosen config again with those seeds (runs ``NAME_seedS``; with ``--only-seeds``
only those) and adds each model's mean and spread over its seeds, for models whose difference is within a seed's.

Run from the repository root (training runs resume where they stopped; each invocation replaces only its runs'
rows of benchmarks/results/papers/factformer/smoke3d.json)::

    opformer generate smoke3d --samples 48 --resolution 32 --out data/smoke3d_32.h5
    python -m benchmarks.papers.factformer.smoke3d --jobs 2 --threads 1
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    ROOT, argument_parser, command, describe_load, describe_machine, earlier, listed, merged_runs, per_model_epochs,
    add_only_seeds, chosen_seeds, run_record, seed_of, seed_runs, seed_spread, table_head, to_measure, train_all,
    write_results)
from benchmarks.papers.factformer.tables import config_of, with_seeds

CONFIGS = ROOT / "configs" / "factformer"
MODELS = {"fno3d": "FNO3D", "ffno3d": "F-FNO3D", "dil_resnet": "Dil-ResNet", "factformer": "FactFormer"}
RUNS = [f"smoke3d_{model}_{protocol}" for model in MODELS for protocol in ("ar", "lm")]
#: The paper's Table 3 (64^3, GPU): d and u relative L2 averaged over the 16 frames and at the last one.
PAPER = {
    "smoke3d_fno3d_ar": (0.1607, 0.1775, 0.5198, 1.0245), "smoke3d_fno3d_lm": (0.1344, 0.1287, 0.4255, 0.6718),
    "smoke3d_ffno3d_ar": (0.1038, 0.1415, 0.3419, 0.8655), "smoke3d_ffno3d_lm": (0.1236, 0.1219, 0.3713, 0.6146),
    "smoke3d_dil_resnet_ar": (0.0843, 0.1070, 0.2378, 0.5372),
    "smoke3d_dil_resnet_lm": (0.0999, 0.1062, 0.2747, 0.5023),
    "smoke3d_factformer_ar": (0.1017, 0.1693, 0.3537, 0.7881),
    "smoke3d_factformer_lm": (0.0942, 0.0941, 0.2592, 0.4482),
}
#: Table 3's inference seconds (batch 4) where our copy of the paper is legible; its other times and most of its
#: parameter counts are not (the FactFormer-LM's 4.50M is the authors' config, counted by H5's import test).
PAPER_SECONDS = {"smoke3d_fno3d_lm": 1.47, "smoke3d_ffno3d_lm": 2.75, "smoke3d_dil_resnet_lm": 6.94,
                 "smoke3d_factformer_ar": 5.61}
BATCH = 4  # sequences per timed rollout (the paper's inference batch)


def main() -> None:
    parser = argument_parser(__doc__, parallel=True)
    parser.add_argument("--data", default="data/smoke3d_32.h5")
    parser.add_argument("--configs", default=",".join(RUNS), help="runs to train and evaluate (default: all 8)")
    parser.add_argument("--epochs", default="", help="N, or config=N,... per config (default: the configs')")
    parser.add_argument("--runs", default="runs/factformer-smoke3d", help="folder of the run directories")
    parser.add_argument("--eval-threads", type=int, default=2, help="threads of the timed rollouts")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override of every run's config, e.g. model.padding=0 (with --results elsewhere)")
    parser.add_argument("--seeds", default="", help="comma-separated seeds to train each config with beside its own")
    add_only_seeds(parser)
    args = parser.parse_args()

    names = listed(args.configs, list(RUNS), "--configs")
    epochs = per_model_epochs(args.epochs, names) if args.epochs else {}
    seeds = chosen_seeds(parser, args)
    jobs = {}
    for name in names:
        sets = [f"data.path={args.data}", *args.set] + ([f"train.epochs={epochs[name]}"] if name in epochs else [])
        for run, _, seed in seed_runs(name, seeds, args.only_seeds):
            jobs[run] = (str(CONFIGS / f"{name}.yaml"), sets + seed, str(Path(args.runs) / run))

    result = earlier(args.results, "smoke3d")
    load_before = os.getloadavg()
    start = time.perf_counter()
    summaries = train_all(list(jobs.values()), args.jobs, args.threads)
    wall = time.perf_counter() - start

    import torch

    torch.set_num_threads(args.eval_threads)
    invocation = command()
    rows = {}
    measured = to_measure({name: job[2] for name, job in jobs.items()}, summaries,
                          [row["name"] for row in result.get("runs", [])])
    for name in measured:
        config, sets, run = jobs[name]
        row = evaluate(run, args.data)
        rows[name] = {"name": name, **run_record(summaries[run], config, sets), **row, "command": invocation,
                      "wall_seconds": wall, "eval_threads": args.eval_threads,
                      "loadavg_before_after": [list(load_before), list(os.getloadavg())]}
    present = [row["name"] for row in result.get("runs", [])] + list(rows)
    result["runs"] = merged_runs(result.get("runs", []), rows, with_seeds(RUNS, present))
    result["persistence"] = evaluate(next(iter(jobs.values()))[2], args.data, persistence=True)
    result["data"] = args.data
    write_results(args.results, "smoke3d", result, markdown, load_before)
    plot(result, Path(args.results))


def channel_errors(pred: Any, truth: Any) -> dict[str, list[float]]:
    """Per-frame relative L2 of d (channel 0) and of u (channels 1-3 together), mean over the trajectories;
    ``pred``, ``truth`` ``(sample, frame, x, y, z, 4)``."""
    out = {}
    for key, channels in (("d", slice(0, 1)), ("u", slice(1, 4))):
        p, t = pred[..., channels].flatten(2), truth[..., channels].flatten(2)
        out[key] = ((p - t).norm(dim=-1) / t.norm(dim=-1)).mean(dim=0).tolist()
    return out


def evaluate(run: str, data_path: str, persistence: bool = False) -> dict[str, Any]:
    """A run's test rollouts (or persistence's on the same frames): d and u errors per frame, averaged and final;
    the seconds of one rollout of ``BATCH`` sequences; the middle x-z slice of d at the last frame of the first
    test trajectory, truth and prediction."""
    from opformer.eval.evaluate import run_rollout, single_file_run
    from opformer.eval.metrics import persistence as repeat_last

    opened = single_file_run(run)
    opened.payload, opened.surrogate  # read before the clock starts: the time is the rollout's
    started = time.perf_counter()
    row, data, preds, _ = run_rollout(opened, data_path, step=repeat_last if persistence else None, batch_size=BATCH)
    seconds = (time.perf_counter() - started) / -(-len(data) // BATCH)
    t_in = opened.surrogate.spec["data"]["t_in"]
    truth = data.fields[:, t_in:t_in + row["frames"]]
    errors = channel_errors(preds, truth)
    middle = truth.shape[3] // 2
    out = {key: {"per_frame": values, "mean": sum(values) / len(values), "final": values[-1]}
           for key, values in errors.items()}
    out |= {"frames": row["frames"], "samples": row["samples"], "relative_l2_all_channels": row["relative_l2"],
            "slice_d_final": [[round(float(v), 4) for v in line] for line in preds[0, -1, :, middle, :, 0]],
            "slice_d_final_truth": [[round(float(v), 4) for v in line] for line in truth[0, -1, :, middle, :, 0]]}
    if not persistence:
        out["inference_seconds_batch"] = seconds
    return out


def markdown(result: dict[str, Any]) -> str:
    """Table 3 at CPU scale beside the paper's."""
    runs, base = result["runs"], result["persistence"]
    commands = dict.fromkeys(row["command"] for row in runs)
    lines = ["# 3D smoke buoyancy (FactFormer's Table 3) at 32^3 on this machine", "",
             "Commands: " + ", ".join(f"`{c}`" for c in commands) + f" (the last: {describe_load(result)}); data "
             f"`{result['data']}`. Machine: {describe_machine(result['machine'])}.", "",
             f"4 given frames, {base['frames']} rolled out, {base['samples']} test trajectories; relative L2 of d and "
             "of u = (u, v, w), averaged over the rolled-out frames and at the last one (mean over the trajectories). "
             "Inference: seconds of one rollout of a batch of 4 sequences on the CPU. The paper's figures (64^3, "
             "a GPU, far longer training) in brackets.", "",
             *table_head("model", "protocol", "parameters", "d avg.", "d final", "u avg.", "u final",
                         "inference s (batch 4)", "s/step (train)", "threads", "train min", "best epoch",
                         "1-min load before, after"),
             f"| persistence (last given frame) | | 0 | {base['d']['mean']:.4f} | {base['d']['final']:.4f} | "
             f"{base['u']['mean']:.4f} | {base['u']['final']:.4f} | | | | | | |"]
    groups: dict[str, list[tuple[int, list[float]]]] = {}
    for row in runs:
        name, seed = config_of(row["name"])
        model, protocol = name.removeprefix("smoke3d_").rsplit("_", 1)
        paper = PAPER[name]
        seconds = PAPER_SECONDS.get(name)
        groups.setdefault(name, []).append((seed_of(row), [row[key][at] for key in ("d", "u")
                                                           for at in ("mean", "final")]))
        lines.append(
            f"| {MODELS[model]}{'' if seed is None else f' (seed {seed})'} | {protocol.upper()} | "
            f"{row['parameters']:,} | "
            f"{row['d']['mean']:.4f} ({paper[0]}) | {row['d']['final']:.4f} ({paper[1]}) | "
            f"{row['u']['mean']:.4f} ({paper[2]}) | {row['u']['final']:.4f} ({paper[3]}) | "
            f"{row['inference_seconds_batch']:.2f}" + (f" ({seconds})" if seconds else "") + " | "
            f"{row['seconds_per_step']:.2f} | {row['threads'] or '-'} | {60 * row['train_hours']:.1f} | "
            f"{row['best_epoch']}/{row['epochs']} | "
            + (" / ".join(f"{load[0]:.1f}" for load in row["loadavg_before_after"]) if "loadavg_before_after" in row
               else "") + " |")
    lines += seed_spread(groups, ["d avg.", "d final", "u avg.", "u final"], 3)
    lines += ["", "Plots: `smoke3d_frames.png` (per-frame errors of d and u), `smoke3d_slice.png` (d on the middle "
              "x-z plane at the last frame of the first test trajectory, z up).", ""]
    return "\n".join(lines)


def plot(result: dict[str, Any], folder: Path) -> None:
    """The per-frame errors of every run and persistence, and the slice of d of each LM run beside the truth."""
    import numpy as np

    from opformer.eval.plots import _pyplot, _save

    plt = _pyplot()
    runs, base = result["runs"], result["persistence"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    frames = np.arange(1, base["frames"] + 1)
    for ax, key in zip(axes, ("d", "u")):
        ax.plot(frames, base[key]["per_frame"], "k--", label="persistence")
        for row in runs:
            ax.plot(frames, row[key]["per_frame"], "-" if row["name"].endswith("lm") else ":",
                    label=row["name"].removeprefix("smoke3d_"))
        ax.set(xlabel="rolled-out frame", ylabel=f"relative L2 of {key}", title=key)
    axes[1].legend(fontsize=7)
    _save(fig, folder / "smoke3d_frames.png")
    shown = [("truth", base["slice_d_final_truth"]), ("persistence", base["slice_d_final"])]
    shown += [(row["name"].removeprefix("smoke3d_"), row["slice_d_final"]) for row in runs]
    fig, axes = plt.subplots(1, len(shown), figsize=(2.2 * len(shown), 2.6))
    high = float(np.max(shown[0][1]))
    for ax, (title, field) in zip(np.atleast_1d(axes), shown):
        ax.imshow(np.asarray(field).T, origin="lower", vmin=0.0, vmax=high, cmap="magma")
        ax.set_title(title, fontsize=7)
        ax.axis("off")
    _save(fig, folder / "smoke3d_slice.png")


if __name__ == "__main__":
    main()
