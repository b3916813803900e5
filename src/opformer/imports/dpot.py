"""DPOT checkpoints of the authors' code (thu-ml/DPOT: ``DPOTNet``, ``DPOTNet3D``) as opformer's ``dpot2d`` /
``dpot3d``.

A file is ``torch.save({"model": state_dict, ...})``: the released pre-trained models (Ti, S, M, L, H), and what
their ``finetune.py`` / ``finetune3d.py`` save (``args``, an ``argparse.Namespace``, and ``optimizer`` besides).
It is read without unpickling code; the ``argparse.Namespace`` is the one class allowed. A ``module.`` prefix
(their data-parallel trainer's) is removed.

Every size is inferred from the tensors: the dimension and latent grid from ``pos_embed``, the patch size and
input channels from the first patch convolution, ``t_in`` from the temporal aggregation, heads from the mixer,
the MLP and head widths, ``out_channels`` from the first patch convolution's width (``out_channels * P + ndim
+ 1`` in their code) and ``t_out`` from the last layer, the classifier's classes. The Fourier modes are not in
the tensors: ``modes`` given, else ``args.modes`` if the file has ``args``, else their constructor's default 32
(which their pre-training script leaves as it is). Their mode selection (``[:m, :m]`` of the half spectrum, the
positive frequencies only; in 3D ``[:m, :m, :8]``) is reproduced with ``modes_kept: positive`` (and
``last_modes: 8`` in 3D); at the released 128^2 with patch 8 (a 16x16 latent grid) it keeps every mode.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from opformer.errors import CheckpointError, ConfigError
from opformer.imports.formats import Imported, data_signature
from opformer.imports.weights import Rule, map_state_dict, model_entry, prefixed, read_weights, require
from opformer.models.registry import PRESETS, build_model

#: globals a DPOT checkpoint may name: the ``args`` of their fine-tuning scripts
ALLOWED = {"argparse.Namespace": argparse.Namespace}
#: the authors' sizes by (latent width, depth) (README: Ti 7M, S 30M, M 122M, L 509M, H 1.03B)
SIZES = {(512, 4): "Ti", (1024, 6): "S", (1024, 12): "M", (1536, 24): "L", (2048, 27): "H"}
#: the opformer preset of a size, where there is one
SIZE_PRESETS = {"Ti": "dpot_ti", "S": "dpot_s", "M": "dpot_m", "L": "dpot_l"}
DEFAULT_MODES = 32  # DPOTNet(modes=32)
MODES_3D_LAST = 8  # AFNO3D(temporal_modes=8): the last axis of their 3D mixer


def read_dpot(path: Path) -> tuple[dict[str, Tensor], dict[str, Any] | None]:
    """The state dict (``module.`` prefix removed) and the ``args`` (as a dict, if any) of a DPOT file."""
    payload = read_weights(path, ALLOWED)
    state = model_entry(payload, path)
    if all(key.startswith("module.") for key in state):
        state = {key.removeprefix("module."): value for key, value in state.items()}
    args = payload.get("args")
    return state, (vars(args) if isinstance(args, argparse.Namespace) else None)


def _check_args(args: dict[str, Any] | None, where: str) -> None:
    """Options of their model that opformer's DPOT does not have, as the file's ``args`` state them."""
    if not args:
        return
    for key, supported in (("act", "gelu"), ("mixing_type", "afno")):
        if args.get(key, supported) != supported:
            raise CheckpointError(f"{where}: args.{key} is {args[key]!r}; opformer's DPOT has {supported!r} only")
    if args.get("normalize"):
        raise CheckpointError(f"{where}: args.normalize is {args['normalize']!r}: the per-sample normalization and "
                              "AdaIN layers are not in opformer's DPOT (every released model has them off)")


def infer_config(state: Mapping[str, Tensor], args: dict[str, Any] | None, where: str,
                 modes: int | None = None) -> tuple[dict[str, Any], str, list[str]]:
    """The opformer model config of the authors' state dict, the size's name (``Ti`` .. ``H``, ``3D`` ...,
    or ``custom``) and notes on what was inferred how."""
    _check_args(args, where)
    if any(key.startswith("scale_feats_") for key in state):
        raise CheckpointError(f"{where}: holds scale_feats_mu/sigma (a model built with normalize=True): the "
                              "per-sample normalization and AdaIN layers are not in opformer's DPOT")
    if "time_agg_layer.w" in state and "time_agg_layer.gamma" not in state:
        raise CheckpointError(f"{where}: time_agg_layer has no gamma (time_agg='mlp'); opformer's DPOT has the "
                              "authors' default 'exp_mlp' only")
    pos = require(state, "pos_embed", (4, 5), where)
    ndim, width, latent = len(pos) - 2, pos[1], pos[2:]
    if pos[0] != 1 or len(set(latent)) != 1:
        raise CheckpointError(f"{where}: pos_embed has shape {pos}, expected (1, width, n, n{', n' * (ndim - 2)})")
    coords = ndim + 1
    embed = require(state, "patch_embed.proj.0.weight", ndim + 2, where)
    hidden, in_channels, patch = embed[0], embed[1] - coords, embed[2]
    if in_channels < 1:
        raise CheckpointError(f"{where}: patch_embed.proj.0.weight has shape {embed}: fewer than {coords + 1} "
                              "input channels")
    t_in = require(state, "time_agg_layer.w", 3, where)[0]
    depth = len({key.split(".")[1] for key in state if key.startswith("blocks.")})
    if depth == 0:
        raise CheckpointError(f"{where}: missing key 'blocks.0.filter.w1' (no blocks)")
    n_heads = require(state, "blocks.0.filter.w1", 4, where)[1]
    mlp = require(state, "blocks.0.mlp.0.weight", ndim + 2, where)[0]
    head_width = require(state, "out_layer.0.weight", ndim + 2, where)[1]
    n_out = require(state, "out_layer.4.weight", ndim + 2, where)[0]
    out_channels, t_out = _outputs(hidden, coords, patch, n_out, args, where)
    n_classes = require(state, "cls_head.4.weight", 2, where)[0] if "cls_head.4.weight" in state else None
    notes = []
    if modes is None:
        if args and isinstance(args.get("modes"), int) and args["modes"] > 0:
            modes, source = args["modes"], "args.modes"
        else:
            modes, source = DEFAULT_MODES, "their default"
        notes.append(f"modes {modes} ({source})")
    config: dict[str, Any] = {
        "name": f"dpot{ndim}d", "t_in": t_in, "t_out": t_out, "in_channels": in_channels,
        "out_channels": out_channels, "patch_size": patch, "grid_size": latent[0] * patch, "width": width,
        "depth": depth, "n_heads": n_heads, "head_width": head_width, "modes": modes, "n_classes": n_classes,
        "modes_kept": "positive",
    }
    config.update({"mlp_ratio": mlp // width} if mlp % width == 0 else {"mlp_width": mlp})
    if ndim == 3:
        config["last_modes"] = MODES_3D_LAST
    if hidden != in_channels * patch + coords:
        config["embed_width"] = hidden
    size = SIZES.get((width, depth), "custom")
    label = size if ndim == 2 else f"3D ({size})" if size != "custom" else "3D"
    same = SIZE_PRESETS.get(size)
    if ndim == 2 and same and all(config.get(k) == v for k, v in PRESETS[same].items() if k != "name"):
        notes.append(f"the sizes of opformer's preset {same}")
    return config, label, notes


def _outputs(hidden: int, coords: int, patch: int, n_out: int, args: dict[str, Any] | None,
             where: str) -> tuple[int, int]:
    """``(out_channels, t_out)`` from the patch embedding's width (theirs is ``out_channels * P + coords``) and
    the last layer's ``out_channels * t_out`` outputs, checked against ``args.T_bundle`` where given."""
    t_bundle = args.get("T_bundle") if args else None
    if (hidden - coords) % patch == 0 and (hidden - coords) // patch > 0 and n_out % ((hidden - coords) // patch) == 0:
        out_channels = (hidden - coords) // patch
        t_out = n_out // out_channels
        if isinstance(t_bundle, int) and t_bundle != t_out:
            raise CheckpointError(f"{where}: args.T_bundle is {t_bundle} but the tensors give {t_out} output frames "
                                  f"of {out_channels} channels")
        return out_channels, t_out
    if isinstance(t_bundle, int) and t_bundle > 0 and n_out % t_bundle == 0:
        return n_out // t_bundle, t_bundle
    raise CheckpointError(f"{where}: out_layer.4 has {n_out} outputs, which do not split into frames of the "
                          f"{(hidden - coords) / patch:g} channels the patch embedding's width {hidden} implies")


def _mixer_rules(ndim: int) -> list[Rule]:
    """One block: GroupNorms, the mixer's (real, imag)-first weights, the MLP's 1x1 convolutions."""
    ones = (1,) * ndim
    rules = [Rule(f"{norm}.{p}", f"{norm}.{p}") for norm in ("norm1", "norm2") for p in ("weight", "bias")]
    for w in ("w1", "w2"):  # (2, heads, b_in, b_out) -> (heads, b_in, b_out, 2)
        rules.append(Rule(f"filter.{w}", f"mixer.{w}", lambda t: t.permute(1, 2, 3, 0),
                          lambda s: (s[3], s[0], s[1], s[2])))
    for b in ("b1", "b2"):  # (2, heads, b) -> (heads, b, 2)
        rules.append(Rule(f"filter.{b}", f"mixer.{b}", lambda t: t.permute(1, 2, 0), lambda s: (s[2], s[0], s[1])))
    for conv, linear in (("0", "linear1"), ("2", "linear2")):
        rules.append(Rule(f"mlp.{conv}.weight", f"mlp.{linear}.weight", lambda t: t.flatten(1),
                          lambda s: (*s, *ones)))
        rules.append(Rule(f"mlp.{conv}.bias", f"mlp.{linear}.bias"))
    return rules


def rules(config: dict[str, Any]) -> list[Rule]:
    """The mapping of the authors' keys onto opformer's DPOT of ``config``."""
    ndim = 3 if config["name"] == "dpot3d" else 2
    drop_first = (lambda t: t[0], lambda s: (1, *s))
    out = [Rule("pos_embed", "pos_embed", *drop_first), Rule("time_agg_layer.w", "time_agg.weight"),
           Rule("time_agg_layer.gamma", "time_agg.gamma", *drop_first)]
    out += [Rule(f"patch_embed.proj.{i}.{p}", f"patch_embed.{i}.{p}") for i in (0, 2) for p in ("weight", "bias")]
    for i in range(config["depth"]):
        out += prefixed(_mixer_rules(ndim), f"blocks.{i}.", f"blocks.{i}.")
    out += [Rule(f"out_layer.{i}.{p}", f"head.{i}.{p}") for i in (0, 2, 4) for p in ("weight", "bias")]
    if config.get("n_classes"):
        out += [Rule(f"cls_head.{i}.{p}", f"classifier.{i}.{p}") for i in (0, 2, 4) for p in ("weight", "bias")]
    return out


def convert(state: Mapping[str, Tensor], config: dict[str, Any], where: str) -> dict[str, Tensor]:
    """opformer's state dict of the authors' ``state`` for the model of ``config`` (checked key by key)."""
    with torch.device("meta"):  # shapes only: no memory for a billion parameters twice
        target = build_model(config).state_dict()
    return map_state_dict(state, rules(config), target, where)


def import_file(path: Path, where: str, *, modes: int | None = None, **_: Any) -> Imported:
    """A DPOT checkpoint converted (``modes``: the mixer's Fourier modes if not the file's)."""
    if modes is not None and modes < 1:
        raise ConfigError(f"--modes {modes}: expected a positive number of modes")
    state, args = read_dpot(path)
    model, preset, notes = infer_config(state, args, where, modes)
    ndim = 3 if model["name"] == "dpot3d" else 2
    data = data_signature(ndim, model["grid_size"], model["in_channels"], model["out_channels"], "dpot",
                          {"t_in": model["t_in"], "t_out": model["t_out"]})
    return Imported(model, convert(state, model, where), data, preset, notes)
