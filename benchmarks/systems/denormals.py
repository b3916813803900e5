"""Training steps on the CPU with subnormal weights, flushed to zero (``train.flush_denormal``) or not.

Adam with L2 weight decay (the FNO code's recipe, ``configs/burgers/fno1d_fno_recipe.yaml``) pulls the FNO1d's
unused high-mode spectral weights toward zero until they fall below float32's smallest normal number (1.18e-38).
x86 processors compute with such subnormal operands far more slowly. This script loads a checkpoint (``--checkpoint``:
the weights and Adam state of a run of operator pairs whose inputs and targets share a grid, as the FNO1d's), counts
its subnormal floats, and times the same training step (forward, relative L2 loss, backward, the run's optimiser) on
a batch of random inputs of the run's shape, three ways:

- ``subnormal``: from the checkpoint, without flushing;
- ``flushed``: from the checkpoint, with ``torch.set_flush_denormal(True)`` (the trainer's default);
- ``initial``: from the run's initial weights (its seed) and a fresh optimiser, without flushing: the step's cost
  before training made any weight subnormal.

Each variant builds its model and optimiser anew; the rounds alternate the variants, each the median of
``--repeats`` steps after one warm-up. Run from the repository root::

    .venv/bin/python -m benchmarks.systems.denormals --checkpoint runs/burgers/fno1d_fno_recipe/last.pt

Writes benchmarks/results/systems/denormals.{json,md}.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import torch

from benchmarks.harness import argument_parser, page, table_head, table_row, write_results

VARIANTS = ("subnormal", "flushed", "initial")


#: the integer type of each float's bits, and the masks of its exponent and mantissa (IEEE 754)
BITS = {torch.float32: (torch.int32, 0x7F800000, 0x007FFFFF),
        torch.float64: (torch.int64, 0x7FF0000000000000, 0x000FFFFFFFFFFFFF)}


def subnormal(tensor: torch.Tensor) -> torch.Tensor:
    """Where ``tensor`` (float32 or float64, real or complex) holds subnormal numbers, as a mask of its real view:
    a zero exponent and a nonzero mantissa, read from the bits (a flushing processor reads the numbers as 0)."""
    real = torch.view_as_real(tensor) if tensor.is_complex() else tensor
    integer, exponent, mantissa = BITS[real.dtype]
    bits = real.view(integer)
    return ((bits & exponent) == 0) & ((bits & mantissa) != 0)


def state_tensors(payload: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The checkpoint's floating weights and Adam moments (its state but the step counts), by name."""
    found = {name: t for name, t in payload["state_dict"].items() if t.is_floating_point() or t.is_complex()}
    for index, state in payload["training_state"]["optimizer"]["state"].items():
        found.update({f"optimizer.{index}.{k}": t for k, t in state.items() if k != "step"})
    return found


def step_seconds(payload: dict[str, Any], variant: str, batch: int, repeats: int) -> float:
    """The median seconds of ``repeats`` training steps from the checkpoint under ``variant``."""
    from opformer.config import config_from_dict
    from opformer.models.surrogate import Surrogate
    from opformer.runs.checkpoint import surrogate_of
    from opformer.train.losses import relative_l2
    from opformer.train.optim import build_optimizer

    config = config_from_dict(payload["run_config"])
    if variant == "initial":
        torch.manual_seed(config.seed)  # as the trainer builds the model
        surrogate = Surrogate(payload["spec"]).train()
        optimizer = build_optimizer(surrogate.parameters(), config.optim)
    else:
        surrogate = surrogate_of(payload, "checkpoint").train()
        optimizer = build_optimizer(surrogate.parameters(), config.optim)
        optimizer.load_state_dict(payload["training_state"]["optimizer"])
    spec = surrogate.spec["data"]
    grid = (config.data.resolution,) * len(spec["periodic"])
    inputs = torch.randn(batch, *grid, len(spec["input_channels"]), generator=torch.Generator().manual_seed(0))
    targets = torch.randn(batch, *grid, len(spec["target_channels"]), generator=torch.Generator().manual_seed(1))
    torch.set_flush_denormal(variant == "flushed")
    try:
        seconds = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            optimizer.zero_grad()
            relative_l2(surrogate(inputs), targets).backward()
            optimizer.step()
            seconds.append(time.perf_counter() - start)
    finally:
        torch.set_flush_denormal(False)
    return statistics.median(seconds[1:])


def measure(checkpoint: str, rounds: int, repeats: int, batch: int | None) -> dict[str, Any]:
    """The checkpoint's subnormal counts and each variant's step time."""
    from opformer.runs.checkpoint import load_checkpoint

    payload = load_checkpoint(checkpoint)
    tensors = state_tensors(payload)
    counts = {name: int(subnormal(t).sum()) for name, t in tensors.items()}
    batch = batch or payload["run_config"]["train"]["batch_size"]
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for index in range(rounds):
        for variant in VARIANTS if index % 2 == 0 else VARIANTS[::-1]:
            times[variant].append(step_seconds(payload, variant, batch, repeats))
    seconds = {v: statistics.median(t) for v, t in times.items()}
    return {"checkpoint": checkpoint, "epoch": payload["epoch"] + 1, "batch": batch,
            "resolution": payload["run_config"]["data"]["resolution"], "rounds": rounds, "repeats": repeats,
            "subnormal": {name: c for name, c in counts.items() if c},
            "floats": sum((2 if t.is_complex() else 1) * t.numel() for t in tensors.values()),
            "seconds": seconds, "rounds_seconds": times,
            "slowdown": seconds["subnormal"] / seconds["flushed"],
            "flushed_over_initial": seconds["flushed"] / seconds["initial"]}


def markdown(result: dict[str, Any]) -> str:
    """The subnormal counts per tensor, then the three step times and their ratios."""
    total = sum(result["subnormal"].values())
    lines = ["# Training steps with subnormal weights, flushed or not (`train.flush_denormal`)", "",
             f"Checkpoint `{result['checkpoint']}` (after epoch {result['epoch']}): {total:,} of its "
             f"{result['floats']:,} floats (weights and Adam moments) are subnormal ({total / result['floats']:.1%}).",
             "",
             *table_head("tensor", "subnormal floats"),
             *(table_row(name, f"{count:,}") for name, count in result["subnormal"].items()), "",
             f"A training step at n = {result['resolution']}, batch {result['batch']}, one thread; the median over "
             f"{result['rounds']} alternating rounds of each round's median of {result['repeats']} steps:", "",
             *table_head("variant", "s/step", "over initial")]
    for variant in VARIANTS:
        seconds = result["seconds"][variant]
        lines.append(table_row(variant, f"{seconds:.4f}", f"{seconds / result['seconds']['initial']:.2f}"))
    return page(lines, f"Unflushed, the subnormal floats make the step {result['slowdown']:.1f}x slower than flushed; "
                       f"flushed, it takes {result['flushed_over_initial']:.2f}x the time of a step from the initial "
                       "weights.")


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--checkpoint", required=True, help="a run's last.pt (weights and optimiser state)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=None, help="default the run's batch size")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    write_results(args.results, "denormals", measure(args.checkpoint, args.rounds, args.repeats, args.batch), markdown,
                  load_before)


if __name__ == "__main__":
    main()
