"""A missing optional extra is one line naming what to install."""

import sys

import pytest

from opformer.errors import ConfigError
from opformer.extras import require


def test_a_present_module_is_returned():
    assert require("yaml", "core", "configs").safe_load("a: 1") == {"a": 1}


def test_a_missing_extra_names_the_package_and_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails as if not installed
    with pytest.raises(ConfigError, match=r"^hf:// sources: the huggingface_hub package is missing; "
                                          r"pip install 'opformer\[hub\]'$"):
        from opformer.imports.hub import download, parse

        download(parse("hf://owner/name/file.pth", None))
