"""Checkpoints of the FactFormer authors' code (BaratiLab/FactFormer) as opformer's ``factformer2d``,
``factformer3d`` and ``factformer2d_steady``.

Their trainers save ``torch.save({'model': state_dict, 'optimizer': ..., 'scheduler': ..., 'n_iter': ...})``
(read without unpickling code: the scheduler's pickled annealing method, which torch releases before 2.2 store,
becomes an inert placeholder) and keep the YAML config beside it (``--config``, read with ``yaml.safe_load``).
Their model is chosen by the config and the tensors, as their example scripts build them:

- ``in_time_window`` and ``pos_in_dim: 2``: ``FactFormer2D`` of ``turb_ns2d_fact_lm.py`` (Kolmogorov flow,
  coordinates ``linspace(0, 2 pi, n)``): ``factformer2d`` with the ``linear`` lift;
- ``in_time_window`` and ``pos_in_dim: 3``: ``FactFormer3D`` of ``turb_ns3d_fact_lm.py`` (turbulence, coordinates
  ``linspace(0, 2 pi, n)``, decoder ``GroupNorm(8)``), or, when the tensors hold ``down_block``, that of
  ``threed_smokesim_fact_lm.py`` (smoke, ``linspace(0, 8, n)``, ``padding`` from the config, the closed-domain
  CNN, decoder ``GroupNorm(int(8 * latent_multiplier))``): ``factformer3d`` with the ``channelwise`` lift;
- no ``in_time_window``: ``FactFormer2D`` of ``darcy2d_fact.py`` (``linspace(0, 1, n)``):
  ``factformer2d_steady``.

The tensors map one to one (docs/models.md); the grouped 1x1 convolutions lose their trailing unit axes and the
``(t_in, 1)`` lift convolution is flattened. Their RoPE frequencies (``inv_freq``, a buffer) are checked against
opformer's and dropped. One difference in the coordinates: past the end of an axis their smoke script places the
padding cells ``8 / n`` apart, opformer at the grid's own spacing ``8 / (n - 1)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from opformer.errors import CheckpointError, ConfigError
from opformer.imports.galerkin import read_config
from opformer.imports.formats import Imported, data_signature
from opformer.imports.weights import Rule, map_state_dict, model_entry, prefixed, read_weights
from opformer.models.registry import build_model

REQUIRED = ("in_dim", "out_dim", "dim", "heads", "depth", "dim_head", "kernel_multiplier", "pos_in_dim")
TIME_REQUIRED = ("in_time_window", "max_latent_steps")
LENGTHS = {"ns2d": 2 * math.pi, "ns3d": 2 * math.pi, "smoke3d": 8.0, "darcy": 1.0}
FOURIER_SCALES = {"ns2d": 8.0, "ns3d": 8.0, "smoke3d": 1.0, "darcy": 1.0}


def _inert(name: str) -> bool:
    """Globals of a scheduler pickled by an older torch (a bound annealing method drags in the scheduler and its
    optimizer): kept as placeholders, never loaded."""
    return name.startswith("torch.optim.") or name in ("builtins.getattr", "collections.defaultdict")


def read_factformer(path: Path, config_path: str | None) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """The state dict of a checkpoint of their trainers and the ``model`` section of their YAML config (plus
    ``resolution`` from its ``data`` section, if there)."""
    if config_path is None:
        raise ConfigError(f"{path}: give the authors' YAML config it was trained with as --config FILE")
    state = model_entry(read_weights(path, inert=_inert), path)
    config = read_config(Path(config_path))
    if not isinstance(config, Mapping) or not isinstance(config.get("model"), Mapping):
        raise ConfigError(f"--config {config_path}: no 'model' section (expected the authors' YAML config)")
    model = dict(config["model"])
    data = config.get("data")
    if isinstance(data, Mapping) and isinstance(data.get("resolution"), int):
        model.setdefault("resolution", data["resolution"])
    return state, model


def _integer(config: Mapping[str, Any], key: str, where: str) -> int:
    value = config.get(key)
    if value is None:
        raise ConfigError(f"{where}: model key {key!r} is missing")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: model {key}: {value!r} is not a non-negative integer")
    return value


def _multiplier(config: Mapping[str, Any], kind: str, where: str) -> float:
    """The latent multiplier; their 3D turbulence script reads the key as it spells it, ``latent_mutliplier``."""
    key = "latent_mutliplier" if kind == "ns3d" else "latent_multiplier"
    value = config.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{where}: model {key}: {value!r}, expected a positive number")
    return float(value)


def model_kind(state: Mapping[str, Tensor], config: Mapping[str, Any], where: str) -> str:
    """Which of their scripts built the model: ``ns2d``, ``ns3d``, ``smoke3d`` or ``darcy``."""
    dims = config.get("pos_in_dim")
    timed = "in_time_window" in config
    if dims not in (2, 3) or (dims == 3 and not timed):
        raise ConfigError(f"{where}: pos_in_dim {dims!r} {'with' if timed else 'without'} in_time_window is none of "
                          "their models (2D or 3D time models, the steady 2D Darcy model)")
    if not timed:
        return "darcy"
    if dims == 2:
        return "ns2d"
    return "smoke3d" if "down_block.1.weight" in state else "ns3d"


def infer_config(state: Mapping[str, Tensor], config: Mapping[str, Any], where: str) -> tuple[dict[str, Any],
                                                                                              list[str]]:
    """opformer's model config of their ``model`` section (and tensors), and notes on it."""
    kind = model_kind(state, config, where)
    sizes = {key: _integer(config, key, where) for key in REQUIRED}
    if config.get("positional_embedding", "rotary") != "rotary":
        raise ConfigError(f"{where}: model positional_embedding: {config['positional_embedding']!r}; their models "
                          "(and opformer's) use 'rotary'")
    common = {"in_channels": sizes["in_dim"], "out_channels": sizes["out_dim"], "d_model": sizes["dim"],
              "n_head": sizes["heads"], "head_dim": sizes["dim_head"], "kernel_multiplier": sizes["kernel_multiplier"],
              "n_layers": sizes["depth"], "fourier_scale": FOURIER_SCALES[kind], "length": LENGTHS[kind],
              "periodic": False}
    notes = [f"their {kind} model, coordinates linspace(0, {LENGTHS[kind]:.6g}, n)"]
    if kind == "darcy":
        return {"name": "factformer2d_steady", **common, "cnn_layers": 2, "decoder_groups": 8}, notes
    t_in, steps = (_integer(config, key, where) for key in TIME_REQUIRED)
    multiplier = _multiplier(config, kind, where)
    out = {"name": f"factformer{sizes['pos_in_dim']}d", "t_in": t_in, "t_out": steps, **common,
           "latent_dim": int(sizes["dim"] * multiplier),
           "decoder_groups": 8 if kind == "ns3d" else int(8 * multiplier),
           "lift": "linear" if kind == "ns2d" else "channelwise"}
    if kind == "ns2d" and sizes["in_dim"] != 1:
        raise ConfigError(f"{where}: model in_dim {sizes['in_dim']}: their 2D model lifts one channel only")
    if kind == "smoke3d":
        out.update(cnn_layers=2, padding=_integer(config, "padding", where))
        if out["padding"]:
            notes.append(f"the {out['padding']} padding cells at the grid's spacing (theirs: 8 / n)")
    return out, notes


def _check_rope(state: Mapping[str, Tensor], where: str) -> dict[str, Tensor]:
    """``state`` without their RoPE buffers ``*.pos_emb.inv_freq``, each checked to be ``10000^(-2j/D)``."""
    kept = {}
    for key, value in state.items():
        if not key.endswith(".pos_emb.inv_freq"):
            kept[key] = value
            continue
        width = 2 * value.numel()
        expected = 1.0 / 10000 ** (torch.arange(0, width, 2, dtype=torch.float64) / width)
        if value.dim() != 1 or not torch.allclose(value.double(), expected, rtol=1e-6, atol=0):
            raise CheckpointError(f"{where}: {key} is not RoPE's 10000^(-2j/{width}) (their RotaryEmbedding)")
    return kept


def _squeeze(t: Tensor) -> Tensor:
    return t.reshape(t.shape[0], -1)


def _layer_rules(ndim: int, i: int) -> list[Rule]:
    """Encoder layer ``i``: its positional features, then their ``FABlock2D`` / ``FABlock3D``."""
    theirs = f"encoder.layers.{i}."
    rules = [Rule(theirs + "0.0._B", f"encoder.features.{i}.matrix"),
             Rule(theirs + "0.1.weight", f"encoder.positional.{i}.weight"),
             Rule(theirs + "0.1.bias", f"encoder.positional.{i}.bias")]
    block = [Rule("in_norm.weight", "norm.weight"), Rule("in_norm.bias", "norm.bias"),
             Rule("to_v.weight", "mixer.value.weight"), Rule("to_in.weight", "mixer.shared.weight"),
             Rule("to_out.1.weight", "out.0.weight"), Rule("to_out.3.weight", "out.2.weight")]
    for m, axis in enumerate("xyz"[:ndim]):
        reducer = f"to_{axis}.{0 if m == 0 else 1}."  # their y and z reducers follow a Rearrange
        ours = f"mixer.projections.{m}."
        block += [Rule(reducer + "to_in.weight", ours + "gamma.weight")]
        block += [Rule(reducer + f"out_ffn.norm.{p}", ours + f"norm.{p}") for p in ("weight", "bias")]
        block += [Rule(reducer + f"out_ffn.fn.net.{j}.{p}", ours + f"mlp.linear{k}.{p}")
                  for j, k in ((0, 1), (3, 2)) for p in ("weight", "bias")]
        block += [Rule(f"low_rank_kernel_{axis}.to_{q}.weight", f"mixer.kernels.{m}.{name}.weight")
                  for q, name in (("q", "query"), ("k", "key"))]
    return rules + prefixed(block, theirs + "1.", f"encoder.blocks.{i}.")


def _cnn_rules() -> list[Rule]:
    return [Rule(f"{theirs}.{p}", f"cnn.{ours}.{p}") for theirs, ours in
            (("down_block.1", "down.1"), ("down_block.3", "down.3"), ("up_block.1", "up.0"), ("up_block.3", "up.2"))
            for p in ("weight", "bias")]


def rules(config: dict[str, Any]) -> list[Rule]:
    """The mapping of their keys onto opformer's model of (opformer's) ``config``."""
    ndim = 3 if config["name"] == "factformer3d" else 2
    out = [rule for i in range(config["n_layers"]) for rule in _layer_rules(ndim, i)]
    if config.get("cnn_layers"):
        out += _cnn_rules()
    if config["name"] == "factformer2d_steady":
        out += [Rule(f"to_in.{p}", f"lift.{p}") for p in ("weight", "bias")]
        out += [Rule(f"simple_to_out.1.{p}", f"decoder_norm.{p}") for p in ("weight", "bias")]
        out += [Rule("simple_to_out.2.weight", "head.0.weight", _squeeze, lambda s: (*s, 1))]
        out += [Rule("simple_to_out.4.weight", "head.2.weight", _squeeze, lambda s: (*s, 1)),
                Rule("simple_to_out.4.bias", "head.2.bias")]
        return out
    if config.get("lift", "linear") == "linear":
        out += [Rule(f"to_in.{p}", f"lift.{p}") for p in ("weight", "bias")]
    else:
        t_in = config["t_in"]
        out += [Rule("to_in.0.weight", "lift.weight", lambda t: t.flatten(), lambda s: (s[0], 1, 1, 1)),
                Rule("to_in.0.bias", "lift.bias"),
                Rule("to_in.2.weight", "lift.mix.weight", _squeeze, lambda s: (s[0], s[1] // t_in, t_in, 1))]
    out += [Rule("expand_latent.weight", "expand.weight"),
            Rule("latent_time_emb", "marcher.step_embedding", lambda t: t.reshape(t.shape[1], t.shape[-1]),
                 lambda s: (1, s[0], *(1,) * ndim, s[1])),
            Rule("propagator.norm.weight", "marcher.norm.weight"), Rule("propagator.norm.bias", "marcher.norm.bias")]
    out += [Rule(f"propagator.fn.net.{i}.{p}", f"marcher.mlp.{k}.{p}") for i, k in ((0, 0), (3, 2))
            for p in ("weight", "bias")]
    out += [Rule(f"simple_to_out.1.{p}", f"decoder_norm.{p}") for p in ("weight", "bias")]
    out += [Rule(f"simple_to_out.{i}.weight", f"head.{k}.weight", _squeeze, lambda s: (*s, 1))
            for i, k in ((2, 0), (4, 2), (6, 4))]
    out.append(Rule("simple_to_out.6.bias", "head.4.bias"))
    return out


def convert(state: Mapping[str, Tensor], config: dict[str, Any], where: str) -> dict[str, Tensor]:
    """opformer's state dict of their ``state`` for the model of (opformer's) ``config``."""
    with torch.device("meta"):
        target = build_model(config).state_dict()
    return map_state_dict(_check_rope(state, where), rules(config), target, where)


def import_file(path: Path, where: str, *, config: str | None = None, **_: Any) -> Imported:
    """A FactFormer checkpoint converted (``config``: the authors' YAML, if not beside the file)."""
    state, their_config = read_factformer(path, config)
    model, notes = infer_config(state, their_config, config or where)
    ndim = 3 if model["name"] == "factformer3d" else 2
    size = their_config.get("resolution")
    frames = {"t_in": model["t_in"], "t_out": model["t_out"]} if "t_in" in model else None
    data = data_signature(ndim, size if isinstance(size, int) and size > 0 else 64, model["in_channels"],
                          model["out_channels"], "factformer", frames)
    return Imported(model, convert(state, model, where), data, "", notes)
