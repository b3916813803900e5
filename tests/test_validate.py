"""The one validator: type checks, unknown keys and constructor arguments, with one-line messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from opformer.errors import ConfigError
from opformer.validate import check_arguments, check_type, from_mapping


def test_check_type_accepts_and_converts():
    assert check_type(2, float, "x") == 2.0 and isinstance(check_type(2, float, "x"), float)
    assert check_type(None, int | None, "x") is None
    assert check_type([1, 2.5], list[float], "x") == [1.0, 2.5]
    assert check_type("a", Literal["a", "b"], "x") == "a"
    for value, tp, message in [(True, int, "x: expected int, got True"), ("1", float, "x: expected float"),
                               ("c", Literal["a", "b"], "x: expected one of 'a', 'b', got 'c'"),
                               ([1, "y"], list[float], r"x\[1\]: expected float"),
                               (1.5, int | None, "x: expected int or null, got 1.5")]:
        with pytest.raises(ConfigError, match=message):
            check_type(value, tp, "x")


@dataclass
class _Section:
    size: int = 1
    name: str = "a"


def _model(width: int, scale: float = 1.0, label: str | None = None, ndim: int = 2) -> None:
    """A stand-in constructor."""


def test_sections_and_arguments_share_the_messages():
    assert from_mapping(_Section, {"size": 3}, "sec") == _Section(3, "a")
    with pytest.raises(ConfigError, match=r"^sec\.sise: unknown key; valid keys: size, name$"):
        from_mapping(_Section, {"sise": 3}, "sec")
    assert check_arguments(_model, {"width": 4, "scale": 2}, "model") == {"width": 4, "scale": 2.0}
    with pytest.raises(ConfigError, match=r"^model\.ndim: unknown key; valid keys: width, scale, label$"):
        check_arguments(_model, {"ndim": 3}, "model", exclude=frozenset({"ndim"}))
    with pytest.raises(ConfigError, match=r"^model\.width: expected int, got '4'$"):
        check_arguments(_model, {"width": "4"}, "model")
