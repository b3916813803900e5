"""``SimpleTransformer`` state dicts of the Galerkin Transformer authors' package (``galerkin-transformer``,
Cao 2021) as opformer's ``galerkin_transformer_1d``.

The file is what their training loop saves, ``torch.save(model.state_dict())`` (read without unpickling code), or a
dict ``{"state_dict" (or "model"): ..., "config": {...}}``; the config is the keyword arguments the model was built
with (their ``config.yml`` section, e.g. ``ex1_burgers``), given in the file or as a YAML/JSON file. The layout
maps one to one except in two places (``galerkin``, ``fourier`` and ``softmax`` attention; the package's
``linear`` one divides by ``N`` where opformer's does not, and is refused): the per-head LayerNorms ``norm_K.h``, ``norm_V.h`` (``norm_Q.h``) are
stacked into opformer's head-wise norms, and for the fourier-type attention (and its aliases ``integral`` and
``local``) the package divides ``Q K^T`` by ``sqrt(d_head + pos_dim)`` besides ``N``, which opformer does not, so
the output projection ``attn.fc.weight`` is multiplied by ``1 / sqrt(d_head + pos_dim)`` (the same function;
Adam's steps from there differ, Adam not being invariant to that rescaling).

The grid: their Burgers data give ``pos = linspace(0, 1, n)`` (both ends), so the import builds the model with
``periodic: false`` (the same coordinates); ``grid="periodic"`` takes ``i / n`` instead (what
``opformer bench --peers`` feeds both). Dropout: ``encoder_dropout`` and ``ffn_dropout`` are kept (training only);
the package's attention dropout (``F.dropout`` at p = 0.5 in evaluation too, a defect) and its decoder dropout are
not carried over. Settings opformer's model does not have are refused in one line naming the key.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

import torch
from torch import Tensor

from opformer.errors import CheckpointError, ConfigError
from opformer.imports.formats import Imported, data_signature
from opformer.imports.weights import Rule, map_state_dict, prefixed, read_weights, tensor_dict
from opformer.models.registry import build_model

#: their attention types -> opformer's (aliases as in their code: 'integral' and 'local' are fourier). Not 'linear'
#: (nor its alias 'global'): the package divides K^T V by N there, opformer does not (docs/models.md), which no
#: weight can make up for.
ATTENTION = {"galerkin": "galerkin", "fourier": "fourier", "softmax": "softmax", "integral": "fourier",
             "local": "fourier"}
#: keys that must be one of these values (or absent / null), as opformer's model has no other
FIXED: dict[str, tuple[Any, ...]] = {
    "pos_dim": (1,), "spacial_dim": (None, 1), "spacial_fc": (None, False), "decoder_type": ("ifft",),
    "n_freq_targets": (None, 0), "batch_norm": (None, False), "norm_type": (None, "layer"),
    "residual_type": (None, "add", "plus"), "spacial_residual": (None, False), "num_feat_layers": (None, 0),
}
REQUIRED = ("node_feats", "n_targets", "n_hidden", "num_encoder_layers", "n_head", "attention_type", "freq_dim",
            "fourier_modes", "num_regressor_layers")
GRIDS = ("nodes", "periodic")


def read_galerkin(path: Path, config_path: str | None) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """The state dict and the ``SimpleTransformer`` config of a file (the config from ``config_path`` if given)."""
    payload = read_weights(path)
    config: Any = None
    if isinstance(payload, Mapping) and not any(isinstance(v, Tensor) for v in payload.values()):
        key = next((k for k in ("state_dict", "model") if k in payload), None)
        if key is None:
            raise CheckpointError(f"{path}: holds a dict without tensors and without 'state_dict' or 'model'; "
                                  "expected a SimpleTransformer state dict")
        config, payload = payload.get("config"), payload[key]
    state = tensor_dict(payload, path, "the state dict")
    if config_path is not None:
        config = read_config(Path(config_path))
    if config is None:
        raise ConfigError(f"{path}: holds no config; give the SimpleTransformer config it was built with as "
                          "--config FILE (YAML or JSON)")
    if not isinstance(config, Mapping):
        raise ConfigError(f"{config_path or path}: the config is a {type(config).__name__}, expected a mapping")
    return state, dict(config)


def read_config(path: Path) -> Any:
    """A YAML or JSON file's mapping (``ConfigError`` naming the file if it cannot be read)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"--config {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError):
        raise ConfigError(f"--config {path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}") from None


def model_config(config: Mapping[str, Any], where: str, grid: str = "nodes") -> tuple[dict[str, Any], list[str]]:
    """opformer's ``galerkin_transformer_1d`` config of a ``SimpleTransformer`` config, and notes."""
    if grid not in GRIDS:
        raise ConfigError(f"--grid {grid!r}: expected one of {', '.join(GRIDS)}")
    for key in REQUIRED:
        if config.get(key) is None:
            raise ConfigError(f"{where}: config key {key!r} is missing")
    for key, values in FIXED.items():
        if config.get(key) not in values:
            shown = ", ".join(repr(v) for v in values if v is not None)
            raise ConfigError(f"{where}: config {key}: {config.get(key)!r} is not supported (opformer's model has "
                              f"{shown})")
    if config.get("feat_extract_type") not in (None, "", "null") and config.get("num_feat_layers"):
        raise ConfigError(f"{where}: config feat_extract_type: {config['feat_extract_type']!r} is not supported")
    attention = ATTENTION.get(config["attention_type"])
    if config["attention_type"] in ("linear", "global"):
        raise ConfigError(f"{where}: config attention_type: {config['attention_type']!r} cannot be imported: the "
                          "package divides K^T V by N in its linear attention and opformer does not")
    if attention is None:
        raise ConfigError(f"{where}: config attention_type: {config['attention_type']!r} is not supported "
                          f"(valid: {', '.join(ATTENTION)})")
    layer_norm = bool(config.get("layer_norm"))
    attn_norm = config.get("attn_norm")
    attn_norm = (not layer_norm) if attn_norm is None else bool(attn_norm)
    if layer_norm and attn_norm:
        raise ConfigError(f"{where}: config layer_norm and attn_norm are both set; opformer's model has one or the "
                          "other (the galerkin or the regular scheme)")
    activations = {"silu": "silu", "gelu": "gelu"}
    out = {
        "name": "galerkin_transformer_1d", "in_channels": config["node_feats"], "out_channels": config["n_targets"],
        "d_model": config["n_hidden"], "n_layers": config["num_encoder_layers"], "n_head": config["n_head"],
        "dim_ff": config.get("dim_feedforward") or 2 * config["n_hidden"], "attention_type": attention,
        "norm_scheme": "regular" if layer_norm else "galerkin",
        "activation": activations.get(config.get("attn_activation"), "relu"),
        "dropout": float(config.get("encoder_dropout") or 0.0), "ffn_dropout": float(config.get("ffn_dropout") or 0.0),
        "layer_norm_eps": 1e-5, "decoder_width": config["freq_dim"], "decoder_modes": config["fourier_modes"],
        "decoder_layers": config["num_regressor_layers"], "decoder_head_width": config["freq_dim"],
        "decoder_activation": "silu" if (config.get("regressor_activation") or "silu") == "silu" else "relu",
        "periodic": grid == "periodic",
    }
    for key, ours in (("xavier_init", "xavier_gain"), ("diagonal_weight", "diagonal_weight")):
        if isinstance(config.get(key), (int, float)) and config[key] >= 0:
            out[ours] = float(config[key])
    notes = [f"{config['attention_type']} attention, {out['norm_scheme']} norm scheme",
             f"coordinates {'i / n' if grid == 'periodic' else 'linspace(0, 1, n)'}"]
    if attention == "fourier":
        notes.append("attn.fc.weight scaled by 1/sqrt(d_head + 1) (the package's extra 1/sqrt in Q K^T)")
    return out, notes


def rules(config: Mapping[str, Any]) -> list[Rule]:
    """The mapping of the package's keys onto opformer's model of ``config`` (opformer's config)."""
    heads, d_head = config["n_head"], config["d_model"] // config["n_head"]
    fourier = config["attention_type"] in ("fourier", "softmax")
    scale = 1.0 / math.sqrt(d_head + 1)
    layer = [Rule(f"attn.linears.{i}.{p}", f"attention.{name}.{p}")
             for i, name in enumerate(("query", "key", "value")) for p in ("weight", "bias")]
    if config["norm_scheme"] == "galerkin":
        normed = (("K", "key"), ("Q", "query")) if fourier else (("K", "key"), ("V", "value"))
        for theirs, ours in normed:
            for p in ("weight", "bias"):
                layer.append(Rule(tuple(f"attn.norm_{theirs}.{h}.{p}" for h in range(heads)),
                                  f"attention.norms.{ours}.{p}", lambda ts: torch.stack(ts).unsqueeze(1),
                                  lambda s: (s[2],)))
    else:
        layer += [Rule(f"layer_norm{i}.{p}", f"norm{i}.{p}") for i in (1, 2) for p in ("weight", "bias")]
    if config["attention_type"] == "fourier":
        layer.append(Rule("attn.fc.weight", "attention.out.weight", lambda t: t * scale))
    else:
        layer.append(Rule("attn.fc.weight", "attention.out.weight"))
    layer.append(Rule("attn.fc.bias", "attention.out.bias"))
    layer += [Rule(f"ff.lr{i}.{p}", f"ffn.linear{i}.{p}") for i in (1, 2) for p in ("weight", "bias")]
    out = [Rule(f"feat_extract.id.{p}", f"feature_extractor.{p}") for p in ("weight", "bias")]
    for i in range(config["n_layers"]):
        out += prefixed(layer, f"encoder_layers.{i}.", f"encoder.{i}.")
    for j in range(config["decoder_layers"]):
        out.append(Rule(f"regressor.spectral_conv.{j}.fourier_weight", f"decoder.layers.{j}.spectral.weight",
                        lambda t: t.unsqueeze(0), lambda s: s[1:]))
        out += [Rule(f"regressor.spectral_conv.{j}.linear.{p}", f"decoder.layers.{j}.linear.{p}")
                for p in ("weight", "bias")]
    out += [Rule(f"regressor.regressor.{i}.{p}", f"decoder.head.linear{k}.{p}")
            for i, k in ((0, 1), (2, 2)) for p in ("weight", "bias")]
    return out


def convert(state: Mapping[str, Tensor], config: dict[str, Any], where: str) -> dict[str, Tensor]:
    """opformer's state dict of the package's ``state`` for the model of (opformer's) ``config``."""
    with torch.device("meta"):
        target = build_model(config).state_dict()
    return map_state_dict(state, rules(config), target, where)


def import_file(path: Path, where: str, *, config: str | None = None, grid: str = "nodes", **_: Any) -> Imported:
    """A ``SimpleTransformer`` file converted (``config``: the package's model config if the file holds none;
    ``grid``: the coordinates it was trained with); its preset is ``burgers`` where it has the paper's sizes."""
    state, package_config = read_galerkin(path, config)
    model, notes = model_config(package_config, config or where, grid)
    preset = "burgers" if all(model[k] == v for k, v in (("in_channels", 1), ("out_channels", 1), ("d_model", 96),
                                                           ("n_layers", 4), ("n_head", 1), ("dim_ff", 192),
                                                           ("decoder_width", 48), ("decoder_modes", 16))) else ""
    data = data_signature(1, 512, model["in_channels"], model["out_channels"], "galerkin-transformer")
    return Imported(model, convert(state, model, where), data, preset, notes)
