"""A run directory opened for reading: the one way every command opens a run.

:class:`Run` reads each file of the directory once, when first asked: the resolved config (``config.yaml``), the
best checkpoint and the surrogate it stores, and the calibration record checked against that checkpoint (its
numbers become an :class:`opformer.trust.Calibration` in :mod:`opformer.trust`).
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import Any

from opformer.config import ImportedConfig, RunConfig, config_from_dict, safe_load_yaml
from opformer.data.mixture import MixtureMember, member_name
import torch

from opformer.errors import CheckpointError, ConfigError, StorageError
from opformer.io import atomic_replace, sha256_file
from opformer.kinds import IMPORTED, MESH, MIXTURE, OPERATOR, TRAJECTORY
from opformer.models.mesh_surrogate import MESH_LAYOUT
from opformer.models.surrogate import Surrogate
from opformer.runs.checkpoint import checksum, load_checkpoint, load_weights, surrogate_of
from opformer.runs.directory import CALIBRATION, CONFIG, run_checkpoint

#: What ``calibration.pt`` holds (written by :mod:`opformer.trust.storage`).
CALIBRATION_FORMAT, CALIBRATION_VERSION = "opformer-calibration", 1


def save_calibration_record(path: str | os.PathLike, meta: dict[str, Any], groups: dict[str, dict[str, Any]]
                            ) -> Path:
    """Write a calibration record atomically with its checksum: ``meta`` (JSON: kind, checkpoint checksum, source,
    chosen scores, physics) and ``groups`` (per data set, its tensors and numbers), as
    :meth:`Run.calibration_record` reads them back."""
    path = Path(path)
    payload: dict[str, Any] = {"format": CALIBRATION_FORMAT, "version": CALIBRATION_VERSION,
                               "meta": json.dumps(meta), "groups": groups}
    payload["checksum"] = checksum(payload)
    with atomic_replace(path) as tmp:
        try:
            torch.save(payload, tmp)
        except RuntimeError as exc:
            raise StorageError(f"{path}: could not be written ({str(exc).splitlines()[0][:120]})") from None
    return path



class Run:
    """The run directory ``path``: its config, kind, checkpoints, model, calibration record and members.

    Opening checks only that the folder exists; each file is read (and checked) on first use and kept.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise CheckpointError(f"{self.path}: no such run directory")

    @classmethod
    def open(cls, source: str | os.PathLike | Run) -> Run:
        """``source`` itself if it is a :class:`Run` already (its files read once), else the run at that path."""
        return source if isinstance(source, Run) else cls(source)

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @cached_property
    def config(self) -> RunConfig:
        """The resolved config stored in ``config.yaml``."""
        path = self.path / CONFIG
        if not path.is_file():
            raise CheckpointError(f"{self.path}: no {CONFIG} (not a run directory)")
        return config_from_dict(safe_load_yaml(path.read_text()))

    def checkpoint(self, which: str = "best") -> Path:
        """The path of the ``best`` or ``last`` checkpoint (a one-line error where absent)."""
        return run_checkpoint(self.path, which)

    @cached_property
    def payload(self) -> dict[str, Any]:
        """The best checkpoint, read and checked (:func:`opformer.runs.checkpoint.load_checkpoint`)."""
        return load_checkpoint(self.checkpoint())

    @cached_property
    def surrogate(self) -> Surrogate:
        """The best checkpoint's surrogate, in eval mode on the CPU."""
        return surrogate_of(self.payload, self.checkpoint())

    def model(self, which: str = "best") -> tuple[Surrogate, dict[str, Any]]:
        """The surrogate (eval mode, CPU) and the checkpoint payload of the ``best`` or ``last`` checkpoint."""
        if which == "best":
            return self.surrogate, self.payload
        path = self.checkpoint(which)
        payload = load_checkpoint(path)
        return surrogate_of(payload, path), payload

    @property
    def run_config(self) -> dict[str, Any]:
        """The run config the best checkpoint records (as a plain dict)."""
        return self.payload["run_config"]

    @property
    def imported(self) -> ImportedConfig | None:
        """Where imported weights came from; None for a run trained here."""
        return self.config.imported

    @property
    def members(self) -> list[MixtureMember]:
        """The mixture members the run trained on (none for a run of one data file)."""
        return [MixtureMember(**m) for m in self.run_config["data"].get("mixture") or []]

    def member_names(self) -> list[str]:
        """The names of :attr:`members`."""
        return [member_name(m) for m in self.members]

    @property
    def is_imported(self) -> bool:
        """Whether ``opformer import`` wrote the run (weights trained elsewhere)."""
        return bool(self.run_config.get("imported"))

    @property
    def is_mixture(self) -> bool:
        """Whether the run trained on a mixture of data files."""
        return bool(self.run_config["data"].get("mixture"))

    @property
    def data_kind(self) -> str:
        """The kind of data the model maps: ``operator``, ``trajectory`` or ``mesh`` (operator pairs on meshes)."""
        data = self.surrogate.spec["data"]
        return MESH if data.get("layout") == MESH_LAYOUT else TRAJECTORY if "t_in" in data else OPERATOR

    @property
    def kind(self) -> str:
        """``imported``, ``mixture``, else the kind of its data (``operator``, ``trajectory`` or ``mesh``)."""
        return IMPORTED if self.is_imported else MIXTURE if self.is_mixture else self.data_kind

    def eval_batch_size(self, batch_size: int | None = None) -> int:
        """Samples per model call: ``batch_size``, else the run's ``train.eval_batch_size`` (a one-line error below
        1)."""
        batch = batch_size or self.run_config["train"]["eval_batch_size"]
        if batch < 1:
            raise ConfigError(f"--batch-size {batch}: expected at least 1")
        return batch

    @property
    def as_member(self) -> bool:
        """Whether a data file is evaluated, plotted and forecast as one member of a mixture for this run: imported
        trajectory weights (channels zero-padded to the model's, errors on the file's stored grid; a model whose
        weights fix its grid sees frames resized to it)."""
        return self.kind == IMPORTED and self.data_kind == TRAJECTORY

    def require_mixture(self) -> None:
        """A one-line error unless the run trained on a mixture."""
        if not self.is_mixture:
            raise ConfigError(f"{self.path}: not trained on a mixture of data sets")

    @cached_property
    def checkpoint_checksum(self) -> str:
        """The best checkpoint's identity: its stored checksum, else (written before checksums) its file's."""
        return str(self.payload.get("checksum") or sha256_file(self.checkpoint()))

    @property
    def calibration_path(self) -> Path:
        """Where the run's calibration is stored."""
        return self.path / CALIBRATION

    @property
    def calibrated(self) -> bool:
        """Whether the run has a calibration file."""
        return self.calibration_path.is_file()

    def calibration_record(self) -> dict[str, Any]:
        """The stored calibration, read as the checkpoints are (no code unpickled), checked against its contents'
        checksum and against the best checkpoint; its ``meta`` decoded. One-line :class:`CheckpointError`
        otherwise."""
        path = self.calibration_path
        if not path.is_file():
            raise CheckpointError(f"{self.path}: not calibrated (no {CALIBRATION}); run `opformer calibrate "
                                  f"{self.path}` first")
        record = load_weights(path, "calibration", "; run `opformer calibrate` again")
        if not isinstance(record, dict) or record.get("format") != CALIBRATION_FORMAT:
            raise CheckpointError(f"{path}: not an opformer calibration")
        if record.get("checksum") != checksum(record):
            raise CheckpointError(f"{path}: corrupt (its checksum does not match its contents); run `opformer "
                                  "calibrate` again")
        meta = json.loads(record["meta"])
        current = self.checkpoint_checksum
        if current != meta["checkpoint_checksum"]:
            raise CheckpointError(f"{path}: calibrates another checkpoint (checksum "
                                  f"{meta['checkpoint_checksum'][:12]}), not {self.checkpoint()} ({current[:12]}); "
                                  f"run `opformer calibrate {self.path}` again")
        return {**record, "meta": meta}
