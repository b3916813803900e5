"""The one validator: type checks, unknown keys and constructor arguments, with one-line messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import pytest

from opformer.errors import ConfigError
from opformer.validate import (Fraction, Length, PositiveInt, Range, check_arguments, check_type, from_mapping,
                               range_name)


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


def test_ranges_are_checked_after_the_type_and_named_in_words():
    unit = Annotated[float, Range(gt=0, lt=1)]
    assert check_type(1, PositiveInt, "x") == 1 and check_type(0, Fraction, "x") == 0.0
    assert check_type(0.5, unit, "x") == 0.5 and check_type(None, PositiveInt | None, "x") is None
    assert [range_name(t) for t in (PositiveInt, Fraction, unit, Annotated[int, Range(le=3)],
                                    Annotated[list[Fraction], Length(2)], PositiveInt | None)] == [
        "an integer >= 1", "a number in [0, 1)", "a number in (0, 1)", "an integer <= 3", "2 numbers in [0, 1)",
        "an integer >= 1 or null"]
    for value, tp, message in [(0, PositiveInt, "x: expected an integer >= 1, got 0"),
                               ("0", PositiveInt, "x: expected int, got '0'"),  # a wrong type says so
                               (1, Fraction, "x: expected a number in [0, 1), got 1"),
                               (float("nan"), Fraction, "x: expected a number in [0, 1), got nan"),
                               (float("-inf"), Annotated[float, Range(le=0)], "x: expected a number <= 0, got -inf"),
                               (1.0, unit, "x: expected a number in (0, 1), got 1.0"),
                               ([0.5], Annotated[list[Fraction], Length(2)],
                                "x: expected 2 numbers in [0, 1), got [0.5]"),
                               ([0.5, 2], Annotated[list[Fraction], Length(2)],
                                "x[1]: expected a number in [0, 1), got 2"),
                               (0, PositiveInt | None, "x: expected an integer >= 1 or null, got 0"),
                               (-10**400, PositiveInt, f"x: expected an integer >= 1, got {-10**400}"),
                               ("a", PositiveInt | None, "x: expected int or null, got 'a'")]:
        with pytest.raises(ConfigError) as info:
            check_type(value, tp, "x")
        assert str(info.value) == message


def _dropout_model(width: PositiveInt, dropout: Fraction = 0.0) -> None:
    """A stand-in constructor with ranges on its annotations."""


def test_constructor_annotations_carry_ranges():
    assert check_arguments(_dropout_model, {"width": 2, "dropout": 0.5}, "model") == {"width": 2, "dropout": 0.5}
    with pytest.raises(ConfigError, match=r"^model\.dropout: expected a number in \[0, 1\), got 1$"):
        check_arguments(_dropout_model, {"width": 2, "dropout": 1}, "model")
