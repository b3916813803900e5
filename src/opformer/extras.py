"""The optional extras of ``pip install 'opformer[EXTRA]'``: a module of one imported when it is first needed, or
one line naming the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from opformer.errors import ConfigError


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """``module`` imported; if it is missing, ``ConfigError``: ``PURPOSE: the PACKAGE package is missing; pip install
    'opformer[EXTRA]'``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.split(".")[0]
        raise ConfigError(f"{purpose}: the {package} package is missing; pip install 'opformer[{extra}]'") from None
