"""The package outside the repository: a wheel built from the tree, installed where the source tree is not seen,
lists its recipes and runs one end to end (generate, train a packaged recipe, predict, calibrate)."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from opformer import __version__
from opformer.recipes import RECIPES, describe, recipe_names, recipe_path

ROOT = Path(__file__).resolve().parents[1]


def test_every_config_of_the_repository_is_a_packaged_recipe():
    in_repository = sorted(p.relative_to(ROOT / "configs").with_suffix("").as_posix()
                           for p in (ROOT / "configs").glob("*/*.yaml"))
    assert in_repository == recipe_names() and "burgers/gt" in in_repository
    assert recipe_path("burgers/gt") == recipe_path("gt-burgers") == RECIPES / "burgers" / "gt.yaml"
    assert recipe_path("kolmogorov_factformer_lm") == RECIPES / "factformer" / "kolmogorov_factformer_lm.yaml"
    gt = describe("burgers/gt")
    assert (gt.model, gt.data) == ("gt_burgers", "data/burgers.h5") and "Table 2a" in gt.reproduces
    assert describe("mixture/dpot_micro").data.startswith("mixture of ")


def test_a_path_stays_a_path_and_an_unknown_name_is_one_line(tmp_path):
    from opformer.errors import ConfigError

    assert recipe_path(tmp_path / "mine.yaml") == tmp_path / "mine.yaml"
    with pytest.raises(ConfigError, match=r"^burgers/gtx: neither a config file nor a packaged recipe; did you mean "
                                          r"burgers/gt"):
        recipe_path("burgers/gtx")


@pytest.mark.slow
def test_a_wheel_installed_without_the_source_tree_trains_a_packaged_recipe(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", str(ROOT),
                    "-w", str(wheels)], check=True, cwd=tmp_path, capture_output=True)
    (wheel,) = wheels.glob("opformer-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)
    # the dependencies (torch, numpy, ...) from this environment, after the wheel: its own .pth files, the
    # editable install of the source tree among them, are not read from there
    (site / "zz_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    work = tmp_path / "work"
    work.mkdir()

    def opformer(*args: str) -> str:
        done = subprocess.run([python, "-m", "opformer", *args], cwd=work, env=env, capture_output=True, text=True)
        assert done.returncode == 0, (args, done.stderr[-2000:])
        return done.stdout

    where = subprocess.run([python, "-c", "import opformer; print(opformer.__file__)"], cwd=work, env=env,
                           check=True, capture_output=True, text=True).stdout
    assert where.startswith(str(site)) and str(ROOT) not in where
    assert opformer("--version").strip() == f"opformer {__version__}"
    assert "burgers/gt " in opformer("recipes")
    assert opformer("recipes", "show", "burgers/gt").startswith("# Burgers")
    opformer("generate", "burgers", "--samples", "24", "--resolution", "256", "--out", "burgers.h5")
    opformer("train", "burgers/gt", "--out", "run", "--set", "data.path=burgers.h5", "--set", "data.resolution=64",
             "--set", "data.n_train=12", "--set", "data.n_val=4", "--set", "data.n_test=8", "--set", "train.epochs=1",
             "--set", "model.n_layers=1", "--set", "train.batch_size=4")
    assert (work / "run" / "best.pt").exists()
    opformer("predict", "run", "--input", "burgers.h5", "--output", "prediction.h5")
    assert (work / "prediction.h5").exists()
    opformer("calibrate", "run")
    assert (work / "run" / "calibration.pt").exists()
