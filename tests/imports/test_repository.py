"""``opformer export RUN DIR`` and ``opformer import opformer DIR|hf://...``: a run others can load, bit for bit.

tests/fixtures/exports/v1/ is a repository of format version 1 (made by tests/fixtures/export_fixture.py) with
the input and output its model gave (v1_io.safetensors): every later opformer must load it and give that output.
"""

import hashlib
import json
import struct
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from opformer.cli import main
from opformer.config import InitConfig, config_from_dict, config_to_dict
from opformer.data.store import read_arrays
from opformer.errors import CheckpointError
from opformer.imports.convert import import_run
from opformer.imports.export import FORMAT_VERSION, export_run
from opformer.imports.repository import import_repository
from opformer.models.registry import build_model
from opformer.runs import Run, load_checkpoint
from opformer.train.transfer import initialize
from opformer.train.trainer import train

from tests.imports.test_hub import COMMIT, cache_file, offline_cache, one_line_error  # noqa: F401 (a fixture)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny trained 2D run with pointwise normalizers (non-trivial statistics) and a Dirichlet output."""
    from tests.toy_data import tiny_darcy_config, write_toy_darcy

    folder = tmp_path_factory.mktemp("trained")
    data = write_toy_darcy(folder / "darcy.h5")
    train(config_from_dict(tiny_darcy_config(data, epochs=1)), folder / "run")
    return folder / "run", data


def predictions(run, data):
    surrogate, _ = Run(run).model("best")
    with torch.no_grad():
        return surrogate(torch.from_numpy(read_arrays(data, slice(None))[0]).float())


@pytest.mark.slow
def test_export_then_import_gives_the_runs_predictions_bit_for_bit(trained, tmp_path, capsys):
    run, data = trained
    exported, imported = tmp_path / "shared", tmp_path / "imported"
    evaluated = tmp_path / "eval.json"
    assert main(["evaluate", str(run), "--json", str(evaluated)]) == 0
    assert main(["export", str(run), str(exported), "--metrics", str(evaluated)]) == 0
    assert sorted(p.name for p in exported.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    # the weights file: safetensors (an 8-byte header length, a JSON header, raw bytes), nothing pickled
    raw = (exported / "model.safetensors").read_bytes()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    assert header["__metadata__"] == {"format": "opformer-model", "format_version": "1"}
    original = load_checkpoint(run / "best.pt")
    assert set(load_file(exported / "model.safetensors")) == set(original["state_dict"])
    assert "input_normalizer.std" in header and "target_normalizer.mean" in header
    config = json.loads((exported / "config.json").read_text())
    assert config["format_version"] == FORMAT_VERSION and config["spec"] == original["spec"]
    assert config["data"]["pde"] == {"name": "toy darcy"} and config["data"]["samples"] == 12
    assert config["weights_sha256"] == hashlib.sha256(raw).hexdigest()
    card = (exported / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: opformer\n") and "opformer 0.1.0" in card
    assert "- PDE: name = toy darcy" in card and "| resolution |" in card and "## Training" in card
    capsys.readouterr()

    assert main(["import", "opformer", str(exported), "--out", str(imported)]) == 0
    assert "galerkin_transformer_2d, 8,209 parameters" in capsys.readouterr().out
    assert torch.equal(predictions(imported, data), predictions(run, data))
    copy = load_checkpoint(imported / "best.pt")
    for key, value in original["state_dict"].items():
        assert torch.equal(copy["state_dict"][key], value), key
    assert copy["run_config"] == original["run_config"] and copy["history"] == original["history"]
    assert Run(imported).config == Run(run).config
    sessions = json.loads((imported / "run.json").read_text())["sessions"]
    assert sessions[0]["command"] == json.loads((run / "run.json").read_text())["sessions"][0]["command"]
    assert sessions[-1]["imported"]["source"] == str(exported.absolute())
    assert (imported / "metrics.csv").read_text() == (run / "metrics.csv").read_text()
    # evaluate and predict give the original's numbers
    assert main(["evaluate", str(imported), "--json", str(tmp_path / "again.json")]) == 0
    assert json.loads((tmp_path / "again.json").read_text())["results"] == json.loads(evaluated.read_text())["results"]
    for which in (run, imported):
        assert main(["predict", str(which), "--input", str(data), "--output", str(tmp_path / f"{which.name}.h5")]) == 0
    with h5py.File(tmp_path / "run.h5") as a, h5py.File(tmp_path / "imported.h5") as b:
        assert np.array_equal(a["target"][()], b["target"][()])
    # an imported run is not resumed (that would train over the imported weights)
    capsys.readouterr()
    assert main(["train", "--resume", str(imported)]) == 2
    assert "holds imported opformer weights, not a training run" in capsys.readouterr().err


def test_the_committed_version_1_repository_still_loads(tmp_path):
    out, repository = import_repository(FIXTURES / "exports" / "v1", tmp_path / "v1")
    assert repository.config["format_version"] == 1
    io = load_file(FIXTURES / "exports" / "v1_io.safetensors")
    surrogate, _ = Run(out).model("best")
    with torch.no_grad():
        torch.testing.assert_close(surrogate(io["input"]), io["output"], rtol=1e-6, atol=1e-7)


def write_config(folder, edit):
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))


def repository_copy(tmp_path, name="copy"):
    folder = tmp_path / name
    folder.mkdir(parents=True)
    for path in (FIXTURES / "exports" / "v1").iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    return folder


def refused(capsys, source, *words):
    out = Path(source).parent / "out"
    one_line_error(capsys, ["import", "opformer", str(source), "--out", str(out)], *words)
    assert not out.exists()


def test_bad_repositories_are_refused_in_one_line(tmp_path, capsys):
    newer = repository_copy(tmp_path / "a")
    write_config(newer, lambda c: c.update(format_version=FORMAT_VERSION + 1))
    refused(capsys, newer, f"format version {FORMAT_VERSION + 1} is newer than this opformer reads (up to "
                           f"{FORMAT_VERSION}); upgrade opformer")
    foreign = repository_copy(tmp_path / "b")
    write_config(foreign, lambda c: c.update(format="something-else"))
    refused(capsys, foreign, "not an opformer model repository's config")
    one_line_error(capsys, ["import", "opformer", str(foreign), "--out", str(tmp_path / "m"), "--modes", "4"],
                   "--modes: only used with format dpot")  # an option the format does not use
    assert not (tmp_path / "m").exists()
    flipped = repository_copy(tmp_path / "c")
    raw = bytearray((flipped / "model.safetensors").read_bytes())
    raw[-5] ^= 1
    (flipped / "model.safetensors").write_bytes(bytes(raw))
    refused(capsys, flipped, "model.safetensors: corrupt or replaced")
    unfit = repository_copy(tmp_path / "d")  # consistent files, but a tensor the model does not have
    state = load_file(unfit / "model.safetensors")
    save_file({**state, "model.extra": torch.zeros(2)}, str(unfit / "model.safetensors"))
    sha = hashlib.sha256((unfit / "model.safetensors").read_bytes()).hexdigest()
    write_config(unfit, lambda c: c.update(weights_sha256=sha))
    refused(capsys, unfit, "weights do not fit the model config", "model.extra")
    missing = repository_copy(tmp_path / "e")
    (missing / "config.json").unlink()
    refused(capsys, missing, "no config.json (not a model repository written by opformer export)")
    refused(capsys, tmp_path / "absent", "no such folder")


def test_export_refuses_a_folder_in_use_and_leaves_nothing_on_failure(trained, tmp_path, capsys):
    run, _ = trained
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert main(["export", str(run), str(tmp_path / "full")]) == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]
    assert main(["export", str(tmp_path / "norun"), str(tmp_path / "x")]) == 2
    assert "no such run directory" in capsys.readouterr().err
    (tmp_path / "eval.json").write_text("[1, 2]")
    assert main(["export", str(run), str(tmp_path / "x"), "--metrics", str(tmp_path / "eval.json")]) == 2
    assert "expected the JSON file of opformer evaluate --json" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_repository_on_the_hub_is_imported_from_the_cache(offline_cache, tmp_path):  # noqa: F811
    """The same round trip through huggingface_hub's cache: both files at one commit, the commit recorded."""
    for path in (FIXTURES / "exports" / "v1").iterdir():
        cache_file(offline_cache, "someone/darcy-gt", path.name, path.read_bytes())
    out, repository = import_repository("hf://someone/darcy-gt", tmp_path / "from_hub")
    local, _ = import_repository(FIXTURES / "exports" / "v1", tmp_path / "local")
    assert repository.commit == COMMIT and repository.source == f"hf://someone/darcy-gt@{COMMIT}"
    a, b = load_checkpoint(out / "best.pt"), load_checkpoint(local / "best.pt")
    assert all(torch.equal(a["state_dict"][k], v) for k, v in b["state_dict"].items())
    record = json.loads((out / "run.json").read_text())["sessions"][-1]["imported"]
    assert record["revision"] == COMMIT and record["sha256"] == hashlib.sha256(
        (FIXTURES / "exports" / "v1" / "model.safetensors").read_bytes()).hexdigest()
    with pytest.raises(CheckpointError, match="revision 'v2' of hf://someone/darcy-gt is not in the cache"):
        import_repository("hf://someone/darcy-gt@v2", tmp_path / "v2")
    # a repository of a newer format is refused on its config.json alone: its weights are never fetched
    config = json.loads((FIXTURES / "exports" / "v1" / "config.json").read_text())
    config["format_version"] = FORMAT_VERSION + 1
    cache_file(offline_cache, "someone/newer", "config.json", json.dumps(config).encode())
    with pytest.raises(CheckpointError, match="is newer than this opformer reads"):
        import_repository("hf://someone/newer", tmp_path / "newer")


def test_fine_tuning_init_takes_an_exported_and_imported_dpot(tmp_path):
    """An imported DPOT, exported and imported again, initialises a fine-tuned model exactly as the first did."""
    first = import_run("dpot", FIXTURES / "imports" / "dpot_tiny.pth", tmp_path / "first")[0]
    export_run(first, tmp_path / "shared")
    second, _ = import_repository(tmp_path / "shared", tmp_path / "second")
    assert Run(second).config.imported.format == "dpot"  # still known as the DPOT authors' weights
    config = {k: v for k, v in Run(first).config.model.items()}
    models = []
    for run in (first, second):
        torch.manual_seed(0)
        model = build_model(config)
        note = initialize(model, InitConfig(checkpoint=str(run), components=["embed", "pos", "blocks", "head"]))
        assert "dpot weights imported from" in note
        models.append(model.state_dict())
    assert all(torch.equal(models[0][k], models[1][k]) for k in models[0])
    assert config_to_dict(Run(second).config) == config_to_dict(Run(first).config)


def test_tensors_sharing_memory_are_written_as_copies(tmp_path):
    """safetensors refuses tensors that share memory (tied weights, views): each is written on its own."""
    from opformer.imports.export import _unshared

    base = torch.arange(6.0)
    state = {"a": base, "tied": base, "view": base[2:4], "t": torch.ones(2, 3).t()}
    save_file(_unshared(state), str(tmp_path / "w.safetensors"))
    loaded = load_file(tmp_path / "w.safetensors")
    assert all(torch.equal(loaded[k], v) for k, v in state.items())
