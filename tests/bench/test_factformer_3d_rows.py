"""FactFormer's 3D tables read a trained run's test rollouts: Table 2's u and p errors (the velocity's three
components together) and Table 3's d and u, beside persistence on the same frames."""

import numpy as np
import pytest
import torch

from benchmarks.papers.factformer import smoke3d, tables
from opformer.config import config_from_dict
from opformer.data.store import write_trajectory_dataset
from opformer.data.trajectories import load_trajectories
from opformer.train.trainer import train


def cube_run(tmp_path, channels: list[str]):
    """A 3D trajectory file (10 trajectories of 8 frames on 4^3) with ``channels`` and a run trained on it."""
    rng = np.random.default_rng(0)
    fields = rng.normal(size=(10, 8, 4, 4, 4, len(channels))).cumsum(axis=1)
    data = write_trajectory_dataset(tmp_path / "cube.h5", fields, np.arange(8.0), pde={}, solver={},
                                    domain={"lengths": [1.0] * 3, "periodic": [True] * 3}, seed=0, channels=channels)
    config = {"seed": 0, "model": {"name": "fno3d_time", "width": 4, "modes": 2, "n_layers": 1,
                                   "in_channels": len(channels)},
              "data": {"path": str(data), "n_train": 6, "n_val": 2, "n_test": 2},
              "schedule": {"name": "constant"}, "train": {"epochs": 1, "batch_size": 6, "num_threads": 1},
              "rollout": {"t_in": 3, "t_out": 1, "eval_frames": 5}}
    train(config_from_dict(config), tmp_path / "run")
    return str(tmp_path / "run"), str(data)


def test_table_2_reads_each_fields_error_and_persistences(tmp_path):
    run, data = cube_run(tmp_path, ["u", "v", "w", "p"])
    errors = tables.field_errors(run, data)
    assert set(errors) == {"u", "p"}
    truth = load_trajectories(data, "test", n_train=6, n_val=2, n_test=2).fields
    last, future = truth[:, 2, ..., :3], truth[:, 3:8, ..., :3]
    per_frame = ((future - last[:, None]).flatten(2).norm(dim=-1) / future.flatten(2).norm(dim=-1)).mean(dim=0)
    persistence = tables.field_errors(run, data, persistence=True)["u"]
    assert persistence["final_relative_l2"] == pytest.approx(per_frame[-1].item(), rel=1e-5)
    assert persistence["relative_l2"] == pytest.approx(per_frame.mean().item(), rel=1e-5)
    assert persistence["per_frame"] == pytest.approx(per_frame.tolist(), rel=1e-5)
    assert len(errors["p"]["per_frame"]) == 5


def test_the_frame_wise_plot_shows_the_runs_of_their_configs_seed_with_per_frame_errors(tmp_path, monkeypatch):
    def row(name: str, frames: bool = True) -> dict:
        errors = {"relative_l2": 0.1, "final_relative_l2": 0.2, **({"per_frame": [0.1, 0.2]} if frames else {})}
        return {"name": name, "fields": {"u": errors, "p": errors}}

    figures = []
    monkeypatch.setattr("opformer.eval.plots._save", lambda fig, path: figures.append(fig))
    part = {"runs": [row("turbulence3d_factformer_lm"), row("turbulence3d_factformer_lm_seed1"),
                     row("turbulence3d_fno3d_ar"), row("turbulence3d_ffno3d_lm", frames=False)],
            "persistence": {"fields": row("persistence")["fields"]}}
    tables.plot_frames(part, tmp_path / "frames.png")
    (figure,) = figures
    for ax, field in zip(figure.axes, ("u", "p")):
        assert ax.get_title() == field
        assert [line.get_label() for line in ax.get_lines()] == ["persistence", "factformer_lm", "fno3d_ar"]
        assert [line.get_linestyle() for line in ax.get_lines()] == ["--", "-", ":"]
    tables.plot_frames({"runs": [row("turbulence3d_ffno3d_lm", frames=False)]}, tmp_path / "none.png")
    assert len(figures) == 1


def test_table_3_reads_d_and_u_per_frame_and_the_slice(tmp_path):
    run, data = cube_run(tmp_path, ["d", "u", "v", "w"])
    out = smoke3d.evaluate(run, data)
    assert len(out["d"]["per_frame"]) == len(out["u"]["per_frame"]) == out["frames"] == 5
    assert out["u"]["final"] == out["u"]["per_frame"][-1]
    assert np.shape(out["slice_d_final"]) == (4, 4) and "inference_seconds_batch" in out
    truth = load_trajectories(data, "test", n_train=6, n_val=2, n_test=2).fields
    assert out["slice_d_final_truth"] == [[round(float(v), 4) for v in line] for line in truth[0, -1, :, 2, :, 0]]
    assert "inference_seconds_batch" not in smoke3d.evaluate(run, data, persistence=True)
    assert torch.isfinite(torch.tensor(out["d"]["per_frame"])).all()


def test_table_3_over_seeds_labels_each_seed_and_gives_the_spread():
    """Rows NAME and NAME_seedS (the seed an override) are one model: each labelled with its seed, then the mean and
    sample standard deviation of d and u (x 1e-3)."""
    import copy
    import json

    from benchmarks.harness import ROOT

    result = json.loads((ROOT / "benchmarks/results/papers/factformer/smoke3d_velocity/smoke3d.json").read_text())
    result["runs"] = [row for row in result["runs"] if "_seed" not in row["name"]]  # each model's first seed only
    base = next(row for row in result["runs"] if row["name"] == "smoke3d_factformer_lm")
    other = copy.deepcopy(base)
    other.update(name="smoke3d_factformer_lm_seed1", overrides=base["overrides"] + ["seed=1"])
    for key, shift in (("d", 0.01), ("u", 0.1)):
        other[key]["mean"] = base[key]["mean"] + shift
        other[key]["final"] = base[key]["final"] + shift
    result["runs"].append(other)
    lines = smoke3d.markdown(result).splitlines()
    assert any(line.startswith("| FactFormer (seed 1) | LM |") for line in lines)
    (spread,) = [line for line in lines if line.startswith("| smoke3d_factformer_lm |")]
    d, u = 1e3 * (base["d"]["mean"] + 0.005), 1e3 * (base["u"]["mean"] + 0.05)
    assert spread.startswith(f"| smoke3d_factformer_lm | 1127802, 1 | {d:.3f} +- 7.071 |")
    assert f"| {u:.3f} +- 70.711 |" in spread
    assert not any(line.startswith("| smoke3d_dil_resnet_lm |") for line in lines)  # one seed: no spread
