"""``FNO`` state dicts of neuraloperator 2.x (1D and 2D, dense weights) as opformer's ``fno1d`` / ``fno2d``.

The configurations are those opformer's FNO has, as ``opformer.bench.peers`` builds neuraloperator's: the lifting
a single 1x1 layer (``lifting_channel_ratio=0``), the grid positional embedding (``i / n`` per axis, appended after
the input channels: opformer's periodic coordinates), ``fno_skip="linear"``, no channel MLP, no normalization,
padding or factorisation, ReLU after every layer but the last, a two-layer projection. Per layer
neuraloperator's ``conv(x) + skip(x)`` (the spectral convolution's bias, the skip without one) is opformer's
``spectral(x) + Linear(x)``: the skip is the linear layer's weight, the convolution's bias its bias.

Modes: on the last (real-FFT) axis neuraloperator keeps ``n_modes[-1] // 2 + 1`` modes, opformer ``modes``; in 2D
its first axis keeps ``n_modes[0]`` frequencies centred on 0 (``-n/2 .. n/2 - 1`` for an even ``n``), stored
fft-shifted, which are opformer's two corner blocks ``0..m-1`` and ``-m..-1`` with ``n_modes[0] = 2m``. opformer's
FNO keeps the same ``m`` on both axes, so ``n_modes`` must be ``(2m, 2m - 2)`` or ``(2m, 2m - 1)``.

The file is ``torch.save(model.state_dict())``; neuraloperator puts its constructor arguments there as
``_metadata``, with the activation function and the convolution class among them. Those two globals are read as
inert placeholders (only their names are used; nothing is imported or called); any other global is refused. The
configuration is checked against ``_metadata`` where it is there, else inferred from the shapes (the activation
then taken to be ReLU).

Activation: without a channel MLP, neuraloperator 2.0's ``FNOBlocks`` applies the activation twice after every
layer but the last (once after ``conv + skip``, once more at the end of the block). For ReLU that is ReLU, so the
import is exact; for GELU (its default), SiLU or tanh it is another function than opformer's, and such a file is
refused in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from opformer.errors import CheckpointError
from opformer.imports.formats import Imported, data_signature
from opformer.imports.weights import Inert, Rule, map_state_dict, read_weights, require, tensor_dict
from opformer.models.registry import build_model

#: what ``_metadata`` must say (absent is the default, which is this)
FIXED: dict[str, tuple[Any, ...]] = {
    "lifting_channel_ratio": (0,), "use_channel_mlp": (False,), "fno_skip": ("linear",),
    "positional_embedding": ("grid",), "norm": (None,), "complex_data": (False,), "domain_padding": (None, 0, 0.0),
    "resolution_scaling_factor": (None,), "fno_block_precision": ("full",), "stabilizer": (None,),
    "factorization": (None, "dense", "Dense"), "separable": (False,), "preactivation": (False,),
    "max_n_modes": (None,),
}


def _inert(name: str) -> bool:
    """The globals of neuraloperator's ``_metadata``: its activation functions and module classes."""
    return name.startswith(("torch.nn.functional.", "torch.", "neuralop."))


def read_neuraloperator_weights(path: Path) -> tuple[dict[str, Tensor], dict[str, Any] | None]:
    """The tensors of a neuraloperator state dict and its ``_metadata`` (None if absent)."""
    payload = read_weights(path, inert=_inert)
    if not isinstance(payload, Mapping):
        raise CheckpointError(f"{path}: holds a {type(payload).__name__}; expected an FNO state dict")
    payload = dict(payload)
    metadata = payload.pop("_metadata", None)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise CheckpointError(f"{path}: _metadata is a {type(metadata).__name__}, expected a mapping")
    return tensor_dict(payload, path, "the state dict"), (None if metadata is None else dict(metadata))


def _check_activation(metadata: Mapping[str, Any] | None, where: str) -> None:
    """The activation ``_metadata`` names must be ReLU (see the module docstring); absent, ReLU is assumed."""
    value = (metadata or {}).get("non_linearity", "relu")
    name = value.name if isinstance(value, type) and issubclass(value, Inert) else getattr(value, "__name__", value)
    if str(name).rsplit(".", 1)[-1] != "relu":
        raise CheckpointError(f"{where}: _metadata non_linearity is {name}; only ReLU imports exactly (neuraloperator "
                              "2.0 applies the activation twice per layer, which is the same function for ReLU only)")


def infer_config(state: Mapping[str, Tensor], metadata: Mapping[str, Any] | None,
                 where: str) -> tuple[dict[str, Any], list[str]]:
    """opformer's FNO config of a neuraloperator state dict (and its ``_metadata``), and notes."""
    for key, values in FIXED.items():
        if metadata and key in metadata and metadata[key] not in values:
            raise CheckpointError(f"{where}: _metadata {key} is {metadata[key]!r}; opformer's FNO has "
                                  f"{' or '.join(repr(v) for v in values)}")
    if metadata and metadata.get("_name", "FNO") != "FNO":
        raise CheckpointError(f"{where}: _metadata names a {metadata['_name']}, not an FNO")
    _check_activation(metadata, where)
    weight = require(state, "fno_blocks.convs.0.weight.tensor", (3, 4), where)
    ndim = len(weight) - 2
    width = weight[0]
    lift = require(state, "lifting.fcs.0.weight", 3, where)
    in_channels = lift[1] - ndim
    projection = require(state, "projection.fcs.0.weight", 3, where)[0]
    out_channels = require(state, "projection.fcs.1.weight", 3, where)[0]
    n_layers = len({key.split(".")[2] for key in state if key.startswith("fno_blocks.convs.")})
    if ndim == 1:
        modes = weight[2]
    else:
        if weight[2] % 2 or weight[3] != weight[2] // 2:
            raise CheckpointError(f"{where}: fno_blocks.convs.0.weight.tensor has shape {weight}: n_modes "
                                  f"({weight[2]}, {2 * weight[3] - 2}) keep {weight[2] // 2} and {weight[3]} modes; "
                                  "opformer's FNO keeps the same number on both axes (n_modes = (2m, 2m - 2))")
        modes = weight[3]
    if metadata and metadata.get("n_modes") is not None:
        n_modes = tuple(metadata["n_modes"])
        if len(n_modes) != ndim or n_modes[-1] // 2 + 1 != modes or (ndim == 2 and n_modes[0] != 2 * modes):
            raise CheckpointError(f"{where}: _metadata n_modes {n_modes} do not match the weights' shape {weight}")
    config = {"name": f"fno{ndim}d", "in_channels": in_channels, "out_channels": out_channels, "width": width,
              "modes": modes, "n_layers": n_layers, "projection_width": projection,
              "activation": "relu", "length": 1.0, "periodic": True}
    notes = [f"{ndim}D, {modes} modes per axis, ReLU"
             + ("" if metadata else " (no _metadata: sizes from the shapes, ReLU assumed)")]
    return config, notes


def rules(config: Mapping[str, Any]) -> list[Rule]:
    """The mapping of neuraloperator's keys onto opformer's FNO of ``config``."""
    ndim, m = int(config["name"][3]), config["modes"]
    pointwise = (lambda t: t.flatten(1), lambda s: (*s, 1))  # Conv1d kernel 1 <-> Linear
    out = [Rule("lifting.fcs.0.weight", "lift.weight", *pointwise), Rule("lifting.fcs.0.bias", "lift.bias")]
    for i in range(config["n_layers"]):
        if ndim == 1:  # (in, out, m) complex -> (1, in, out, m, 2)
            spectral = Rule(f"fno_blocks.convs.{i}.weight.tensor", f"layers.{i}.spectral.weight",
                            lambda t: torch.view_as_real(t).unsqueeze(0), lambda s: s[1:-1])
        else:  # (in, out, 2m, m) complex, fft-shifted rows -m..m-1 -> (2, in, out, m, m, 2): rows 0..m-1, -m..-1
            spectral = Rule(f"fno_blocks.convs.{i}.weight.tensor", f"layers.{i}.spectral.weight",
                            lambda t: torch.view_as_real(torch.stack([t[:, :, m:], t[:, :, :m]])),
                            lambda s: (s[1], s[2], 2 * s[3], s[4]))
        out += [spectral,
                Rule(f"fno_blocks.convs.{i}.bias", f"layers.{i}.linear.bias", lambda t: t.flatten(),
                     lambda s: (*s, *[1] * ndim)),
                Rule(f"fno_blocks.fno_skips.{i}.conv.weight", f"layers.{i}.linear.weight", *pointwise)]
    out += [Rule(f"projection.fcs.{i}.{p}", f"projection.linear{i + 1}.{p}", *(pointwise if p == "weight" else ()))
            for i in (0, 1) for p in ("weight", "bias")]
    return out


def convert(state: Mapping[str, Tensor], config: dict[str, Any], where: str) -> dict[str, Tensor]:
    """opformer's state dict of neuraloperator's ``state`` for the FNO of ``config`` (checked key by key)."""
    for key, value in state.items():
        if key.endswith(".weight.tensor") and not value.is_complex():
            raise CheckpointError(f"{where}: {key} is {value.dtype}, expected a complex tensor (dense weights)")
    with torch.device("meta"):
        target = build_model(config).state_dict()
    return map_state_dict(state, rules(config), target, where)


def import_file(path: Path, where: str, **_: Any) -> Imported:
    """A neuraloperator FNO state dict converted."""
    state, metadata = read_neuraloperator_weights(path)
    model, notes = infer_config(state, metadata, where)
    ndim = int(model["name"][3])
    data = data_signature(ndim, 512 if ndim == 1 else 64, model["in_channels"], model["out_channels"], "neuraloperator")
    return Imported(model, convert(state, model, where), data, "", notes)
