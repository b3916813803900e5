"""Typed, validated run configurations.

A run config is a YAML mapping with the sections below; unknown keys are errors that name the valid ones,
and every value is type-checked (:mod:`opformer.validate`). ``model`` names a registry model (or a preset)
and is resolved and validated by :func:`resolve_model_section`.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml

from opformer.data.mixture import MixtureMember, Sampling
from opformer.errors import ConfigError
from opformer.models.registry import GRID_MODELS, model_keys, preset, resolve_model_config
from opformer.validate import (Fraction, GridSize, Length, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt,
                               Range, check_type, from_mapping)


@dataclass
class DataConfig:
    """Which data file, which grid, which samples, which normalization."""

    path: str = ""
    resolution: GridSize | None = None  # training grid points per axis; None = as stored
    n_train: PositiveInt = 1024
    n_val: PositiveInt = 100  # validation selects best.pt
    n_test: PositiveInt = 100
    normalize_input: Literal["none", "pointwise", "channel"] = "none"
    normalize_target: Literal["none", "pointwise", "channel"] = "none"
    direction: Literal["forward", "inverse"] = "forward"  # inverse: learn stored target -> stored input
    target_resolution: GridSize | None = None  # target on a coarser closed grid, by block averages (inverse Darcy)
    input_noise: NonNegativeFloat = 0.0  # eps: inputs get eps * N(0, 1) after normalization, in training and evaluation
    boundary: Literal["none", "dirichlet"] = "none"  # dirichlet: the output is set to zero on the boundary
    # a mixture of trajectory files in place of path (opformer.data.mixture): each resized to resolution
    mixture: list[MixtureMember] = field(default_factory=list)
    sampling: Sampling = "weight"  # mixture: member probability by weight, or weight x training windows
    windows_per_epoch: PositiveInt | None = None  # mixture: windows drawn per epoch (None: its training trajectories)
    memory_gb: PositiveFloat = 8.0  # a training split up to this size is held in memory; a larger one is read from
                                    # disk per batch (opformer.data.streaming), through a chunk cache of this size
    workers: NonNegativeInt = 2  # processes reading a streamed split's batches ahead of the steps (0: in the loop)
    device_memory_gb: PositiveFloat | None = None  # CUDA: a training split up to this size lives on the device
                                                   # (None: a quarter of the device's memory); larger ones stream

    def __post_init__(self) -> None:
        """How the mixture keys combine with the others."""
        if not self.mixture:
            for key, unset in (("sampling", "weight"), ("windows_per_epoch", None)):
                if getattr(self, key) != unset:
                    raise ConfigError(f"data.{key}: only used with data.mixture")
            return
        if self.path:
            raise ConfigError("data.path: give data.path or data.mixture, not both")
        if self.resolution is None:
            raise ConfigError("data.resolution: required with data.mixture (the training grid every member is "
                              "resized to)")


@dataclass
class LossConfig:
    """Training loss: per-sample relative L2, optionally with the paper's H1 regulariser."""

    name: Literal["relative_l2", "h1_relative"] = "relative_l2"
    gamma: NonNegativeFloat = 0.1
    weight_by_input: bool = False  # H1 term weighted by the first input channel (Darcy's coefficient a)
    h1_interior: bool = False  # H1 misfit on interior points only (the GT package's difference drops both ends)
    reduction: Literal["mean", "sum"] = "mean"  # over a batch's samples; sum: DPOT's training code
    # trajectory data: one weight per channel, the loss sum_c w_c ||pred_c - true_c|| / ||true_c|| (norms over grid and
    # frames); None: one relative L2 over all channels together
    channel_weights: list[NonNegativeFloat] | None = None
    # trajectory data of one file: the loss between the target normalizer's encodings of prediction and truth (the
    # FactFormer authors' training, which normalizes its data first); false: between the data's own values
    normalized: bool = False


@dataclass
class OptimConfig:
    """Optimiser: PyTorch's Adam or AdamW.

    ``adam`` with ``weight_decay`` w is coupled L2 decay: the step is Adam's on ``grad + w * param``, so the decay
    passes through the adaptive scaling (the DPOT authors' code, ``configs/mixture/``). ``adamw`` decouples it:
    the parameters shrink by ``lr * w`` beside the Adam step on ``grad`` (Loshchilov & Hutter; what the DPOT
    paper says it used). The same w means different regularisation in the two.
    """

    name: Literal["adam", "adamw"] = "adam"
    lr: PositiveFloat = 1e-3
    weight_decay: NonNegativeFloat = 0.0
    betas: Annotated[list[Fraction], Length(2)] = field(default_factory=lambda: [0.9, 0.999])


@dataclass
class ScheduleConfig:
    """Learning-rate schedule, stepped once per batch."""

    name: Literal["onecycle", "constant", "step"] = "onecycle"
    div_factor: PositiveFloat = 1e4
    final_div_factor: PositiveFloat = 1e4
    pct_start: Annotated[float, Range(gt=0, lt=1)] = 0.2
    anneal: Literal["cos", "linear"] = "cos"
    cycle_momentum: bool = False  # OneCycle's beta1 cycling (0.85-0.95); off unless asked for
    step_epochs: PositiveInt = 100  # step: the rate is multiplied by gamma every step_epochs epochs
    gamma: Annotated[float, Range(gt=0, le=1)] = 0.5


@dataclass
class TrainConfig:
    """The training loop."""

    epochs: PositiveInt = 100
    batch_size: PositiveInt = 8
    eval_batch_size: PositiveInt = 32
    grad_clip: PositiveFloat | None = 1.0  # None: no clipping
    device: str = "auto"
    num_threads: PositiveInt | None = None
    retain_freed_memory: bool = True  # keep freed host memory for reuse (opformer.runtime)
    flush_denormal: bool = True  # CPU: subnormal floats read and written as 0 (x86 computes with them ~10x slower)
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"  # training steps under autocast (opformer.runtime.autocast)
    compile: bool = False  # the training forward under torch.compile (validation stays eager)
    cuda_graphs: bool = False  # each training step replayed as a captured CUDA graph (CUDA only; opformer.train.step)
    matmul_precision: Literal["highest", "high"] = "highest"  # high: TF32 products on CUDA
    log_every: PositiveInt = 50  # steps between the loop's reads of the loss from the device (and at epoch end)
    # stop once the validation error has stayed above this multiple of its best for divergence_epochs epochs
    stop_when_diverged: Annotated[float, Range(gt=1)] | None = None  # None: train every epoch
    divergence_epochs: PositiveInt = 3


@dataclass
class RolloutConfig:
    """Time-dependent problems (trajectory data): windows, the training strategy and rollout evaluation.

    A model maps ``t_in`` frames to the next ``t_out`` (temporal bundling). ``one_step`` trains on one call
    (teacher forcing); ``unroll`` chains ``unroll_steps`` calls with gradients through all of them;
    ``pushforward`` chains ``unroll_steps - 1`` calls without gradient and trains on the last one. With
    ``curriculum_epochs > 0`` the number of calls grows linearly from 1 to ``unroll_steps`` over those epochs.
    ``noise`` adds Gaussian noise of that fraction of each input's RMS (per sample and channel) to the
    model's input in training.

    ``latent_marching`` (FactFormer's LM protocol, as the authors' code trains it): the loss of a call covers its
    first ``j`` bundled frames, ``j`` growing linearly from 1 to ``t_out`` over ``march_curriculum_epochs`` epochs or
    ``march_curriculum_steps`` optimiser steps. Pushforward starts at epoch ``pushforward_epoch``, or after
    ``pushforward_after_steps`` optimiser steps; from then on every step whose index (from 0, over the run) is a
    multiple of ``pushforward_every`` makes ``unroll_steps`` calls, the first ``unroll_steps - 1`` without gradient,
    each fed its predecessor's ``j`` frames, and trains the last call only; the other steps make one call.
    """

    t_in: PositiveInt = 10
    t_out: PositiveInt = 1
    strategy: Literal["one_step", "unroll", "pushforward", "latent_marching"] = "one_step"
    unroll_steps: PositiveInt = 1
    curriculum_epochs: NonNegativeInt = 0
    march_curriculum_epochs: NonNegativeInt = 0  # latent_marching: epochs over which the trained frames grow 1 -> t_out
    march_curriculum_steps: NonNegativeInt = 0  # latent_marching: the same counted in optimiser steps (the authors')
    pushforward_epoch: NonNegativeInt | None = None  # latent_marching: first epoch with pushforward (None: never)
    # latent_marching: pushforward on the steps whose index (from 0) exceeds this (the authors' pushforward_after)
    pushforward_after_steps: NonNegativeInt | None = None
    pushforward_every: PositiveInt = 1  # latent_marching: of the steps past pushforward's start, every this many push
    windows: Literal["all", "random"] = "all"  # every window start, or one random start per trajectory
    noise: NonNegativeFloat = 0.0
    time_stride: PositiveInt = 1  # sub-sample the stored frames in time
    eval_frames: PositiveInt | None = None  # frames rolled out in evaluation after the t_in given ones (None: all)

    def __post_init__(self) -> None:
        """How the keys combine (their ranges are checked by :mod:`opformer.validate` on loading)."""
        if self.strategy == "one_step" and self.unroll_steps != 1:
            raise ConfigError(f"rollout.unroll_steps: is {self.unroll_steps} but strategy one_step makes one call; "
                              "use strategy unroll or pushforward")
        self._check_latent_marching()

    def _check_latent_marching(self) -> None:
        """The keys of the latent_marching strategy: only with it; pushforward needs calls."""
        keys = (("march_curriculum_epochs", 0), ("march_curriculum_steps", 0), ("pushforward_epoch", None),
                ("pushforward_after_steps", None), ("pushforward_every", 1))
        if self.strategy != "latent_marching":
            for key, unset in keys:
                if getattr(self, key) != unset:
                    raise ConfigError(f"rollout.{key}: only used by strategy latent_marching, not {self.strategy}")
            return
        if self.curriculum_epochs:
            raise ConfigError("rollout.curriculum_epochs: latent_marching grows the trained frames instead; use "
                              "rollout.march_curriculum_epochs")
        if self.march_curriculum_epochs and self.march_curriculum_steps:
            raise ConfigError("rollout.march_curriculum_steps: give march_curriculum_epochs or _steps, not both")
        start = "pushforward_epoch" if self.pushforward_epoch is not None else "pushforward_after_steps"
        if self.pushforward_epoch is not None and self.pushforward_after_steps is not None:
            raise ConfigError("rollout.pushforward_after_steps: give pushforward_epoch or pushforward_after_steps, "
                              "not both")
        if getattr(self, start) is None:
            if self.unroll_steps != 1:
                raise ConfigError(f"rollout.unroll_steps: is {self.unroll_steps} but latent_marching without "
                                  "pushforward_epoch makes one call")
            if self.pushforward_every != 1:
                raise ConfigError("rollout.pushforward_every: only used with pushforward_epoch or "
                                  "pushforward_after_steps")
        elif self.unroll_steps < 2:
            raise ConfigError(f"rollout.{start}: pushforward needs rollout.unroll_steps >= 2, got {self.unroll_steps}")


#: what ``init.components`` may name (for DPOT: patch_embed, pos_embed, time_agg, blocks, head)
Component = Literal["embed", "pos", "time_agg", "blocks", "head"]
COMPONENTS: tuple[str, ...] = typing.get_args(Component)


@dataclass
class InitConfig:
    """Weights copied from a pre-trained run when training starts (fine-tuning, transfer;
    :mod:`opformer.train.transfer`): ``checkpoint`` a run directory (its ``best.pt``) or a checkpoint file,
    ``components`` the parts of the model copied (all by default); the rest keeps its fresh initialisation."""

    checkpoint: str | None = None  # None: no weights copied
    components: list[Component] = field(default_factory=lambda: list(COMPONENTS))

    def __post_init__(self) -> None:
        """Components only with a checkpoint, each once."""
        if self.checkpoint is None:
            if self.components != list(COMPONENTS):
                raise ConfigError("init.components: only used with init.checkpoint")
            return
        if not self.checkpoint:
            raise ConfigError("init.checkpoint: expected a run directory or a checkpoint file, got ''")
        if not self.components:
            raise ConfigError(f"init.components: empty; name some of {', '.join(COMPONENTS)}")
        twice = [c for i, c in enumerate(self.components) if c in self.components[:i]]
        if twice:
            raise ConfigError(f"init.components: {twice[0]!r} is given twice")


#: the formats ``opformer import`` reads (:mod:`opformer.imports`)
ImportFormat = Literal["dpot", "factformer", "galerkin-transformer", "neuraloperator"]


@dataclass
class ImportedConfig:
    """Where the weights of a run that ``opformer import`` wrote came from (a trained run has none)."""

    format: ImportFormat
    source: str  # the file read, as given (hf://OWNER/NAME/PATH for a file of the Hugging Face Hub)
    sha256: str  # of that file's bytes
    preset: str = ""  # the authors' size the weights have (DPOT: Ti, S, M, L, H, 3D ...), if known
    revision: str = ""  # the Hub commit the file was taken at (hf:// sources)


@dataclass
class RunConfig:
    """Everything that defines a training run (or, with ``imported``, the run ``opformer import`` wrote)."""

    model: dict[str, Any] = field(default_factory=dict)
    data: DataConfig = field(default_factory=DataConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)  # used with trajectory data
    init: InitConfig = field(default_factory=InitConfig)  # weights from a pre-trained run (fine-tuning)
    seed: Annotated[int, Range(ge=0, lt=2**63)] = 1127802  # torch's generators take 64 bits (+ epoch)
    imported: ImportedConfig | None = None  # weights imported from another code base, not trained here

    def __post_init__(self) -> None:
        self.model = resolve_model_section(self.model, self.rollout)


def resolve_model_section(model: dict[str, Any], rollout: RolloutConfig) -> dict[str, Any]:
    """The ``model`` section resolved and validated (as ``config.yaml`` stores it): no preset reference left.

    ``preset: <name>`` starts from that preset of :data:`opformer.models.PRESETS`; the section's other keys
    override it. A model that takes ``t_in``/``t_out`` gets them from the ``rollout`` section (a preset's
    values give way to it); stating them under ``model`` as well is allowed only if they agree. The result is
    checked by :func:`opformer.models.registry.resolve_model_config` (names, keys, types); the class defaults
    are filled in when the model is built (``model.config``). An empty section stays empty (``build_model``
    reports the missing name).
    """
    if not model:
        return model
    given = {k: v for k, v in model.items() if k != "preset"}
    section = dict(given)
    if "preset" in model:
        name = check_type(model["preset"], str, "model.preset")
        try:
            section = {**preset(name), **given}
        except ConfigError as exc:
            raise ConfigError(f"model.preset: {exc}") from None
    for key in ("t_in", "t_out"):
        if key in model_keys(section):
            if key in given and given[key] != getattr(rollout, key):
                raise ConfigError(f"model.{key}: is {given[key]!r} but rollout.{key} is {getattr(rollout, key)}; "
                                  f"give {key} once, under rollout")
            section[key] = getattr(rollout, key)
    resolve_model_config(section)
    return section


#: the fraction of each non-periodic axis that FNO, FNO-time and F-FNO pad (``padding``) in a run configured from
#: its data without the key (the FNO authors padded Darcy's 85^2 grid by 9 cells)
DEFAULT_PADDING = 0.1


def grid_defaults(model: dict[str, Any], periodic: list[bool]) -> dict[str, Any]:
    """The model section with what the data's grid decides and the section leaves out, for a run configured from
    its data (a trained run keeps the model config of its checkpoint, so runs trained before evaluate as they
    did): a model of :data:`~opformer.models.registry.GRID_MODELS` takes ``periodic`` from the grid (one bool
    where every axis agrees, else one per axis), and one that has ``padding`` pads its non-periodic axes by
    :data:`DEFAULT_PADDING`.
    ``periodic`` holds the data's axes, True where the grid is periodic."""
    if not model or model.get("name") not in GRID_MODELS:
        return model
    section = dict(model)
    if "periodic" not in section:
        section["periodic"] = periodic[0] if len(set(periodic)) == 1 else list(periodic)
    if "padding" in model_keys(section) and "padding" not in section and not all(periodic):
        section["padding"] = DEFAULT_PADDING
    return section


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    """Validate a plain mapping into a :class:`RunConfig`."""
    return from_mapping(RunConfig, data, "")


def config_to_dict(config: RunConfig) -> dict[str, Any]:
    """The plain-mapping form of a config (what is written to ``config.yaml``; ``imported`` only where set)."""
    data = dataclasses.asdict(config)
    if data["imported"] is None:
        del data["imported"]
    return data


class _SafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that reads exponent floats without a dot (``1e-3``) as floats (YAML 1.2) and refuses
    duplicate keys in a mapping (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A mapping whose keys are all different (``<<`` merges may still be overridden)."""
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def safe_load_yaml(text: str) -> Any:
    """Parse YAML safely (no arbitrary objects); ``1e-3`` is the float 0.001, not a string as in YAML 1.1.

    A duplicate key in a mapping is a ``yaml.YAMLError`` (:func:`yaml_problem` words it).
    """
    return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - a SafeLoader subclass


def yaml_problem(exc: yaml.YAMLError) -> str:
    """One line on what is wrong in a YAML text: ``"duplicate key 'epochs' at line 3"``."""
    if isinstance(exc, yaml.reader.ReaderError):
        return f"not valid YAML (character #x{exc.character:04x} at position {exc.position}: {exc.reason})"
    problem = getattr(exc, "problem", None) or ""
    if problem.startswith("but "):  # "expected a single document in the stream, but found another document"
        problem = f"{getattr(exc, 'context', None)}, {problem}"
    mark = getattr(exc, "problem_mark", None)
    at = f" at line {mark.line + 1}" if mark else ""
    if problem.startswith("duplicate key"):
        return f"{problem}{at}"
    return f"not valid YAML{at}" + (f" ({' '.join(problem.split())})" if problem else "")


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``key.sub=value`` overrides (values parsed as YAML) to a plain config mapping."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. train.epochs=10")
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: '{part}' is not a section")
        try:
            node[parts[-1]] = safe_load_yaml(raw)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {item!r}: {yaml_problem(exc)}") from None
    return data


def read_config_file(path: Path) -> dict[str, Any]:
    """The mapping of sections in the YAML file ``path``; ``ConfigError`` naming the file if there is none."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        if b"\0" in raw:
            raise UnicodeDecodeError("utf-8", raw, raw.index(b"\0"), raw.index(b"\0") + 1, "NUL byte")
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a YAML text file (binary content)") from None
    try:
        data = safe_load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_problem(exc)}") from None
    if data is None:
        raise ConfigError(f"{path}: empty config file; expected sections such as model, data, train")
    if not isinstance(data, dict):
        kind = {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(data), "value")
        raise ConfigError(f"{path}: expected a mapping of sections (model, data, train, ...), got a {kind}")
    return data


def load_config(source: str | os.PathLike | Mapping[str, Any], overrides: list[str] | None = None) -> RunConfig:
    """Read a run config from a YAML file (:func:`read_config_file`) or take it as a mapping, apply overrides and
    validate it.

    Parameters
    ----------
    source
        The YAML file, or the same mapping of sections in Python (``{"model": {...}, "data": {...}, ...}``: what
        the file would hold; not modified). A section left out takes its defaults.
    overrides
        ``key.sub=value`` items applied in order, as ``opformer train --set`` gives them (values parsed as YAML,
        e.g. ``train.epochs=10``).

    Returns
    -------
    RunConfig
        The validated config, its ``model`` section resolved (a ``preset`` expanded, ``t_in``/``t_out`` from the
        ``rollout`` section).

    Raises
    ------
    ConfigError
        The file is missing, unreadable or not a mapping, an override is malformed, or a key or value is invalid;
        the message names the file (a mapping: ``config``) and the key.

    Examples
    --------
    Training from Python without a file (:func:`opformer.train.trainer.train`)::

        from opformer.config import load_config
        from opformer.train.trainer import train

        config = load_config({"model": {"name": "fno1d", "modes": 8, "width": 16},
                              "data": {"path": "data/burgers.h5", "n_train": 800, "n_val": 100, "n_test": 100},
                              "train": {"epochs": 20}})
        train(config, "runs/burgers_fno")
    """
    if isinstance(source, Mapping):
        where = "config"
        data = apply_overrides(copy.deepcopy(dict(source)), overrides or [])
    elif isinstance(source, (str, os.PathLike)):
        where = str(source)
        data = apply_overrides(read_config_file(Path(source)), overrides or [])
    else:
        raise ConfigError(f"load_config: expected a YAML file's path or a mapping of sections, got "
                          f"{type(source).__name__}")
    try:
        return config_from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
