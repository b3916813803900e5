"""The one validator of plain configs: dataclass sections and constructor keyword arguments.

Both run-config sections (:mod:`opformer.config`) and model configs (:func:`opformer.models.build_model`) are
checked here, against type annotations, with the same one-line ``ConfigError`` messages:
``"<where>.<key>: unknown key; valid keys: ..."`` and ``"<where>.<key>: expected int, got 'ten'"``.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal

from opformer.errors import ConfigError


def type_name(tp: Any) -> str:
    """Readable name of a type annotation (``"one of 'a', 'b'"``, ``"int or null"``)."""
    if typing.get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return " or ".join(type_name(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    return getattr(typing.get_origin(tp) or tp, "__name__", str(tp))


def check_type(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it (ints are accepted for floats, as floats).

    Dataclass annotations validate a nested mapping (:func:`from_mapping`); ``bool`` is not an ``int``.
    """
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return from_mapping(tp, value, where)
    if origin is Literal:
        if value in typing.get_args(tp):
            return value
    elif isinstance(tp, types.UnionType) or origin is typing.Union:
        for option in typing.get_args(tp):
            try:
                return check_type(value, option, where)
            except ConfigError:
                continue
    elif tp is type(None):
        if value is None:
            return None
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif origin is list:
        (item,) = typing.get_args(tp)
        if isinstance(value, (list, tuple)):
            return [check_type(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    elif origin is dict:
        if isinstance(value, dict):
            return dict(value)
    elif isinstance(value, origin or tp):
        return value
    raise ConfigError(f"{where}: expected {type_name(tp)}, got {value!r}")


def _check_keys(data: Mapping[str, Any], valid: list[str], where: str) -> None:
    """Raise ``ConfigError`` naming the first key of ``data`` not in ``valid`` and the valid ones."""
    unknown = [k for k in data if k not in valid]
    if unknown:
        raise ConfigError(f"{where + '.' if where else ''}{unknown[0]}: unknown key; valid keys: {', '.join(valid)}")


def from_mapping(cls: type, data: Any, where: str) -> Any:
    """Validate the mapping ``data`` into the dataclass ``cls``; ``where`` prefixes error messages."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    _check_keys(data, [f.name for f in dataclasses.fields(cls)], where)
    return cls(**{k: check_type(v, hints[k], f"{where + '.' if where else ''}{k}") for k, v in data.items()})


def check_arguments(func: Callable[..., Any], kwargs: Mapping[str, Any], where: str,
                    exclude: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Validate keyword arguments of ``func`` (a class: its ``__init__``) against its signature and annotations.

    Keys in ``exclude`` are not valid here (the caller supplies them). Returns the checked arguments.
    """
    target = func.__init__ if inspect.isclass(func) else func
    parameters = inspect.signature(target).parameters
    valid = [k for k in parameters if k != "self" and k not in exclude]
    _check_keys(kwargs, valid, where)
    hints = typing.get_type_hints(target)
    return {k: check_type(v, hints[k], f"{where}.{k}") if k in hints else v for k, v in kwargs.items()}
