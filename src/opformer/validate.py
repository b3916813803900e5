"""The one validator of plain configs: dataclass sections and constructor keyword arguments.

Both run-config sections (:mod:`opformer.config`) and model configs (:func:`opformer.models.build_model`) are
checked here, against type annotations, with the same one-line ``ConfigError`` messages:
``"<where>.<key>: unknown key; valid keys: ..."`` and ``"<where>.<key>: expected int, got 'ten'"``.

Ranges are declared on the annotations too, ``Annotated[int, Range(ge=1)]`` or ``Annotated[list[float],
Length(2)]``, and checked after the type: ``"train.epochs: expected an integer >= 1, got 0"``.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from opformer.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Range:
    """Bounds of a number, for ``Annotated[int, Range(ge=1)]`` or ``Annotated[float, Range(gt=0, lt=1)]``.

    ``ge``/``gt`` bound it from below (inclusive/exclusive), ``le``/``lt`` from above; a value must also be
    finite (no NaN or infinity).
    """

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def holds(self, value: float) -> bool:
        """Whether ``value`` is finite and within the bounds."""
        finite = isinstance(value, int) or math.isfinite(value)  # ints of any size are finite
        return (finite and (self.ge is None or value >= self.ge) and (self.gt is None or value > self.gt)
                and (self.le is None or value <= self.le) and (self.lt is None or value < self.lt))

    def describe(self) -> str:
        """The bounds in words: ``">= 1"``, ``"> 0"``, ``"in [0, 1)"``."""
        low = next(((op, bracket, _number(v)) for op, bracket, v in ((">=", "[", self.ge), (">", "(", self.gt))
                    if v is not None), None)
        high = next(((op, bracket, _number(v)) for op, bracket, v in (("<=", "]", self.le), ("<", ")", self.lt))
                     if v is not None), None)
        if low and high:
            return f"in {low[1]}{low[2]}, {high[2]}{high[1]}"
        if low or high:
            op, _, bound = low or high
            return f"{op} {bound}"
        return "finite"


def _number(x: float) -> str:
    """A bound as written: integers in full (``2**63`` too), other numbers short (``0.001``)."""
    return str(x) if isinstance(x, int) else f"{x:g}"


@dataclasses.dataclass(frozen=True)
class Length:
    """The number of items of a list, for ``Annotated[list[float], Length(2)]``."""

    n: int

    def holds(self, value: list[Any]) -> bool:
        """Whether ``value`` has ``n`` items."""
        return len(value) == self.n


PositiveInt = Annotated[int, Range(ge=1)]
NonNegativeInt = Annotated[int, Range(ge=0)]
PositiveFloat = Annotated[float, Range(gt=0)]
NonNegativeFloat = Annotated[float, Range(ge=0)]
Fraction = Annotated[float, Range(ge=0, lt=1)]  # in [0, 1): dropout rates, Adam's betas
GridSize = Annotated[int, Range(ge=2)]  # grid points per axis


class _OutOfRange(ConfigError):
    """A value of the right type that breaks a :class:`Range` or :class:`Length` (more telling than a type error)."""


def type_name(tp: Any) -> str:
    """Readable name of a type annotation (``"one of 'a', 'b'"``, ``"int or null"``); ranges are left out."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return type_name(typing.get_args(tp)[0])
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if isinstance(tp, types.UnionType) or origin is typing.Union:
        return " or ".join(type_name(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    return getattr(origin or tp, "__name__", str(tp))


def range_name(tp: Any, plural: bool = False) -> str:
    """What an annotation allows, ranges included: ``"an integer >= 1"``, ``"2 numbers in [0, 1)"``."""
    origin = typing.get_origin(tp)
    if isinstance(tp, types.UnionType) or origin is typing.Union:
        return " or ".join(range_name(a, plural) for a in typing.get_args(tp))
    if origin is not Annotated:
        return f"{type_name(tp)} values" if plural else type_name(tp)
    base, *constraints = typing.get_args(tp)
    words = []
    for constraint in constraints:
        if isinstance(constraint, Range):
            nouns = {int: ("an integer", "integers"), float: ("a number", "numbers")}
            noun = nouns.get(base, (type_name(base), f"{type_name(base)} values"))[plural]
            words.append(f"{noun} {constraint.describe()}")
        elif isinstance(constraint, Length):
            (item,) = typing.get_args(base)
            words.append(f"{constraint.n} {range_name(item, plural=True)}")
    return ", ".join(words)


def check_type(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it (ints are accepted for floats, as floats).

    Dataclass annotations validate a nested mapping (:func:`from_mapping`); ``bool`` is not an ``int``.
    ``Annotated[T, Range(...)]`` (or ``Length``) checks the type ``T``, then the range.
    """
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return from_mapping(tp, value, where)
    if origin is Annotated:
        base, *constraints = typing.get_args(tp)
        checked = check_type(value, base, where)
        if all(constraint.holds(checked) for constraint in constraints):
            return checked
        raise _OutOfRange(f"{where}: expected {range_name(tp)}, got {value!r}")
    if origin is Literal:
        if value in typing.get_args(tp):
            return value
    elif isinstance(tp, types.UnionType) or origin is typing.Union:
        out_of_range = False
        for option in typing.get_args(tp):
            try:
                return check_type(value, option, where)
            except _OutOfRange:
                out_of_range = True
            except ConfigError:
                continue
        if out_of_range:
            raise _OutOfRange(f"{where}: expected {range_name(tp)}, got {value!r}")
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
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = dataclasses.fields(cls)
    _check_keys(data, [f.name for f in fields], where)
    missing = [f.name for f in fields if f.name not in data
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{where + '.' if where else ''}{missing[0]}: required")
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
    hints = typing.get_type_hints(target, include_extras=True)
    return {k: check_type(v, hints[k], f"{where}.{k}") if k in hints else v for k, v in kwargs.items()}
