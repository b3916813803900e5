"""Bad configs through the CLI: `opformer train BAD --out R` exits 2 with one line naming the file, key or value
and what was expected, and creates nothing (issue 27: values out of range, broken config files)."""

import pytest
import yaml

from opformer.cli import main


def train_error(capsys, tmp_path, config, *sets) -> str:
    """The one stderr line of a refused `opformer train` (exit 2, nothing created)."""
    argv = ["train", str(config), "--out", str(tmp_path / "R")]
    for item in sets:
        argv += ["--set", item]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert not (tmp_path / "R").exists()
    prefix = "opformer train: error: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix):]


@pytest.fixture
def good(tmp_path, toy_file, tiny_config):
    """A valid tiny config file (one epoch on the toy data)."""
    path = tmp_path / "good.yaml"
    path.write_text(yaml.safe_dump(tiny_config(toy_file, epochs=1)))
    return path


@pytest.mark.parametrize(("item", "message"), [
    ("train.epochs=0", "train.epochs: expected an integer >= 1, got 0"),
    ("train.batch_size=-4", "train.batch_size: expected an integer >= 1, got -4"),
    ("train.eval_batch_size=0", "train.eval_batch_size: expected an integer >= 1, got 0"),
    ("data.n_val=0", "data.n_val: expected an integer >= 1, got 0"),
    ("optim.lr=.nan", "optim.lr: expected a number > 0, got nan"),
    ("optim.betas=[0.9, 1.0]", "optim.betas[1]: expected a number in [0, 1), got 1.0"),
    ("optim.weight_decay=-0.1", "optim.weight_decay: expected a number >= 0, got -0.1"),
    ("schedule.pct_start=1", "schedule.pct_start: expected a number in (0, 1), got 1"),
    ("schedule.div_factor=0", "schedule.div_factor: expected a number > 0, got 0"),
    ("train.grad_clip=-1", "train.grad_clip: expected a number > 0 or null, got -1"),
    ("model.dropout=1.0", "model.dropout: expected a number in [0, 1), got 1.0"),
    ("model.d_model=0", "model.d_model: expected an integer >= 1, got 0"),
    ("model.decoder_modes=-2", "model.decoder_modes: expected an integer >= 1, got -2"),
    ("model.n_head=1.5", "model.n_head: expected int, got 1.5"),
    ("model.length=0", "model.length: expected a number > 0, got 0"),
    ("model.xavier_gain=-1", "model.xavier_gain: expected a number >= 0, got -1"),
    ("loss.gamma=-0.1", "loss.gamma: expected a number >= 0, got -0.1"),
    ("train.num_threads=0", "train.num_threads: expected an integer >= 1 or null, got 0"),
])
def test_values_out_of_range(capsys, tmp_path, good, item, message):
    assert train_error(capsys, tmp_path, good, item) == f"{good}: {message}"


@pytest.mark.parametrize(("content", "message"), [
    (bytes(range(256)), "not a YAML text file (binary content)"),
    (b"train:\x00 {}\n", "not a YAML text file (binary content)"),
    (b"", "empty config file; expected sections such as model, data, train"),
    (b"# only a comment\n", "empty config file; expected sections such as model, data, train"),
    (b"seed: 1\ntrain:\n  epochs: 1\n  epochs: 2\n", "duplicate key 'epochs' at line 4"),
    (b"seed: 1\nseed: 2\n", "duplicate key 'seed' at line 2"),
    (b"- 1\n- 2\n", "expected a mapping of sections (model, data, train, ...), got a list"),
    (b"42\n", "expected a mapping of sections (model, data, train, ...), got a number"),
    (b"just words\n", "expected a mapping of sections (model, data, train, ...), got a string"),
    (b"train: {epochs: [1\n", "not valid YAML at line 2 (expected ',' or ']', but got '<stream end>')"),
    (b"seed: 1\n---\nseed: 2\n", "not valid YAML at line 2 (expected a single document in the stream, but found "
                                 "another document)"),
])
def test_broken_config_files(capsys, tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    assert train_error(capsys, tmp_path, path, "train.epochs=1") == f"{path}: {message}"


def test_a_directory_or_a_missing_file(capsys, tmp_path):
    folder, missing = tmp_path / "configs", tmp_path / "no.yaml"
    folder.mkdir()
    assert train_error(capsys, tmp_path, folder) == f"{folder}: is a directory, not a config file"
    assert train_error(capsys, tmp_path, missing) == f"{missing}: no such config file"


@pytest.mark.parametrize(("item", "message"), [
    ("train.epochs=[1", "not valid YAML at line 1 (expected ',' or ']', but got '<stream end>')"),
    ("seed=!!python/name:os.system", "not valid YAML at line 1 (could not determine a constructor for the tag "
                                     "'tag:yaml.org,2002:python/name:os.system')"),
    ("optim.betas={a: 1, a: 2}", "duplicate key 'a' at line 1"),
])
def test_broken_set_values(capsys, tmp_path, good, item, message):
    assert train_error(capsys, tmp_path, good, item) == f"--set {item!r}: {message}"


def test_one_step_warm_up_of_onecycle_trains(capsys, tmp_path, good):
    # 1 epoch of 5 steps with pct_start 0.2: PyTorch's OneCycleLR alone raises ZeroDivisionError
    sets = ["data.n_train=5", "train.batch_size=1", "schedule.pct_start=0.2"]
    assert main(["train", str(good), "--out", str(tmp_path / "R"), *[a for s in sets for a in ("--set", s)]]) == 0
    assert (tmp_path / "R" / "best.pt").is_file()
