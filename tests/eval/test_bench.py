"""``opformer bench``: the command on tiny sizes, FLOP formulas, budgets and errors."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from opformer.cli import main
from opformer.eval.bench import BenchSettings, failure, predict_skip
from opformer.eval.bench_cell import run_cell
from opformer.eval.flops import count_flops
from opformer.eval.memory import TensorMemoryTracker, peak_of_changes
from opformer.nn.attention import SimpleAttention

CELL_FIELDS = {"model", "implementation", "resolution", "batch", "mode", "status", "seconds_median", "seconds_q1",
               "seconds_q3", "seconds_min", "seconds_max", "samples_per_second", "peak_memory_bytes",
               "memory_kind", "peak_tensor_bytes", "flops_per_step", "flop_rate", "peak_fraction", "parameters"}
TINY = ["--batch", "1", "--repeats", "2", "--warmup", "0", "--threads", "1"]


def one_line_error(capsys, argv, *needles):
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_bench_writes_json_markdown_and_plot_with_every_field(tmp_path, capsys):
    out = tmp_path / "b"
    code = main(["bench", "--models", "gt_burgers", "--resolutions", "16,32", *TINY, "--json", f"{out}.json",
                 "--markdown", f"{out}.md", "--plot", f"{out}.png"])
    assert code == 0
    report = json.loads((tmp_path / "b.json").read_text())
    assert report["machine"]["matmul_peak_flops"] > 1e8
    cells = report["cells"]
    assert [c["resolution"] for c in cells] == [16, 32]
    for cell in cells:
        assert cell["status"] == "ok", cell
        assert CELL_FIELDS <= set(cell), CELL_FIELDS - set(cell)
        assert cell["parameters"] == 530_305
        assert cell["seconds_min"] <= cell["seconds_median"] <= cell["seconds_max"]
        assert cell["flops_per_step"] > 0 and 0 < cell["peak_fraction"] < 1
    assert cells[1]["flops_per_step"] > cells[0]["flops_per_step"]
    assert set(report["slopes"]["gt_burgers/opformer"]) == {"time", "memory"}
    assert "| gt_burgers | opformer | 32 |" in (tmp_path / "b.md").read_text()
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
    assert not list(tmp_path.glob(".*.tmp"))  # written via temporary names and renamed


def test_tensor_memory_tracker_counts_live_bytes_at_the_peak():
    before = torch.ones(10_000)  # allocated before tracking: its free is not counted
    with TensorMemoryTracker() as tracker:
        a = torch.empty(1000, 1000)  # 4e6 bytes
        b = torch.empty(250, 1000)  # 1e6
        del a, before
        c = torch.empty(500, 1000)  # 2e6: the total falls to 1e6, rises to 3e6
    del b, c
    assert tracker.peak_bytes == 5_000_000
    assert peak_of_changes([(3, -5), (1, 4), (2, 3), (4, 1)]) == 7
    assert peak_of_changes([]) == 0


def test_cell_tensor_peak_counts_the_weights_and_adam_state():
    spec = {"preset": "gt_burgers", "implementation": "opformer", "resolution": 16, "batch": 1, "mode": "forward",
            "repeats": 1, "warmup": 0, "threads": 1, "device": "cpu"}
    forward, train = run_cell(spec), run_cell({**spec, "mode": "train"})
    weights = 4 * forward["parameters"]
    # the weights (allocated before tracking) under both; training adds gradients and Adam's two moments
    assert weights < forward["peak_tensor_bytes"] < 2 * weights
    assert 4 * weights < train["peak_tensor_bytes"] < 4 * weights + forward["peak_tensor_bytes"]
    assert train["peak_tensor_bytes"] < train["peak_memory_bytes"]


def test_linear_layer_flops_match_formula():
    b, n, c_in, c_out = 3, 17, 5, 7
    layer = nn.Linear(c_in, c_out)
    x = torch.randn(b, n, c_in, requires_grad=True)
    assert count_flops(lambda: layer(x)) == 2 * b * n * c_in * c_out
    # backward: the input and the weight gradients, one product each
    assert count_flops(lambda: layer(x).sum().backward()) == 3 * 2 * b * n * c_in * c_out


@pytest.mark.parametrize("n_head", [1, 2])
def test_galerkin_attention_flops_match_formula(n_head):
    b, n, d, p = 2, 50, 8, 1
    dh, e = d // n_head, d // n_head + p
    attn = SimpleAttention(d, n_head, "galerkin", pos_dim=p)
    x, pos = torch.randn(b, n, d), torch.rand(n, p)
    counted = count_flops(lambda: attn(x, pos))
    # K, V projections; the blocks K^T V (per head), pos^T V, K^T pos, pos^T pos of [pos, K]^T [pos, V];
    # M = A W_o^T per head; G = W_q^T M_q; c = b_q M_q + b_o; out = x G + c and + pos P
    formula = (2 * 2 * b * n * d * d + 2 * b * n_head * n * dh * dh + 2 * b * p * n * d + 2 * b * d * n * p
               + 2 * p * n * p + 2 * b * n_head * e * e * d + 2 * b * d * d * d + 2 * b * d * d
               + 2 * b * n * d * d + 2 * b * n * p * d)
    assert counted == formula
    # the textbook order Q'(K'^T V') on [pos, .] per head, then the output map, costs more per token
    textbook = 3 * 2 * b * n * d * d + 2 * 2 * b * n * n_head * e * e + 2 * b * n * n_head * e * d
    assert counted < textbook
    # and grows linearly in n: no N x N product
    counts = [count_flops(lambda: attn(torch.randn(b, k * n, d), torch.rand(k * n, p))) for k in (1, 2, 3)]
    assert counts[2] - counts[1] == counts[1] - counts[0]


def test_cell_over_the_time_budget_is_stopped_and_marked(tmp_path, capsys):
    code = main(["bench", "--models", "gt_burgers", "--resolutions", "16", *TINY, "--time-budget", "0.2",
                 "--json", str(tmp_path / "b.json")])
    assert code == 0
    (cell,) = json.loads((tmp_path / "b.json").read_text())["cells"]
    assert cell["status"].startswith("skipped: time budget")


def test_predicted_budget_overrun_is_skipped_before_running():
    settings = BenchSettings(models=["gt_burgers", "ft_burgers"], resolutions=[8, 64], repeats=4, warmup=1,
                             time_budget=100.0, memory_budget=2.0**30)
    done = [{"status": "ok", "resolution": 8, "seconds_median": 1.0, "peak_memory_bytes": 2.0**20}]
    assert predict_skip(done, "gt_burgers", 16, settings) is None  # 2 s x 6 steps
    assert predict_skip(done, "gt_burgers", 160, settings) == "skipped: time budget (predicted)"
    assert predict_skip(done, "ft_burgers", 64, settings) == "skipped: time budget (predicted)"  # quadratic
    big = [{**done[0], "seconds_median": 1e-3, "peak_memory_bytes": 2.0**29}]
    assert predict_skip(big, "gt_burgers", 32, settings) == "skipped: memory budget (predicted)"


def test_failed_cell_status_names_the_signal_or_the_error():
    profiler_line = "USDT:2026-11-23 21:02:19 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start"
    assert failure(-signal.SIGKILL, profiler_line) == "failed: killed by SIGKILL (out of memory?)"
    assert failure(-signal.SIGSEGV, "") == "failed: killed by SIGSEGV"
    assert failure(1, f"Traceback\nValueError: bad shape\n{profiler_line}\n") == "failed: ValueError: bad shape"
    assert failure(3, "") == "failed: exit code 3"


def test_missing_peer_package_marks_its_rows(monkeypatch):
    monkeypatch.setitem(sys.modules, "galerkin_transformer.model", None)  # import fails
    spec = {"preset": "gt_burgers", "implementation": "galerkin-transformer", "resolution": 16, "batch": 1,
            "mode": "forward", "repeats": 1, "warmup": 0, "threads": 1, "device": "cpu"}
    result = run_cell(spec)
    assert result["status"].startswith("peer unavailable: cannot import galerkin_transformer")


def test_bad_input_gives_one_line_errors(capsys, tmp_path):
    one_line_error(capsys, ["bench", "--models", "gt_burgers,nope"], "--models", "nope", "gt_burgers")
    one_line_error(capsys, ["bench", "--resolutions", "512,0"], "--resolutions")
    one_line_error(capsys, ["bench", "--resolutions", "5x"], "--resolutions")
    one_line_error(capsys, ["bench", "--batch", "0"], "--batch")
    one_line_error(capsys, ["bench", "--json", str(tmp_path / "missing" / "b.json")], "--json", "cannot write")
    one_line_error(capsys, ["bench", "--plot", str(tmp_path)], "--plot")
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    assert "example:\n  opformer bench" in capsys.readouterr().out


def _cells(pid: int) -> list[int]:
    """The bench_cell processes among ``pid``'s children (not a short-lived helper such as ``uname``)."""
    cells = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            if b"bench_cell" in Path(f"/proc/{child}/cmdline").read_bytes():
                cells.append(int(child))
        except OSError:
            pass
    return cells


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc")
@pytest.mark.parametrize("attempt", range(3))
def test_terminated_bench_stops_its_cell_process(tmp_path, attempt):
    """SIGTERM to ``opformer bench`` exits 143 and leaves no orphaned cell process behind, also when it arrives
    the moment the cell has started (while the bench is still inside ``Popen()``: 8 of 12 were orphaned so)."""
    bench = subprocess.Popen([sys.executable, "-m", "opformer.cli", "bench", "--models", "gt_burgers",
                              "--resolutions", "64", "--batch", "1", "--repeats", "100000", "--threads", "1",
                              "--time-budget", "600"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not _cells(bench.pid) and time.monotonic() < deadline:
        pass  # no sleep: signal as soon as the cell exists
    (cell,) = _cells(bench.pid)
    bench.send_signal(signal.SIGTERM)
    assert bench.wait(timeout=30) == 143
    assert "interrupted" in bench.stderr.read()
    assert not Path(f"/proc/{cell}").exists()
