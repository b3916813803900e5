"""One benchmark cell (model x implementation x resolution), run in a fresh child process.

``python -m opformer.bench.cell '<json spec>'`` prints one JSON line with the measurements; the
parent (:mod:`opformer.bench.sweep`) starts one such process per cell so that the peak resident set of a
cell is its own. The spec holds ``preset, implementation, resolution, batch, mode, repeats, warmup,
threads, device``. Besides the peak resident set (``peak_memory_bytes``, which depends on the C allocator),
``peak_tensor_bytes`` is the most tensor memory alive at once: on CUDA ``max_memory_allocated``, on the CPU the
weights, buffers, input, target and optimizer state plus the peak of what one more step allocates
(:mod:`opformer.bench.memory`), measured after the peak resident set was read (profiling grows it).
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from opformer.bench.flops import count_flops, product_share
from opformer.bench.memory import TensorMemoryTracker
from opformer.bench.peers import OPFORMER, PEER_OF_PRESET, Peer, PeerUnavailable, build_peer
from opformer.config import OptimConfig
from opformer.errors import ConfigError
from opformer.models.registry import PRESETS, build_model, preset
from opformer.runs import CONFIG, Run
from opformer.runtime import autocast, grad_scaler, release_freed_memory, retain_freed_memory, set_matmul_precision
from opformer.train.optim import build_optimizer
from opformer.train.step import WARMUP_STEPS, TrainStep
from opformer.train.strategies import StepDraws


def input_shape(model: nn.Module, batch: int, resolution: int) -> tuple[int, ...]:
    """Channel-last input shape of an opformer model: ``(batch, *[n] * ndim, [t_in,] in_channels)``."""
    config = getattr(model, "config", {})
    shape = [batch] + [resolution] * int(getattr(model, "ndim", 1))
    if config.get("t_in") is not None:
        shape.append(int(config["t_in"]))
    shape.append(int(config.get("in_channels", 1)))
    return tuple(shape)


def parameter_count(model: nn.Module) -> int:
    """Trainable parameters, a complex entry counted twice (as opformer stores complex weights)."""
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in model.parameters() if p.requires_grad)


def model_config(name: str) -> dict[str, Any]:
    """The model config a bench row names: a preset of :data:`opformer.models.registry.PRESETS`, or a run
    directory (a trained or imported run: the model of its ``config.yaml``)."""
    if name in PRESETS:
        return preset(name)
    if (Path(name) / CONFIG).is_file():
        return dict(Run(name).config.model)
    raise ConfigError(f"--models: {name!r} is neither a preset nor a run directory; valid presets: "
                      f"{', '.join(sorted(PRESETS))}")


def _build(spec: dict[str, Any]) -> Peer:
    """The model of the cell and its call on a channel-last (or the peer's native layout) input."""
    if spec["implementation"] == OPFORMER:
        model = build_model(model_config(spec["preset"]))
        return Peer(model, model)
    implementation, attention_type = PEER_OF_PRESET[spec["preset"]]
    return build_peer(implementation, attention_type)


def peak_memory(device: torch.device) -> tuple[int, str]:
    """Peak memory of this process: CUDA ``max_memory_allocated`` or the CPU peak resident set."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda max_memory_allocated"
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is in KiB on Linux, bytes on macOS
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale), "peak RSS"


def make_step(peer: Peer, x: Tensor, target: Tensor, mode: str, own: bool, precision: str = "fp32",
              cuda_graphs: bool = False) -> tuple[Callable[[], None], torch.optim.Optimizer | None]:
    """One forward (inference) or training (forward + backward + Adam) step on fixed inputs, and its optimizer.

    An opformer model (``own``) is trained by the trainer's step (:class:`opformer.train.step.TrainStep`: the
    trainer's Adam, ``precision`` and, on CUDA, ``cuda_graphs``); a peer with ``torch.optim.Adam`` as its
    authors' scripts build it, under the same autocast ``precision``.
    """
    model = peer.model
    device = x.device
    if mode == "forward":
        model.eval()

        def forward_step() -> None:
            with torch.inference_mode(), autocast(precision, device):
                peer.forward(x)

        return forward_step, None
    model.train()
    if own:
        optimizer = build_optimizer(model.parameters(), OptimConfig(name="adam", lr=1e-4))
        runner = TrainStep(list(model.parameters()), optimizer, grad_scaler(precision, device), precision, None,
                           device, graphs=cuda_graphs, batch_size=x.shape[0], name=model.__class__.__name__)

        def loss_fn(batch: tuple[Tensor, ...], draws: StepDraws) -> Tensor:
            return (peer.forward(batch[0]) - batch[1]).float().square().mean()

        return lambda: runner(loss_fn, (x, target), StepDraws()), optimizer
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    scaler = grad_scaler(precision, device)

    def train_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast(precision, device):
            loss = (peer.forward(x) - target).float().square().mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return train_step, optimizer


def _prepared_step(peer: Peer, spec: dict[str, Any], device: torch.device
                   ) -> tuple[Callable[[], None], Callable[[], list[Tensor]]]:
    """The cell's step on a random input of the cell's shape and a random target of the output's shape, and a
    function listing the tensors that persist between steps besides the gradients (weights, buffers, input,
    target, optimizer state)."""
    peer.model.to(device)
    shape = input_shape(peer.model, spec["batch"], spec["resolution"]) if spec["implementation"] == OPFORMER \
        else (spec["batch"], spec["resolution"], 1)
    x = torch.randn(shape, device=device)
    if peer.channel_first:
        x = x.movedim(-1, 1).contiguous()
    with torch.no_grad():
        peer.model.eval()
        target = torch.randn_like(peer.forward(x))
    step, optimizer = make_step(peer, x, target, spec["mode"], own=spec["implementation"] == OPFORMER,
                                precision=spec.get("precision", "fp32"), cuda_graphs=spec.get("cuda_graphs", False))

    def persistent() -> list[Tensor]:
        state = [] if optimizer is None else [v for s in optimizer.state.values() for v in s.values()
                                              if isinstance(v, Tensor)]
        return [*peer.model.parameters(), *peer.model.buffers(), x, target, *state]

    return step, persistent


def storage_bytes(tensors: list[Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (a storage shared by views counted once)."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_cell(spec: dict[str, Any]) -> dict[str, Any]:
    """Measure one cell; returns the result fields (``status`` is "ok" or why it was not measured)."""
    torch.set_num_threads(int(spec["threads"]))
    retain_freed_memory()  # as the trainer does
    device = torch.device(spec["device"])
    torch.manual_seed(0)
    try:
        peer = _build(spec)
    except PeerUnavailable as exc:
        return {"status": f"peer unavailable: {exc}"}
    step, persistent = _prepared_step(peer, spec, device)
    set_matmul_precision(spec.get("matmul_precision", "highest"))
    # with CUDA graphs the step is captured after its eager warm-up steps: never in the timed steps
    for _ in range(max(spec["warmup"], WARMUP_STEPS + 1) if spec.get("cuda_graphs") else spec["warmup"]):
        step()
    times, cpu_times = [], []
    for _ in range(spec["repeats"]):
        _sync(device)
        start, cpu_start = time.perf_counter(), time.process_time()
        step()
        _sync(device)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    flops = count_flops(step)
    memory, memory_kind = peak_memory(device)  # before tracking: the profiler grows the resident set
    if device.type == "cuda":
        tensor_bytes = int(torch.cuda.max_memory_allocated(device))
    else:
        for p in peer.model.parameters():
            p.grad = None  # as the step's zero_grad does first: frees of untracked blocks are not seen
        resident = storage_bytes(persistent())
        release_freed_memory()  # the retained blocks go back: profiling grows the heap again
        with TensorMemoryTracker() as tracker:
            step()
        tensor_bytes = resident + tracker.peak_bytes
    # the products' share of the step (CPU only: on CUDA the profiler's CPU times are kernel launches)
    share = product_share(step) if device.type == "cpu" else None
    median = statistics.median(times)
    quartiles = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
    return {
        "status": "ok", "seconds_median": median, "seconds_q1": quartiles[0], "seconds_q3": quartiles[2],
        "seconds_min": min(times), "seconds_max": max(times), "cpu_seconds_median": statistics.median(cpu_times),
        "samples_per_second": spec["batch"] / median,
        "peak_memory_bytes": memory, "memory_kind": memory_kind, "peak_tensor_bytes": tensor_bytes,
        "flops_per_step": flops,
        "flop_rate": flops / median, "product_share": share,
        "product_seconds": None if share is None else share * median,
        "parameters": parameter_count(peer.model),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the cell given as a JSON argument and print its result as one JSON line."""
    spec = json.loads((sys.argv[1:] if argv is None else argv)[0])
    print(json.dumps(run_cell(spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
