"""``opformer export RUN DIR --format onnx``: a run's surrogate as an ONNX graph that runs in onnxruntime on a CPU.

The graph is the whole :class:`~opformer.models.surrogate.Surrogate`: the normalizers are baked in, so it takes
and gives physical values, channel-last, ``x`` ``(batch, *grid, [t_in,] channels)`` to ``y``. The batch axis is
dynamic; the grid is the run's (the spectral layers' DFT bases are constants of the graph). A mesh run's graph
takes a padded batch, ``x`` ``(batch, points, channels)``, ``pos`` ``(batch, points, d)``, ``weights``
``(batch, points)`` (summing to 1 over each sample's points, 0 on padding) and ``mask`` ``(batch, points)``
(bool), its point count dynamic too. The spectral layers are traced in their
truncated DFT matrix form (:mod:`opformer.nn.dft`), which ONNX holds as plain matrix products. The graph's
metadata (``metadata_props``) records the channels, grid, ``t_in``/``t_out``, the model and opformer's version.

Every export is checked before it is kept: onnxruntime runs the graph at two batch sizes and its output is
compared with torch's; a graph that cannot be built, loaded or run, or that differs, is refused in one line naming
the model, the operator and what to install.
"""

from __future__ import annotations

import json
import logging
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import Tensor, nn

from opformer import __version__
from opformer.errors import ConfigError
from opformer.extras import require
from opformer.io import atomic_replace
from opformer.models.mesh_surrogate import MESH_LAYOUT
from opformer.models.surrogate import Surrogate

GRAPH = "model.onnx"
INPUT, OUTPUT = "x", "y"
#: a mesh graph's inputs, as the mesh models take them (:mod:`opformer.models.mesh_batch`)
MESH_INPUTS = (INPUT, "pos", "weights", "mask")
#: the largest relative L2 distance between onnxruntime's and torch's outputs (float32) an export keeps
TOLERANCE = 1e-4
INSTALL = "pip install 'opformer[onnx]' (onnx, onnxscript, onnxruntime)"


def onnx_modules() -> tuple[ModuleType, ModuleType]:
    """The ``onnx`` and ``onnxruntime`` packages (a one-line error naming the extra where one is missing)."""
    onnx, onnxruntime = require("onnx", "onnx", "--format onnx"), require("onnxruntime", "onnx", "--format onnx")
    require("onnxscript", "onnx", "--format onnx")  # torch's exporter needs it
    return onnx, onnxruntime


def input_shape(surrogate: Surrogate, batch: int) -> tuple[int, ...]:
    """The shape of the surrogate's input: ``(batch, *grid, [t_in,] input channels)`` (a time model on operator
    data sees one frame without a time axis)."""
    data = surrogate.spec["data"]
    time = [int(data["t_in"])] if "t_in" in data else []
    return (batch, *map(int, data["stored_shape"]), *time, len(data["input_channels"]))


def on_mesh(surrogate: Surrogate) -> bool:
    """Whether the surrogate was trained on mesh data (its graph takes a padded batch of points)."""
    return surrogate.spec["data"].get("layout") == MESH_LAYOUT


def input_shapes(surrogate: Surrogate) -> dict[str, list[int | str]]:
    """Each graph input's shape, its dynamic axes named (``batch``, ``points``)."""
    if not on_mesh(surrogate):
        return {INPUT: ["batch", *input_shape(surrogate, 1)[1:]]}
    data = surrogate.spec["data"]
    return {INPUT: ["batch", "points", len(data["input_channels"])], "pos": ["batch", "points", data["space_dim"]],
            "weights": ["batch", "points"], "mask": ["batch", "points"]}


def example_inputs(surrogate: Surrogate, batch: int, generator: torch.Generator) -> dict[str, Tensor]:
    """Inputs in physical units around the training data's statistics; on a mesh, ``batch`` samples of
    ``3 batch + 1`` points, the last sample padded after its first half (zero weight, mask False)."""
    if not on_mesh(surrogate):
        return {INPUT: surrogate.input_normalizer.decode(torch.randn(input_shape(surrogate, batch),
                                                                     generator=generator))}
    points = 3 * batch + 1
    shapes = {name: [batch if axis == "batch" else points if axis == "points" else axis for axis in shape]
              for name, shape in input_shapes(surrogate).items()}
    mask = torch.ones(batch, points, dtype=torch.bool)
    mask[-1, points // 2:] = False
    weights = torch.rand(shapes["weights"], generator=generator) * mask
    return {INPUT: surrogate.input_normalizer.decode(torch.randn(shapes[INPUT], generator=generator)),
            "pos": torch.rand(shapes["pos"], generator=generator),
            "weights": weights / weights.sum(1, keepdim=True), "mask": mask}


def dynamic_shapes(surrogate: Surrogate) -> dict[str, dict[int, Any]]:
    """The graph's dynamic axes: the batch, and on a mesh the point count."""
    dims = {"batch": torch.export.Dim("batch"), "points": torch.export.Dim("points", min=2)}
    return {name: {axis: dims[size] for axis, size in enumerate(shape) if size in dims}
            for name, shape in input_shapes(surrogate).items()}


def graph_metadata(surrogate: Surrogate) -> dict[str, str]:
    """The ``metadata_props`` of the graph: strings (lists and numbers as JSON)."""
    data = surrogate.spec["data"]
    recorded = {
        "opformer_version": __version__, "model": surrogate.spec["model"]["name"],
        "input_channels": data["input_channels"], "target_channels": data["target_channels"],
        "grid": data.get("stored_shape"), "grid_kinds": data.get("grid", data.get("periodic")),
        "lengths": data.get("lengths"), "t_in": data.get("t_in"), "t_out": data.get("t_out"),
        "input_shape": input_shapes(surrogate)[INPUT], "inputs": input_shapes(surrogate),
        "layout": "channel-last, physical units (normalizers inside)",
    }
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in recorded.items()}


def _operator(message: str) -> str:
    """The operator an exporter's or runtime's error names (``aten.slice_scatter``, ``DFT``), else ``unknown``."""
    for pattern in (r"target=torch\.ops\.(aten\.[A-Za-z0-9_]+)", r"(aten[.:]{1,2}[A-Za-z0-9_]+)",
                    r"implementation for ([A-Za-z0-9_]+)\(\d+\)", r"In Node, \(\"[^\"]*\", ([A-Za-z0-9_]+)",
                    r"Op \(([A-Za-z0-9_]+)\)", r"for operator ([A-Za-z0-9_]+)"):
        found = re.search(pattern, message)
        if found:
            return found.group(1)
    return "unknown"


def _reason(exc: BaseException) -> str:
    """The first line of the innermost cause of ``exc``, without terminal colours, at most 120 characters."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines() if line.strip()]
    reason = lines[0] if lines else type(exc).__name__
    return reason if len(reason) <= 120 else reason[:117] + "..."


def _refusal(model: str, stage: str, exc: BaseException) -> ConfigError:
    """One line: the model, the stage, the operator, the reason and what to install."""
    text, inner = str(exc), exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
        text += "\n" + str(inner)
    return ConfigError(f"{model}: the ONNX graph cannot be {stage}: operator {_operator(text)} ({_reason(exc)}); "
                       f"install a newer torch, onnxscript and onnxruntime: {INSTALL}")


@contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """The exporter's loggers above errors only (their warnings and tracebacks become the one-line refusal)."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


class _Graph(nn.Module):
    """The surrogate as the graph's one function: physical ``x`` (and on a mesh the points, weights and mask) to
    physical ``y``."""

    def __init__(self, surrogate: Surrogate) -> None:
        super().__init__()
        self.surrogate = surrogate

    def forward(self, *inputs: Tensor) -> Tensor:
        return self.surrogate(*inputs)


def relative_l2(a: Tensor, b: Tensor) -> float:
    """``|a - b| / |b|`` over the whole batch, in float64."""
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


def write_graph(surrogate: Surrogate, path: Path, opset: int | None = None, seed: int = 0) -> float:
    """Export ``surrogate`` (CPU, float32, eval) as the ONNX graph ``path`` (written atomically) and check it in
    onnxruntime against torch at batch sizes 2 and 3; returns the larger relative L2 distance of the two.

    Raises a one-line :class:`ConfigError` where the graph cannot be exported, loaded or run, or differs from
    torch by more than :data:`TOLERANCE`; ``path`` is then left as it was.
    """
    onnx, onnxruntime = onnx_modules()
    surrogate = surrogate.to(device="cpu", dtype=torch.float32).eval()
    model = surrogate.spec["model"]["name"]
    generator = torch.Generator().manual_seed(seed)
    inputs = [example_inputs(surrogate, batch, generator) for batch in (2, 3)]
    names = list(inputs[0])
    quiet = _quiet("onnxscript", "torch.onnx", "torch.export", "torch._subclasses.fake_tensor")
    with torch.no_grad(), warnings.catch_warnings(), quiet:
        warnings.simplefilter("ignore")
        try:
            shapes = dynamic_shapes(surrogate)
            program = torch.onnx.export(_Graph(surrogate), tuple(inputs[0].values()), dynamo=True,
                                        input_names=names, output_names=[OUTPUT],
                                        dynamic_shapes=(tuple(shapes[name] for name in names),),  # *inputs
                                        opset_version=opset, verbose=False)
        except Exception as exc:  # the exporter raises many kinds; each becomes one line
            raise _refusal(model, "exported", exc) from None
        expected = [surrogate(*x.values()) for x in inputs]
    graph = program.model_proto
    for key, value in graph_metadata(surrogate).items():
        graph.metadata_props.add(key=key, value=value)
    with atomic_replace(path, size=graph.ByteSize()) as tmp:
        onnx.save(graph, str(tmp))
        try:
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3
            session = onnxruntime.InferenceSession(str(tmp), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise _refusal(model, "loaded by onnxruntime " + onnxruntime.__version__, exc) from None
        errors = []
        for x, y in zip(inputs, expected):
            try:
                (out,) = session.run([OUTPUT], {name: value.numpy() for name, value in x.items()})
            except Exception as exc:
                raise _refusal(model, "run by onnxruntime " + onnxruntime.__version__, exc) from None
            errors.append(relative_l2(torch.from_numpy(out), y))
        if not max(errors) <= TOLERANCE:
            raise ConfigError(f"{model}: onnxruntime's output differs from torch's by a relative L2 of "
                              f"{max(errors):.3g} (at most {TOLERANCE:g} kept); the graph is not written")
    return max(errors)
