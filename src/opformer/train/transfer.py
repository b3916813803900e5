"""Fine-tuning and transfer (DPOT, Hao et al. 2024): components of a pre-trained run's model copied into a new
model when training starts (the run config's ``init`` section, :class:`opformer.config.InitConfig`).

A component is a DPOT submodule: ``embed`` (``patch_embed``), ``pos`` (``pos_embed``), ``time_agg``,
``blocks``, ``head``; the data-set classifier is never copied. Every copied tensor must have its shape in the new
model, with one exception: the positional embedding is linearly resampled to the new latent grid (the source
model's own rule, with its ``periodic``), so a model fine-tuned at 128^2 from one pre-trained at 64^2 with the
same patch size starts as the pre-trained model applied at 128^2. Channel counts are kept by padding the data
(:func:`opformer.models.surrogate.channel_padding`), not by slicing weights. Transfer 2D -> 3D and to
steady problems (``t_in`` 1) copies ``blocks`` only: the Fourier mixer's per-head weights are shared by all
modes and axes, so their shapes do not depend on the dimension (the other components' do, and asking for them
is a one-line error naming the parameter and both shapes).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor, nn

from opformer.config import InitConfig
from opformer.errors import CheckpointError, ConfigError
from opformer.models.dpot import DPOT
from opformer.nn.resample import linear_resample
from opformer.runs import load_checkpoint, run_checkpoint

#: component name -> DPOT submodule
SUBMODULES: dict[str, str] = {"embed": "patch_embed", "pos": "pos_embed", "time_agg": "time_agg",
                              "blocks": "blocks", "head": "head"}
DPOT_MODELS = ("dpot2d", "dpot3d")


def _shape(tensor: Tensor | None) -> str:
    return "absent" if tensor is None else str(tuple(tensor.shape))


def _latent(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def component_tensors(model: nn.Module, source: Mapping[str, Tensor], component: str, periodic: bool,
                      where: str) -> tuple[dict[str, Tensor], str]:
    """The tensors of ``component`` from ``source`` (a DPOT state dict) for ``model``'s state dict, and a note
    (the positional embedding's resampling); ``ConfigError`` naming the parameter and both shapes if one does
    not fit. ``periodic`` is the source model's, ``where`` names the source in messages."""
    prefix = SUBMODULES[component]
    target = model.state_dict()
    keys = [k for k in (*target, *source) if k == prefix or k.startswith(prefix + ".")]
    copied, note = {}, ""
    for key in dict.fromkeys(keys):
        mine, theirs = target.get(key), source.get(key)
        if mine is not None and theirs is not None and mine.shape != theirs.shape and key == "pos_embed" \
                and mine.shape[0] == theirs.shape[0] and mine.dim() == theirs.dim():
            note = f" (resampled {_latent(theirs.shape[1:])} -> {_latent(mine.shape[1:])})"
            theirs = linear_resample(theirs, tuple(mine.shape[1:]), periodic)
        if mine is None or theirs is None or mine.shape != theirs.shape:
            raise ConfigError(f"init.components: {component}: {key} is {_shape(theirs)} in {where} but "
                              f"{_shape(mine)} in this model")
        copied[key] = theirs
    return copied, note


def copy_components(model: nn.Module, source: Mapping[str, Tensor], components: list[str], periodic: bool,
                    where: str) -> list[str]:
    """Copy ``components`` of the DPOT state dict ``source`` into ``model`` (all checked before any is copied);
    returns what was copied, one entry per component."""
    found = [component_tensors(model, source, component, periodic, where) for component in components]
    target = model.state_dict()  # shares storage with the parameters
    with torch.no_grad():
        for tensors, _ in found:
            for key, value in tensors.items():
                target[key].copy_(value)
    return [f"{component}{note}" for component, (_, note) in zip(components, found)]


def initialize(model: nn.Module, init: InitConfig) -> str:
    """Copy ``init.components`` of the model in ``init.checkpoint`` (a run directory: its ``best.pt``; or a
    checkpoint file, read without unpickling code) into ``model``; returns a line saying what was copied."""
    if not isinstance(model, DPOT):
        raise ConfigError(f"init: copies components of DPOT models ({', '.join(DPOT_MODELS)}), not of "
                          f"{getattr(model, 'config', {}).get('name', type(model).__name__)}")
    path = Path(init.checkpoint)
    try:
        path = run_checkpoint(path, "best") if path.is_dir() else path
        payload = load_checkpoint(path)
    except CheckpointError as exc:
        raise CheckpointError(f"init.checkpoint: {exc}") from None
    config = payload["spec"].get("model", {})
    if config.get("name") not in DPOT_MODELS:
        raise ConfigError(f"init.checkpoint: {path} holds a {config.get('name')} model, not DPOT "
                          f"({', '.join(DPOT_MODELS)})")
    source = {k.removeprefix("model."): v for k, v in payload["state_dict"].items() if k.startswith("model.")}
    copied = copy_components(model, source, init.components, config.get("periodic", True), str(path))
    fresh = [c for c in SUBMODULES if c not in init.components] + (["classifier"] if model.classifier is not None else [])
    imported = payload["run_config"].get("imported")
    origin = (f"{imported['format']} weights imported from {imported['source']}" if imported else
              f"epoch {payload['epoch'] + 1}")
    return (f"init: copied {', '.join(copied)} from {path} ({origin}); "
            f"freshly initialised: {', '.join(fresh) or 'nothing'}")
