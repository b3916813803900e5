"""DPOT's claims at CPU scale (issue 29 §4): collects and evaluates the runs; it trains nothing.

The trainings run elsewhere (``bash benchmarks/papers/dpot/runs.sh GROUP`` from a frozen copy of the tree); this script
evaluates every run present under ``--runs`` (default ``runs/dpot``), says which are absent, and writes
benchmarks/results/papers/dpot/tables.json and dpot.md with a section per claim. The layout of ``--runs``:

- ``pretrain_micro``, ``pretrain_fno2d_time``: DPOT micro and FNO2d-time on the 8-member 64^2 mixture, the same
  steps (§4.1);
- ``kolmogorov_{finetune,scratch}_n{10,100}_s{0,1,2}``: Kolmogorov flow at 64^2 from 10 or 100 training
  trajectories, seeds 0-2, fine-tuned from ``pretrain_micro`` or from scratch, the same steps (§4.2);
- ``noise_{0,0.02,0.2,2.0,20.0}``: DPOT nano on {DR, SWE, CNS} with that input-noise RMS fraction (§4.3; the paper's
  five levels 0 to 5e-2 on 128^2 inputs of 10 frames, docs/training.md);
- ``noise_dr_swe_{0,0.02,0.2,2.0,20.0}``: the same five levels on {DR, SWE} alone (where the CNS member, about 14
  CPU-hours to generate, is absent);
- ``heads_dr_swe_{1,8,16}``, ``patch_dr_swe_{2,8,16}``: DPOT nano on {DR, SWE} with that number of heads or patch
  size (Table 3; ``noise_dr_swe_0.2`` is its 4 heads and patch 4);
- ``noise_0.2``, ``afno_nano``, ``fno2d_time_nano``: DPOT nano, its soft-shrink (AFNO) variant and FNO2d-time at
  its parameters, the same mixture and steps (§4.4);
- ``{darcy,turbulence3d}_{blocks,scratch}_s{0,1,2}``: steady Darcy at 85^2 and 3D turbulence at 32^3 with the
  blocks of ``pretrain_micro`` or from scratch, seeds 0-2, the same steps (§4.5).

A mixture run is evaluated per member on the member's test split and stored grid (``opformer evaluate RUN``:
L2RE per sample and real channel over the whole space-time rollout, beside persistence, the last given frame
repeated); ``--frames paper`` (default) rolls out each member for the paper's number of frames, ``all`` to the
end. A Kolmogorov or turbulence run is a trajectory run: its test trajectories rolled out to the end; a Darcy run
is evaluated on its test pairs. ``runs.log`` (written by
dpot_runs.sh) gives each run's training seconds and load averages. A finished run whose directory is not under
``--runs`` (made on another machine, or lost with one) keeps its evaluation from the previous tables.json, marked
carried in both outputs; ``--no-carry`` drops such runs. Run from the repository root::

    .venv/bin/python -m benchmarks.papers.dpot.tables [--runs runs/dpot] [--frames paper|all] [--no-carry]
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    ROOT, argument_parser, describe_load, describe_machine, table_head, table_row, timing_log, write_results)
from opformer.data.store import read_info
from opformer.errors import OpformerError
from opformer.eval.evaluate import evaluate_run, persistence_row
from opformer.eval.mixture import evaluate_mixture
from opformer.io import write_atomic
from opformer.runs import Run

NOISES = ("0", "0.02", "0.2", "2.0", "20.0")
#: the noise ablation's groups of runs: name prefix -> (config, the mixture's members)
NOISE_GROUPS = {"noise": ("configs/mixture/ablation_dpot_nano.yaml", "{DR, SWE, CNS}"),
                "noise_dr_swe": ("configs/mixture/ablation_dpot_nano_dr_swe.yaml", "{DR, SWE}")}
#: Table 3 at CPU scale on {DR, SWE}: the settings beside DPOT nano's 4 heads and patch 4 (``noise_dr_swe_0.2``)
SETTINGS = {"heads": ("model.n_heads", "4", ("1", "8", "16")), "patch": ("model.patch_size", "4", ("2", "8", "16"))}
#: the paper's Table 3 (test L2RE) by setting; its best patch, 8 at 128^2, gives 16^2 tokens: patch 4 at 64^2
PAPER_SETTINGS = {"heads": {"1": 0.0214, "4": 0.0186, "8": 0.0174, "16": 0.0188},
                  "patch": {"2": 0.369, "4": 0.0275, "8": 0.0174, "16": 0.0278}}
#: each run's evaluation, kept beside its checkpoint (see ``evaluate``)
CACHE = "dpot_eval.json"
#: the ratio to the noise-free run above which noise 2.0 counts as clearly worse (one seed each)
CLEARLY = 1.1
KOLMOGOROV = [f"kolmogorov_{init}_n{n}_s{seed}" for init in ("finetune", "scratch") for n in (10, 100)
              for seed in (0, 1, 2)]
KOLMOGOROV_CONFIG = "configs/kolmogorov/dpot_micro_finetune.yaml"
#: epochs per training-set size: about 600 optimiser steps each (windows of 33 frames, batch 32)
KOLMOGOROV_EPOCHS = {10: 75, 100: 8}
#: §4.5: the pre-trained blocks in other problems (configs/transfer/PROBLEM_dpot_micro.yaml)
STRETCH = [f"{problem}_{init}_s{seed}" for problem in ("darcy", "turbulence3d") for init in ("blocks", "scratch")
           for seed in (0, 1, 2)]
#: The DPOT paper's Ti, pre-trained and not fine-tuned (Table 1), by member (its CNS figures are for four
#: (M, eta) sets, not named here).
PAPER_TI = {"fno_nu1e-5": 0.0976, "fno_nu1e-4": 0.0606, "fno_nu1e-3": 0.00954, "dr": 0.0321, "swe": 0.00560,
            "smoke": 0.125, "smoke_conditioned": 0.384}


def commands(runs: str) -> dict[str, str]:
    """The command that makes each run of the layout (the runner's, for the runs dpot_runs.sh makes)."""
    train = "opformer train"
    out = {"pretrain_micro": f"{train} configs/mixture/dpot_micro.yaml --out {runs}/pretrain_micro",
           "pretrain_fno2d_time": f"{train} configs/mixture/fno2d_time.yaml --out {runs}/pretrain_fno2d_time",
           "afno_nano": f"{train} configs/mixture/ablation_dpot_nano.yaml --out {runs}/afno_nano --set model.shrink=0.01",
           "fno2d_time_nano": f"{train} configs/mixture/ablation_fno2d_time.yaml --out {runs}/fno2d_time_nano"}
    for prefix, (config, _) in NOISE_GROUPS.items():
        for noise in NOISES:
            out[f"{prefix}_{noise}"] = (f"{train} {config} --out {runs}/{prefix}_{noise} "
                                        f"--set rollout.noise={noise}")
    for setting, (key, _, values) in SETTINGS.items():
        for value in values:
            out[f"{setting}_dr_swe_{value}"] = (f"{train} {NOISE_GROUPS['noise_dr_swe'][0]} --out "
                                                f"{runs}/{setting}_dr_swe_{value} --set {key}={value}")
    for name in KOLMOGOROV:
        _, init, n, seed = name.split("_")
        start = f"--set init.checkpoint={runs}/pretrain_micro" if init == "finetune" else "--set init.checkpoint=null"
        out[name] = (f"{train} {KOLMOGOROV_CONFIG} --out {runs}/{name} --set data.n_train={n[1:]} "
                     f"--set train.epochs={KOLMOGOROV_EPOCHS[int(n[1:])]} --set seed={seed[1:]} {start}")
    for name in STRETCH:
        problem, init, seed = name.split("_")
        start = f"--set init.checkpoint={runs}/pretrain_micro" if init == "blocks" else "--set 'init={}'"
        out[name] = (f"{train} configs/transfer/{problem}_dpot_micro.yaml --out {runs}/{name} --set seed={seed[1:]} "
                     f"{start}")
    return out


def evaluate(run: Path, frames: str, device: str) -> dict[str, Any]:
    """One run's rows (a mixture run: a row per member with persistence; a trajectory run: one row and its
    persistence row), its summary, or the one-line error that stopped its evaluation.

    The rows are kept in ``RUN/dpot_eval.json`` with the size and time of the ``best.pt`` they came from and
    the ``frames`` setting, and reused while those match (an evaluation takes minutes on this machine).
    """
    cache = run / CACHE
    key = {"frames": frames, "best": _stamp(run / "best.pt")}
    if cache.is_file():
        kept = json.loads(cache.read_text())
        if kept.get("key") == key:
            return kept["result"]
    try:
        summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
        config = Run(run).config
        if config.data.mixture:
            rows = evaluate_mixture(run, paper_lengths=frames == "paper", device=device)
            result = {"kind": "mixture", "rows": rows, "summary": summary}
        elif read_info(config.data.path).kind != "trajectory":  # operator pairs (steady Darcy)
            result = {"kind": "operator", "rows": evaluate_run(run, config.data.path, [None], device=device),
                      "summary": summary}
        else:
            stored = len(read_info(config.data.path).times[::config.rollout.time_stride])
            frames_after = stored - config.rollout.t_in  # to the end, not the run's eval_frames
            row = evaluate_run(run, config.data.path, [None], device=device, frames=frames_after)[0]
            result = {"kind": "trajectory", "rows": [row], "summary": summary,
                      "persistence": persistence_row(run, config.data.path, frames=frames_after)}
    except OpformerError as exc:
        return {"error": str(exc).splitlines()[0]}
    write_atomic(cache, json.dumps({"key": key, "result": result}, indent=1))
    return result


def _stamp(path: Path) -> list[int]:
    """A file's size and modification time (ns): what identifies a checkpoint for the cache."""
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns]


def progress(run: Path) -> tuple[int, int]:
    """Epochs a run has finished (rows of its metrics.csv) and the epochs its config asks for."""
    metrics = run / "metrics.csv"
    done = max(len(metrics.read_text().splitlines()) - 1, 0) if metrics.is_file() else 0
    return done, Run(run).config.train.epochs


def mean_std(values: list[float]) -> tuple[float, float]:
    """The mean and sample standard deviation (0 for one value)."""
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1) if len(values) > 1 else 0.0
    return mean, math.sqrt(var)


def evaluated_earlier(path: Path, frames: str) -> dict[str, dict[str, Any]]:
    """The evaluated runs of a previous tables.json made with the same ``frames`` setting, by name (none if the file
    is absent)."""
    if not path.is_file():
        return {}
    previous = json.loads(path.read_text())
    if previous.get("frames") != frames:
        return {}
    return {name: entry for name, entry in previous["runs"].items()
            if entry.get("present") and "rows" in entry and "in_progress" not in entry and "error" not in entry}


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--runs", default="runs/dpot", help="folder of the run directories (see the layout above)")
    parser.add_argument("--frames", choices=("paper", "all"), default="paper",
                        help="mixture members rolled out for the paper's number of frames, or to the end")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-carry", action="store_true",
                        help="drop the runs evaluated earlier whose directories are not under --runs")
    args = parser.parse_args()
    load_before = os.getloadavg()
    root = Path(args.runs)
    log = timing_log(root / "runs.log")
    result: dict[str, Any] = {"runs_root": args.runs, "frames": args.frames, "runs": {}}
    earlier = {} if args.no_carry else evaluated_earlier(Path(args.results) / "tables.json", args.frames)
    for name, line in commands(args.runs).items():
        config = line.split()[2]
        entry: dict[str, Any] = {"command": line, "config_in_tree": (ROOT / config).is_file()}
        result["runs"][name] = entry
        run = root / name
        if not (run / "config.yaml").is_file() and name in earlier:
            print(f"carried {name} (evaluated earlier; no {run} here)")
            entry.update({**earlier[name], **entry, "carried": True})
            continue
        if not (run / "config.yaml").is_file():
            print(f"absent {run}")
            entry["present"] = False
            continue
        done, epochs = progress(run)
        if done < epochs:  # an unfinished run claims nothing
            print(f"in progress {run} ({done} of {epochs} epochs)")
            entry.update(present=True, in_progress=[done, epochs])
        else:
            print(f"evaluate {run}")
            entry.update(evaluate(run, args.frames, args.device), present=True, training=log.get(name))
    write_results(args.results, "tables", result, markdown, load_before)


def _member_l2re(entry: dict[str, Any]) -> dict[str, float]:
    return {row["member"]: row["l2re"] for row in entry.get("rows", [])} if entry.get("kind") == "mixture" else {}


def _ran(result: dict[str, Any], names: list[str]) -> list[str]:
    return [n for n in names if result["runs"][n].get("present") and "error" not in result["runs"][n]
            and "in_progress" not in result["runs"][n]]


def _status(result: dict[str, Any], names: list[str]) -> list[str]:
    """Lines naming the absent runs, the unfinished ones and the runs whose evaluation failed, and the commands
    that make (or resume) them."""
    lines = []
    for name in names:
        entry = result["runs"][name]
        if not entry["present"]:
            note = "" if entry["config_in_tree"] else " (its config is not in this tree yet)"
            lines.append(f"- `{name}`: no run yet; made by `{entry['command']}`{note}")
        elif "in_progress" in entry:
            done, epochs = entry["in_progress"]
            lines.append(f"- `{name}`: training, {done} of {epochs} epochs done (not evaluated; `opformer train "
                         f"--resume {result['runs_root']}/{name}` continues it)")
        elif "error" in entry:
            lines.append(f"- `{name}`: not evaluated: {entry['error']}")
    return lines


def _section(result: dict[str, Any], names: list[str], what: str, heading: str) -> tuple[list[str], list[str]]:
    """A claim's section so far and the runs of ``names`` that ran: its ``heading``, and when none ran, the line
    that nothing is claimed without a ``what`` run and the :func:`_status` of them all."""
    lines, ran = [heading, ""], _ran(result, names)
    if not ran:
        lines += [f"No {what} run yet: nothing is claimed.", "", *_status(result, names), ""]
    return lines, ran


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def _pretrain(result: dict[str, Any]) -> list[str]:
    names = ["pretrain_micro", "pretrain_fno2d_time"]
    lines, ran = _section(result, names, "pre-training",
                          "## 1. Pre-training on the 8-member mixture: DPOT micro vs FNO2d-time vs persistence")
    if not ran:
        return lines
    rows = {name: result["runs"][name]["rows"] for name in ran}
    members = list(dict.fromkeys(r["member"] for name in ran for r in rows[name]))
    lines += table_head("member", "frames", *[f"{n} L2RE" for n in ran], "persistence L2RE", "paper Ti (Table 1)")
    for member in members:
        found = {n: next((r for r in rows[n] if r["member"] == member), None) for n in ran}
        first = next(r for r in found.values() if r)
        lines.append(f"| {member} | {first['frames']} | " + " | ".join(_fmt(r and r["l2re"]) for r in found.values())
                     + f" | {_fmt(first['persistence_l2re'])} | {_fmt(PAPER_TI.get(member))} |")
    means = {n: sum(r["l2re"] for r in rows[n]) / len(rows[n]) for n in ran}
    persistence = [next(r for n in ran for r in rows[n] if r["member"] == m)["persistence_l2re"] for m in members]
    lines += ["| mean over members | | " + " | ".join(_fmt(means[n]) for n in ran)
              + f" | {_fmt(sum(persistence) / len(persistence))} | |", ""]
    for name in ran:
        worse = [r["member"] for r in rows[name] if not r["l2re"] < r["persistence_l2re"]]
        verdict = "yes" if not worse else f"no (not below on {', '.join(worse)})"
        lines.append(f"- `{name}` below persistence on every member: {verdict}; "
                     f"{result['runs'][name]['summary'].get('epochs')} epochs, "
                     f"{result['runs'][name]['summary'].get('parameters')} parameters")
    if len(ran) == 2:
        dpot, fno = ({r["member"]: r["l2re"] for r in rows[n]} for n in names)
        below = [m for m in dpot if m in fno and dpot[m] < fno[m]]
        lines.append(f"- DPOT micro below FNO2d-time (the same data, recipe and steps) on {len(below)} of {len(dpot)} "
                     f"members; mean over members {means[names[0]]:.4g} vs {means[names[1]]:.4g} "
                     f"({means[names[0]] / means[names[1]]:.2f}x). One seed each")
    return lines + _status(result, names) + [""]


def _kolmogorov(result: dict[str, Any]) -> list[str]:
    lines, ran = _section(result, KOLMOGOROV, "Kolmogorov",
                          "## 2. Transfer to Kolmogorov flow: fine-tuned from pre-trained micro vs scratch")
    if not ran:
        return lines
    lines += ["L2RE over the whole test rollout (the claim's measure), and the relative L2 of the first rolled-out "
              "frame (one step from true frames: where a better-initialised model shows first).", "",
              *table_head("init", "trajectories", "seeds", "L2RE mean", "L2RE std", "frame-1 mean", "frame-1 std",
                          "frames", "persistence L2RE", "persistence frame 1")]
    groups: dict[tuple[str, int], dict[str, list[float]]] = {}
    persistence: dict[tuple[str, int], dict[str, Any]] = {}
    for name in ran:
        _, init, n, _ = name.split("_")
        key, row = (init, int(n[1:])), result["runs"][name]["rows"][0]
        group = groups.setdefault(key, {"l2re": [], "first": []})
        group["l2re"].append(row["l2re"])
        group["first"].append(row["per_frame_relative_l2"][0])
        persistence[key] = {**result["runs"][name]["persistence"], "frames": row["frames"]}
    for (init, n), group in sorted(groups.items()):
        (m, sd), (mf, sf) = mean_std(group["l2re"]), mean_std(group["first"])
        per = persistence[init, n]
        lines.append(f"| {init} | {n} | {len(group['l2re'])} | {m:.4g} | {sd:.2g} | {mf:.4g} | {sf:.2g} | "
                     f"{per['frames']} | {per['l2re']:.4g} | {per['per_frame_relative_l2'][0]:.4g} |")
    lines.append("")
    for n in (10, 100):
        tuned, scratch = groups.get(("finetune", n)), groups.get(("scratch", n))
        if not tuned or not scratch or len(tuned["l2re"]) < 2 or len(scratch["l2re"]) < 2:
            lines.append(f"- {n} trajectories: undecided (fewer than 2 seeds of each)")
            continue
        for metric, label in (("l2re", "L2RE"), ("first", "frame-1 error")):
            lines.append(_versus(f"{n} trajectories, {label}", tuned[metric], scratch[metric]))
    return lines + _status(result, KOLMOGOROV) + [""]


def _versus(what: str, tuned: list[float], scratch: list[float], label: str = "fine-tuned") -> str:
    """The verdict line: the pre-trained start below scratch by more than 2 seed standard deviations?"""
    (mt, st), (ms, ss) = mean_std(tuned), mean_std(scratch)
    sd = max(st, ss)
    verdict = "yes" if ms - mt > 2 * sd else "no (null result)"
    return (f"- {what}: {label} {mt:.4g} vs scratch {ms:.4g} ({100 * (ms - mt) / ms:+.1f}%); below by more than 2 "
            f"seed standard deviations (the larger, {sd:.2g}): {verdict}")


def _stretch(result: dict[str, Any]) -> list[str]:
    lines, ran = _section(result, STRETCH, "stretch",
                          "## 5. Stretch: the pre-trained blocks in steady Darcy (85^2) and 3D turbulence (32^3) vs "
                          "scratch")
    if not ran:
        return lines
    lines += ["Only the blocks are copied (the embeddings, temporal aggregation and head start fresh). Darcy: "
              "relative L2 on the 20 test pairs. Turbulence: L2RE over the test rollout to the end, and the frame-1 "
              "error.", "", *table_head("problem", "start", "seeds", "metric", "mean", "std", "persistence")]
    groups: dict[tuple[str, str], dict[str, list[float]]] = {}
    persist: dict[str, dict[str, float]] = {}
    for name in ran:
        problem, init, _ = name.split("_")
        entry, row = result["runs"][name], result["runs"][name]["rows"][0]
        group = groups.setdefault((problem, init), {})
        if entry["kind"] == "operator":
            group.setdefault("relative L2", []).append(row["relative_l2"])
            continue
        group.setdefault(f"L2RE ({row['frames']} frames)", []).append(row["l2re"])
        group.setdefault("frame-1 error", []).append(row["per_frame_relative_l2"][0])
        persist[problem] = {f"L2RE ({row['frames']} frames)": entry["persistence"]["l2re"],
                            "frame-1 error": entry["persistence"]["per_frame_relative_l2"][0]}
    for (problem, init), group in sorted(groups.items()):
        for metric, values in group.items():
            mean, sd = mean_std(values)
            lines.append(f"| {problem} | {init} | {len(values)} | {metric} | {mean:.4g} | {sd:.2g} | "
                         f"{_fmt(persist.get(problem, {}).get(metric))} |")
    lines.append("")
    for problem in ("darcy", "turbulence3d"):
        blocks, scratch = groups.get((problem, "blocks"), {}), groups.get((problem, "scratch"), {})
        for metric in blocks:
            if len(blocks[metric]) < 2 or len(scratch.get(metric, [])) < 2:
                lines.append(f"- {problem}, {metric}: undecided (fewer than 2 seeds of each)")
            else:
                lines.append(_versus(f"{problem}, {metric}", blocks[metric], scratch[metric], "pre-trained blocks"))
    return lines + _status(result, STRETCH) + [""]


def _mixture_table(result: dict[str, Any], names: list[str], labels: list[str]) -> list[str]:
    values = {name: _member_l2re(result["runs"][name]) for name in names}
    members = list(dict.fromkeys(m for v in values.values() for m in v))
    first = result["runs"][names[0]]["rows"]
    persist = {r["member"]: r["persistence_l2re"] for r in first}
    lines = table_head("member", *labels, "persistence")
    for member in members:
        lines.append(f"| {member} | " + " | ".join(_fmt(values[n].get(member)) for n in names)
                     + f" | {_fmt(persist.get(member))} |")
    means = [sum(v.values()) / len(v) for v in values.values()]
    lines.append("| mean over members | " + " | ".join(_fmt(m) for m in means)
                 + f" | {_fmt(sum(persist.values()) / len(persist))} |")
    return lines


def _noise(result: dict[str, Any], prefix: str, heading: str) -> list[str]:
    """The noise ablation's section for one group of runs (:data:`NOISE_GROUPS`)."""
    names = [f"{prefix}_{n}" for n in NOISES]
    lines, ran = _section(result, names, "noise-ablation",
                          f"{heading}: DPOT nano on {NOISE_GROUPS[prefix][1]}")
    if not ran:
        return lines
    level = {n: n.removeprefix(f"{prefix}_") for n in ran}
    lines += _mixture_table(result, ran, [f"noise {level[n]}" for n in ran]) + [""]
    mean = {level[n]: sum(v.values()) / len(v) for n in ran if (v := _member_l2re(result["runs"][n]))}
    if {"0", "2.0"} <= mean.keys() and ({"0.02", "0.2"} & mean.keys()):
        small = min(mean[k] for k in ("0.02", "0.2") if k in mean)
        ratio = mean["2.0"] / mean["0"]
        lines.append(f"- 0.02 or 0.2 no worse than 0: {'yes' if small <= mean['0'] else 'no'} "
                     f"({small:.4g} vs {mean['0']:.4g}); 2.0 clearly worse than 0 (more than {CLEARLY - 1:.0%}): "
                     f"{'yes' if ratio > CLEARLY else 'no'} ({ratio:.2f}x). One seed per setting: differences of a "
                     "few percent are within what another seed could change")
    else:
        lines.append("- the expected shape is not tested until 0, 2.0 and 0.02 or 0.2 have run")
    if {"0", "20.0"} <= mean.keys():
        lines.append(f"- 20.0 (the paper's fifth level, 5e-2: 0.753, 42x its noise-free 0.0178): "
                     f"{mean['20.0'] / mean['0']:.2f}x of 0 ({mean['20.0']:.4g})")
    return lines + _status(result, names) + [""]


def _settings(result: dict[str, Any]) -> list[str]:
    """Table 3's section: DPOT nano on {DR, SWE} at each number of heads and patch size, its default run
    (``noise_dr_swe_0.2``) in both rows."""
    names = {setting: {value: f"{setting}_dr_swe_{value}" for value in values}
             for setting, (_, default, values) in SETTINGS.items()}
    lines, ran = _section(result, [n for group in names.values() for n in group.values()], "heads-and-patch",
                          "## 3c. Heads and patch size (Table 3 analog): DPOT nano on {DR, SWE}")
    if not ran:
        return lines
    for setting, (_, default, _) in SETTINGS.items():
        group = dict(sorted({**names[setting], default: "noise_dr_swe_0.2"}.items(), key=lambda kv: int(kv[0])))
        done = {value: name for value, name in group.items() if name in _ran(result, [name])}
        if len(done) < 2:
            continue
        lines += [f"{setting.capitalize()}:", "", *_mixture_table(result, list(done.values()),
                                                                   [f"{setting} {value}" for value in done]), ""]
        means = {value: sum(v.values()) / len(v) for value, name in done.items()
                 if (v := _member_l2re(result["runs"][name]))}
        paper = PAPER_SETTINGS[setting]
        best = min(means, key=means.__getitem__)
        lines.append(f"- lowest mean here: {setting} {best} ({means[best]:.4g}); the paper's: {setting} "
                     f"{min(paper, key=paper.__getitem__)} (" + " / ".join(f"{v} {e}" for v, e in paper.items())
                     + "; its patch 8 at 128^2 has the 16^2 tokens of patch 4 at 64^2). One seed each")
        lines.append("")
    return lines + _status(result, [n for group in names.values() for n in group.values()]) + [""]


def _architecture(result: dict[str, Any]) -> list[str]:
    names = ["noise_0.2", "afno_nano", "fno2d_time_nano"]
    labels = {"noise_0.2": "DPOT nano", "afno_nano": "AFNO nano (soft-shrink)", "fno2d_time_nano": "FNO2d-time"}
    lines, ran = _section(result, names, "architecture-ablation",
                          "## 4. Architecture ablation (Table 7 analog): DPOT nano vs AFNO vs FNO2d-time, equal steps")
    if not ran:
        return lines
    lines += _mixture_table(result, ran, [labels[n] for n in ran]) + [""]
    for name in ran:
        summary = result["runs"][name]["summary"]
        lines.append(f"- {labels[name]} (`{name}`): {summary.get('parameters')} parameters, "
                     f"{summary.get('epochs')} epochs")
    means = {n: sum(v.values()) / len(v) for n in ran if (v := _member_l2re(result["runs"][n]))}
    if "noise_0.2" in means and len(means) > 1:
        others = [n for n in means if n != "noise_0.2"]
        best = all(means["noise_0.2"] < means[n] for n in others)
        lines.append(f"- DPOT nano below {' and '.join(labels[n] for n in others)} on the mean over members (the "
                     f"paper's Table 7 order): {'yes' if best else 'no'} ("
                     + ", ".join(f"{means[n] / means['noise_0.2']:.2f}x" for n in others) + " of DPOT's). One seed each")
    return lines + _status(result, names) + [""]


def markdown(result: dict[str, Any]) -> str:
    """The report, from the JSON alone (a run of the layout that the JSON predates is shown as not made yet)."""
    absent = {name: {"command": line, "config_in_tree": True, "present": False}
              for name, line in commands(result["runs_root"]).items()}
    result = {**result, "runs": {**absent, **result["runs"]}}
    lines = ["# DPOT's claims at CPU scale (issue 29 §4)", "",
             f"`{result['command']}`; runs under `{result['runs_root']}`; mixture members rolled out for "
             f"{'the paper' + chr(39) + 's number of' if result['frames'] == 'paper' else 'all'} frames after the "
             "given ones, on their test split and stored grid. L2RE: per sample and real channel over the whole "
             "space-time rollout, mean over channels then samples; persistence repeats the last given frame. "
             "The paper used ~1000x this compute: the claims are tested, not its numbers.",
             "The runs are made by `bash benchmarks/papers/dpot/runs.sh pretrain ablation transfer stretch` from a "
             "frozen copy of the tree "
             "(each absent run's own command is listed below).",
             "", f"Machine: {describe_machine(result['machine'])}; {describe_load(result)}.", ""]
    carried = [name for name, entry in result["runs"].items() if entry.get("carried")]
    if carried:
        lines += [f"Carried from an earlier tables.json (evaluated then, on the machine that made them; their run "
                  f"directories are not under `{result['runs_root']}` here): " + ", ".join(f"`{n}`" for n in carried)
                  + ".", ""]
    lines += _pretrain(result) + _kolmogorov(result)
    lines += _noise(result, "noise", "## 3. Noise ablation (Table 4 analog)")
    lines += _noise(result, "noise_dr_swe", "## 3b. Noise ablation on two members")
    lines += _settings(result)
    lines += _architecture(result) + _stretch(result)
    lines += ["## 6. Step time and peak memory", "",
              "Measured by `opformer bench` (docs/bench.md), not by this script.", ""]
    timed = [(n, e) for n, e in result["runs"].items() if e.get("training")]
    if timed:
        lines += ["## Training times", "",
                  "Train seconds: the epochs' wall time over every invocation (summary.json); the last invocation's "
                  "seconds and load averages are dpot_runs.sh's runs.log (a resumed run's earlier ones are not "
                  "there).", "",
                  *table_head("run", "train seconds", "s/step", "last invocation s", "load start", "load end")]
        for name, entry in timed:
            summary, last = entry.get("summary", {}), entry["training"]
            lines.append(table_row(name, _fmt(summary.get("train_seconds")), _fmt(summary.get("seconds_per_step")),
                                   f"{last['seconds']:.0f}", " / ".join(map(str, last["load_start"])),
                                   " / ".join(map(str, last["load_end"]))))
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
