"""What the converters of foreign weights share: reading a file without running code from it, its SHA-256, and
the checked key-by-key mapping of a foreign state dict onto an opformer model's.

Reading: ``torch.load(weights_only=True)``, whose unpickler builds tensors, containers and plain values only. A
file that names other globals (classes, functions) is refused in one line naming the first, unless the format
allows it: as the real object (``allowed``, e.g. ``argparse.Namespace`` for DPOT's ``args``) or as an inert
placeholder (``inert``: an opformer class that only records its name and arguments, for the metadata that
neuraloperator keeps beside the tensors). Nothing named in the file is imported or called.

Mapping: a list of :class:`Rule` (foreign key -> opformer key, the tensor's conversion, and the foreign shape
that gives the opformer shape). Every foreign key must be claimed by a rule and have its expected shape, and
every rule's key must be present; otherwise a one-line :class:`~opformer.errors.CheckpointError` names the
first bad key, its shape and what was expected.
"""

from __future__ import annotations

import os
import pickle
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from opformer.errors import CheckpointError

Shape = tuple[int, ...]


class Inert:
    """What a global the format tolerates but opformer never runs becomes: records its name and arguments."""

    name = "?"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"<{self.name} (not loaded)>"


def _inert(name: str) -> type[Inert]:
    return type("Inert", (Inert,), {"name": name})


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [exc.__class__.__name__])[0][:160]


def read_weights(path: str | os.PathLike, allowed: Mapping[str, Any] | None = None,
                 inert: Callable[[str], bool] = lambda name: False) -> Any:
    """The object ``torch.save`` wrote to ``path``, read without unpickling code (see the module docstring).

    ``allowed`` maps a global's qualified name to the object it may be; ``inert(name)`` says whether another
    global becomes an :class:`Inert` placeholder. Any other global is a one-line ``CheckpointError``."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file")
    allowed = dict(allowed or {})
    try:
        names = list(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    except Exception:  # not a zip checkpoint (torch's legacy format, or not a torch file): the load below tells
        names = []
    refused = [name for name in names if name not in allowed and not inert(name)]
    if refused:
        raise CheckpointError(_refusal(path, refused[0], allowed))
    trusted = [(allowed[n], n) if n in allowed else (_inert(n), n) for n in names]
    try:
        with torch.serialization.safe_globals(trusted):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        match = re.search(r"GLOBAL (\S+)", str(exc))
        if match:
            raise CheckpointError(_refusal(path, match.group(1), allowed)) from None
        raise CheckpointError(f"{path}: not a readable weights file ({_first_line(exc)})") from None
    except Exception as exc:  # torch raises many types for a corrupt or foreign file
        raise CheckpointError(f"{path}: not a readable weights file ({exc.__class__.__name__}: "
                              f"{_first_line(exc)})") from None


def _refusal(path: Path, name: str, allowed: Mapping[str, Any]) -> str:
    extra = "".join(f", {n}" for n in allowed)
    return (f"{path}: refused: it asks to unpickle {name}; only tensors, plain values{extra} are read from a "
            "weights file (no code from it is run)")


def describe_shape(value: Any) -> str:
    """``(512, 4)`` for a tensor, the type's name for anything else."""
    return str(tuple(value.shape)) if isinstance(value, Tensor) else f"a {type(value).__name__}"


def tensor_dict(value: Any, path: Path, what: str) -> dict[str, Tensor]:
    """``value`` as a dict of tensors (a state dict), else a one-line error saying what it is."""
    if not isinstance(value, Mapping) or not value:
        raise CheckpointError(f"{path}: {what} is {describe_shape(value) if value else 'empty'}, expected a state "
                              "dict (parameter name -> tensor)")
    for key, tensor in value.items():
        if not isinstance(key, str) or not isinstance(tensor, Tensor):
            raise CheckpointError(f"{path}: {what}: {key!r} is {describe_shape(tensor)}, expected a tensor")
    return dict(value)


def model_entry(payload: Any, path: Path) -> dict[str, Tensor]:
    """The state dict under ``'model'`` of a checkpoint ``{'model': state_dict, ...}`` (what the DPOT and
    FactFormer authors' trainers save), else a one-line error saying what the file holds."""
    if not isinstance(payload, Mapping) or "model" not in payload:
        kind = f"a dict with keys {', '.join(map(repr, list(payload)[:5]))}" if isinstance(payload, Mapping) else \
            f"a {type(payload).__name__}"
        raise CheckpointError(f"{path}: holds {kind}; expected the authors' {{'model': state_dict, ...}}")
    return tensor_dict(payload["model"], path, "'model'")


def identity(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Rule:
    """One tensor of a foreign state dict: its key, the opformer key it becomes, how (``convert``), and the
    foreign shape that gives a tensor of the opformer shape (``source_shape``). A tuple of keys is several
    foreign tensors of that shape which ``convert`` (given their list) makes into one (e.g. one per head)."""

    source: str | tuple[str, ...]
    target: str
    convert: Callable[[Tensor], Tensor] = identity
    source_shape: Callable[[Shape], Shape] = identity


def prefixed(rules: Iterable[Rule], source: str, target: str) -> list[Rule]:
    """``rules`` with ``source`` and ``target`` prepended to their keys."""
    return [Rule(tuple(source + s for s in r.source) if isinstance(r.source, tuple) else source + r.source,
                 target + r.target, r.convert, r.source_shape) for r in rules]


def _keys(rule: Rule) -> tuple[str, ...]:
    return rule.source if isinstance(rule.source, tuple) else (rule.source,)


def map_state_dict(source: Mapping[str, Tensor], rules: list[Rule], target: Mapping[str, Tensor],
                   where: str) -> dict[str, Tensor]:
    """The opformer state dict ``rules`` make of ``source`` for a model whose state dict is ``target``.

    Checked in the foreign file's order, then for absent keys: a key no rule claims, a shape other than the rule's,
    a key a rule needs that is absent; the first is a one-line ``CheckpointError`` (``where``: the file)."""
    by_source = {key: rule for rule in rules for key in _keys(rule)}
    missing_targets = set(target) - {rule.target for rule in rules}
    if missing_targets:  # a converter that forgets a parameter is a bug in opformer, not in the file
        raise AssertionError(f"no rule gives {sorted(missing_targets)[0]}")
    for key, value in source.items():
        rule = by_source.get(key)
        if rule is None:
            raise CheckpointError(f"{where}: unexpected key {key!r} {describe_shape(value)}: not a parameter of the "
                                  "model its other tensors describe")
        expected = rule.source_shape(tuple(target[rule.target].shape))
        if tuple(value.shape) != expected:
            raise CheckpointError(f"{where}: {key} has shape {tuple(value.shape)}, expected {expected}")
    for rule in rules:
        for key in _keys(rule):
            if key not in source:
                expected = rule.source_shape(tuple(target[rule.target].shape))
                raise CheckpointError(f"{where}: missing key {key!r} (expected shape {expected})")
    return {rule.target: rule.convert([source[k] for k in rule.source]) if isinstance(rule.source, tuple)
            else rule.convert(source[rule.source]) for rule in rules}


def require(source: Mapping[str, Tensor], key: str, ndims: int | tuple[int, ...], where: str) -> Shape:
    """The shape of ``source[key]``, which the inference of a model's sizes needs: absent, or of another number
    of dimensions, it is a one-line error."""
    if key not in source:
        raise CheckpointError(f"{where}: missing key {key!r}")
    shape = tuple(source[key].shape)
    allowed = (ndims,) if isinstance(ndims, int) else ndims
    if len(shape) not in allowed:
        raise CheckpointError(f"{where}: {key} has shape {shape}, expected {' or '.join(map(str, allowed))} "
                              "dimensions")
    return shape
