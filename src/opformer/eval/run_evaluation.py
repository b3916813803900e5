"""``evaluate(run, ...)``: any run evaluated, by its kind (:attr:`opformer.runs.Run.kind`): the one entry point of
``opformer evaluate``.

- *operator* and *trajectory* runs, and imported operator weights: :func:`opformer.eval.evaluate.evaluate_run` on
  one data file (the run's own by default) at one or several resolutions;
- *mixture* runs without a data file: :func:`opformer.eval.mixture.evaluate_mixture`, a row per member (with a data
  file, the file alone: refused, as a mixture model's members have other grids and channels);
- *mesh* runs: :func:`opformer.eval.mesh_evaluation.evaluate_mesh_run`, the quadrature-weighted relative L2
  beside the plain one on one split of a mesh file (the run's own by default);
- *imported* trajectory weights (:attr:`opformer.runs.Run.as_member`): :func:`opformer.eval.mixture.evaluate_file`,
  the file as one member of a mixture, on its stored grid.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opformer.errors import ConfigError
from opformer.eval.evaluate import evaluate_run, format_table, format_well_table
from opformer.eval.mixture import evaluate_file, evaluate_mixture, format_mixture_table
from opformer.eval.mesh_evaluation import evaluate_mesh_run, format_mesh_table
from opformer.kinds import IMPORTED, MESH, MIXTURE
from opformer.runs import Run


@dataclass
class Evaluation:
    """What :func:`evaluate` found: the ``rows`` (per resolution, or per member), the data file they are on (None:
    the mixture's members), the ``split``, the plain-text ``table`` and ``notes`` (what was padded or resized)."""

    rows: list[dict[str, Any]]
    data: str | None
    split: str
    table: str
    notes: list[str] = field(default_factory=list)


def evaluate(run: str | os.PathLike | Run, data: str | os.PathLike | None = None, *,
             resolutions: Sequence[int] | None = None, split: str | None = None, frames: int | None = None,
             paper_lengths: bool = False, well_windows: Sequence[tuple[int, int]] | None = None,
             input_noise: float | None = None, device: str = "auto") -> Evaluation:
    """The run's best checkpoint evaluated on ``data`` (default: the run's own data; required for imported weights)
    by its kind (see the module docstring).

    ``split`` defaults to ``all`` for imported weights (they saw none of the file), else ``test``; ``resolutions``
    (default the training resolution) only where one file is evaluated at the run's grid; ``frames``: rollout
    length; ``paper_lengths``: DPOT's rollout lengths per member; ``well_windows``: The Well's metrics over those
    windows; ``input_noise``: operator pairs evaluated at another noise level. An option the run's kind does not
    take is a one-line ``ConfigError``.
    """
    run = Run.open(run)
    kind = run.kind
    imported = run.imported
    if kind == IMPORTED and data is None:
        raise ConfigError(f"{run.path}: holds {imported.format} weights imported from {imported.source}; give the "
                          "data to evaluate them on with --data FILE")
    split = split or ("all" if kind == IMPORTED else "test")  # imported weights saw none of the file
    per_member = run.as_member or (kind == MIXTURE and data is None)
    if well_windows is not None and per_member:
        raise ConfigError("--metrics well: for runs evaluated on one data file (not a mixture run's members, not "
                          "imported trajectory weights)")
    if input_noise is not None and per_member:
        raise ConfigError("--input-noise: for runs evaluated on one file of operator pairs (not a mixture run's "
                          "members, not imported trajectory weights)")
    if kind == MESH:
        given = {"--resolutions": resolutions, "--frames": frames, "--paper-lengths": paper_lengths or None,
                 "--metrics well": well_windows, "--input-noise": input_noise}
        for option, value in given.items():
            if value is not None:
                raise ConfigError(f"{option}: for grid runs; {run.path} is a mesh run (evaluated on the file's points)")
        data = data or run.config.data.path
        rows = evaluate_mesh_run(run, data, split, device)
        return Evaluation(rows, str(data), split, format_mesh_table(rows, f"{run.path} on {data} ({split} split)"))
    if run.as_member:
        if resolutions is not None:
            raise ConfigError("--resolutions: imported trajectory weights are evaluated on the file's stored grid")
        rows = evaluate_file(run, data, split=split, frames=frames, paper_lengths=paper_lengths, device=device)
        title = f"{run.path} ({imported.format} weights of {imported.source}) on {data} ({split} split)"
        return Evaluation(rows, str(data), split, format_mixture_table(rows, title), list(rows[0]["notes"]))
    if kind == MIXTURE and data is None and resolutions is None:
        rows = evaluate_mixture(run, split=split, frames=frames, paper_lengths=paper_lengths, device=device)
        return Evaluation(rows, None, split,
                          format_mixture_table(rows, f"{run.path}: each member of its mixture ({split} split)"))
    if paper_lengths:
        raise ConfigError("--paper-lengths: only for runs trained on a mixture (evaluated without --data)")
    stored = run.config.data
    data, resolutions = data or stored.path, resolutions or [stored.resolution]
    rows = evaluate_run(run, data, resolutions, split=split, device=device, frames=frames,
                        well_windows=well_windows, input_noise=input_noise)
    table = format_table(rows, f"{run.path} on {data} ({split} split)")
    if well_windows is not None:
        table += "\n" + format_well_table(rows)
    return Evaluation(rows, str(data), split, table)
