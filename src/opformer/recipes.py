"""The packaged recipes: the YAML run configs of the papers' experiments, shipped inside the package
(``opformer/configs/``, the repository's ``configs/``) so that an installed ``opformer`` can list, show and train them.

A recipe is named by its folder and stem, ``burgers/gt``; a unique stem (``kolmogorov_factformer_lm``) and the
stem before the folder (``gt-burgers``) name it too. A path to a YAML file is always taken as that file.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import yaml

from opformer.errors import ConfigError

#: Where the recipes lie in the installed package.
RECIPES = Path(__file__).parent / "configs"


@dataclass(frozen=True)
class Recipe:
    """One packaged recipe: its ``name`` (``folder/stem``), file, model, data and what it reproduces (the first
    line of its header comment)."""

    name: str
    path: Path
    model: str
    data: str
    reproduces: str


def recipe_names() -> list[str]:
    """Every packaged recipe's name, sorted."""
    return sorted(path.relative_to(RECIPES).with_suffix("").as_posix() for path in RECIPES.glob("*/*.yaml"))


def recipe_path(spec: str | Path) -> Path:
    """The YAML file ``spec`` names: an existing path or one ending in ``.yaml``/``.yml`` as it is, else a
    recipe's name. ``ConfigError`` names the closest recipes when none matches."""
    path = Path(spec)
    if path.exists() or path.suffix in (".yaml", ".yml"):
        return path
    names = recipe_names()
    text = str(spec).strip("/")
    if text in names:
        return RECIPES / f"{text}.yaml"
    stem, _, folder = text.rpartition("-")
    if stem and f"{folder}/{stem}" in names:
        return RECIPES / folder / f"{stem}.yaml"
    by_stem = [name for name in names if name.rpartition("/")[2] == text]
    if len(by_stem) == 1:
        return RECIPES / f"{by_stem[0]}.yaml"
    close = by_stem or difflib.get_close_matches(text, names, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `opformer recipes` lists them"
    raise ConfigError(f"{spec}: neither a config file nor a packaged recipe{hint}")


def describe(name: str) -> Recipe:
    """The recipe ``name``: its model (preset or name), data (file, or the members of a mixture) and header line."""
    path = recipe_path(name)
    text = path.read_text()
    config = yaml.safe_load(text) or {}
    model = config.get("model") or {}
    data = config.get("data") or {}
    members = data.get("mixture") or []
    comment = next((line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#")), "")
    return Recipe(name=path.relative_to(RECIPES).with_suffix("").as_posix(), path=path,
                  model=str(model.get("preset") or model.get("name") or "?"),
                  data=f"mixture of {len(members)}" if members else str(data.get("path", "?")), reproduces=comment)
