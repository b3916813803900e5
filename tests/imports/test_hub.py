"""``hf://`` sources: imports through huggingface_hub's cache, laid out in tmp_path as huggingface_hub lays it out
(``models--OWNER--NAME/{blobs,refs,snapshots/<commit>/...}``). No test reaches the network: the cache is read
offline, and the Hub's answers for bad names are the exceptions huggingface_hub raises for them."""

import hashlib
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from huggingface_hub import constants, errors

from opformer.cli import main
from opformer.errors import ConfigError
from opformer.imports import hub
from opformer.runs import Run
from tests.cli.test_cli import one_line_error as single_line, run_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"


def cache_file(cache: Path, repo: str, filename: str, data: bytes, commit: str = COMMIT,
               refs: tuple[str, ...] = ("main",)) -> Path:
    """Put ``data`` into ``cache`` as huggingface_hub does: a blob named by its SHA-256, a symlink to it under
    snapshots/<commit>/, the commit under refs/<ref>."""
    storage = cache / f"models--{repo.replace('/', '--')}"
    blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    pointer = storage / "snapshots" / commit / filename
    pointer.parent.mkdir(parents=True, exist_ok=True)
    pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    for ref in refs:
        (storage / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (storage / "refs" / ref).write_text(commit)
    return pointer


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    """An empty cache in tmp_path that huggingface_hub uses offline (its constants: they are read at import)."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache


def test_sources_are_parsed_and_malformed_ones_named():
    assert hub.parse("hf://hzk17/DPOT/model_Ti.pth") == hub.HubSource("hzk17/DPOT", "main", "model_Ti.pth")
    assert hub.parse("hf://a/b@v1.0/sub/w.pt") == hub.HubSource("a/b", "v1.0", "sub/w.pt")
    assert hub.parse("hf://a/b", "dev") == hub.HubSource("a/b", "dev", "")
    assert hub.parse("hf://a/b@dev", "dev").revision == "dev"
    assert str(hub.HubSource("a/b", "main", "w.pt", COMMIT)) == f"hf://a/b@{COMMIT}/w.pt"
    for bad, match in [("hf://onlyowner", "expected hf://OWNER/NAME"), ("hf://a/", "expected hf://OWNER/NAME"),
                       ("hf://a b/c", "owner 'a b' is not a Hub name"), ("hf://a/c/../x", "'../x' is not a file path"),
                       ("hf://a/c//x", "'/x' is not a file path")]:
        with pytest.raises(ConfigError, match=match):
            hub.parse(bad)
    with pytest.raises(ConfigError, match="--revision v2: hf://a/b@v1 already names revision v1"):
        hub.parse("hf://a/b@v1", "v2")


def test_an_import_from_the_cache_records_the_commit_and_sha256(offline_cache, tmp_path, capsys):
    data = (FIXTURES / "dpot_tiny.pth").read_bytes()
    cache_file(offline_cache, "hzk17/DPOT", "model_Ti.pth", data, refs=("main", "v1"))
    out = tmp_path / "ti"
    assert main(["import", "dpot", "hf://hzk17/DPOT/model_Ti.pth", "--out", str(out)]) == 0
    assert "dpot2d (custom), 9,043 parameters" in capsys.readouterr().out
    imported = Run(out).config.imported
    assert (imported.source, imported.revision) == ("hf://hzk17/DPOT/model_Ti.pth", COMMIT)
    assert imported.sha256 == hashlib.sha256(data).hexdigest()
    record = json.loads((out / "run.json").read_text())["sessions"][-1]["imported"]
    assert record["revision"] == COMMIT and record["sha256"] == imported.sha256
    # a tag pinned with @ (or --revision): the same file, the commit it resolves to recorded
    assert main(["import", "dpot", "hf://hzk17/DPOT@v1/model_Ti.pth", "--out", str(tmp_path / "pinned")]) == 0
    assert Run(tmp_path / "pinned").config.imported.revision == COMMIT


def one_line_error(capsys, args, *words):
    """``opformer ARGS`` fails with one line (test_cli's check: exit 2, no traceback) holding every word."""
    single_line(*run_cli(capsys, *args)[::2], *words)


def test_offline_misses_name_what_the_cache_lacks(offline_cache, tmp_path, capsys):
    cache_file(offline_cache, "hzk17/DPOT", "model_Ti.pth", (FIXTURES / "dpot_tiny.pth").read_bytes())
    out = tmp_path / "x"
    base = ["import", "dpot", "--out", str(out)]
    one_line_error(capsys, base + ["hf://someone/absent/w.pth"], "no copy of hf://someone/absent in the cache",
                   "offline (HF_HUB_OFFLINE=1)")
    one_line_error(capsys, base + ["hf://hzk17/DPOT/model_Ti.pth", "--revision", "v9"],
                   "revision 'v9' of hf://hzk17/DPOT is not in the cache")
    one_line_error(capsys, base + [f"hf://hzk17/DPOT@{OTHER}/model_Ti.pth"], f"revision '{OTHER}'")
    one_line_error(capsys, base + ["hf://hzk17/DPOT/model_S.pth"],
                   "hf://hzk17/DPOT@main/model_S.pth is not in the cache")
    one_line_error(capsys, base + ["hf://hzk17/DPOT"], "name the weights file")
    one_line_error(capsys, base + [str(FIXTURES / "dpot_tiny.pth"), "--revision", "v1"],
                   "--revision: only used with hf:// sources")
    assert not out.exists()


def http_error(kind, message="404 Client Error"):
    response = SimpleNamespace(headers={}, request=None)
    return kind(message, response=response)


@pytest.mark.parametrize("raised,words", [
    (http_error(errors.RepositoryNotFoundError), ["hf://hzk17/DPOT: no such repository on the Hub"]),
    (http_error(errors.GatedRepoError), ["hf://hzk17/DPOT: a gated repository"]),
    (http_error(errors.RevisionNotFoundError), ["hf://hzk17/DPOT: no revision 'main'"]),
    (http_error(errors.RemoteEntryNotFoundError), ["hf://hzk17/DPOT@main: no file 'model_Ti.pth'"]),
    (errors.HFValidationError("Repo id must use alphanumeric chars\nmore"), ["Repo id must use alphanumeric chars"]),
    (http_error(errors.HfHubHTTPError, "503 Server Error\nretry later"), ["could not be fetched", "503 Server Error"]),
])
def test_the_hubs_errors_are_one_line_naming_the_source(monkeypatch, tmp_path, capsys, raised, words):
    """Online, huggingface_hub raises these for a bad repository, revision or file (no network: it is replaced)."""
    def fail(*args, **kwargs):
        raise raised

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.hf_hub_download", fail)
    one_line_error(capsys, ["import", "dpot", "hf://hzk17/DPOT/model_Ti.pth", "--out", str(tmp_path / "x")], *words)
    assert not (tmp_path / "x").exists()


def test_without_huggingface_hub_the_error_says_what_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails as if it were not installed
    one_line_error(capsys, ["import", "dpot", "hf://hzk17/DPOT/model_Ti.pth", "--out", str(tmp_path / "x")],
                   "pip install 'opformer[hub]'")


def test_a_local_import_never_imports_huggingface_hub(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    assert main(["import", "dpot", str(FIXTURES / "dpot_tiny.pth"), "--out", str(tmp_path / "x")]) == 0


@pytest.mark.slow
def test_the_environment_variables_reach_huggingface_hub(tmp_path):
    """A fresh process with HF_HUB_CACHE and HF_HUB_OFFLINE=1 set imports from that cache (nothing patched)."""
    import subprocess

    cache = tmp_path / "cache"
    for path in (FIXTURES.parent / "exports" / "v1").iterdir():
        cache_file(cache, "someone/darcy-gt", path.name, path.read_bytes())
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1",
               PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    done = subprocess.run([sys.executable, "-m", "opformer", "import", "opformer", "hf://someone/darcy-gt", "--out",
                           str(tmp_path / "run")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"hf://someone/darcy-gt@{COMMIT}" in done.stdout and (tmp_path / "run" / "best.pt").is_file()
