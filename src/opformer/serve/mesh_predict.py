"""Predictions of a mesh run: :class:`MeshForecaster` (what ``opformer.load_surrogate`` opens for a run of mesh
data) for mesh samples from Python, and ``opformer predict RUN --input MESH.h5 --output OUT.h5`` on a user's mesh
file: the run's input fields on the file's points (any point count per sample), written as a mesh file with the
predicted fields beside the inputs, a chunk of samples at a time; with ``--coverage`` each sample's calibrated
bounds as its settings ``bound_relative_l2``, ``band_half_width`` (the band is the prediction plus or minus it, at
every point and channel) and ``flagged`` (1: the input is unlike the calibration's, the bounds not guaranteed)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from opformer.data.mesh_splits import Rows, sample_rows
from opformer.data.store import MeshFile, write_mesh_dataset
from opformer.data.store.mesh import channel_names
from opformer.errors import ConfigError, DataError
from opformer.kinds import MESH, OPERATOR
from opformer.meshes import MeshSample
from opformer.models.inference import check_mesh_compatible, predict_mesh
from opformer.runs import Run
from opformer.runtime import resolve_device
from opformer.trust.mesh_calibration import MeshBounds, MeshCalibration, load_mesh_calibration

#: Samples read, predicted and written together by ``opformer predict`` on a mesh file.
CHUNK_SAMPLES = 64


class MeshForecaster:
    """A mesh run's surrogate applied to mesh samples, in physical units, ``batch_size`` samples padded together
    on ``device``; ``calibration`` (attached by :func:`open_mesh_forecaster` where the run has one) gives the
    bounds."""

    kind = MESH

    def __init__(self, run: Run, device: torch.device, batch_size: int,
                 calibration: MeshCalibration | None = None) -> None:
        self.run, self.device, self.batch_size, self.calibration = run, device, batch_size, calibration
        self.surrogate = run.surrogate.to(device).eval()
        self.source = str(run.checkpoint())
        data = self.surrogate.spec["data"]
        self.input_channels, self.target_channels = list(data["input_channels"]), list(data["target_channels"])
        # runs trained before the spec kept field names: each channel its own field
        self.target_fields = [tuple(f) for f in data.get("target_fields") or [(c, 1) for c in self.target_channels]]

    def rows(self, sample: MeshSample) -> Rows:
        """A sample's rows: the run's input channels gathered by name from its fields (a field of ``c`` channels
        ``u`` gives ``u_0 .. u_{c-1}``, one channel its name), its points and normalised weights."""
        n = len(sample.points)
        channels: dict[str, np.ndarray] = {}
        for name, value in sample.fields.items():
            value = np.asarray(value).reshape(n, -1)
            for k, channel in enumerate(channel_names([(name, value.shape[-1])])):
                channels[channel] = value[:, k:k + 1]
        absent = [c for c in self.input_channels if c not in channels]
        if absent:
            raise DataError(f"a mesh sample lacks the input channel {absent[0]!r} that {self.source} takes (fields: "
                            f"{', '.join(sample.fields) or 'none'}; inputs {self.input_channels})")
        gathered = MeshSample(points=sample.points, fields={c: channels[c] for c in self.input_channels},
                              cells=sample.cells, cell_kind=sample.cell_kind, weights=sample.weights,
                              weights_from=sample.weights_from)
        return sample_rows(gathered, self.input_channels, [])

    def predict(self, samples: MeshSample | Sequence[MeshSample]) -> np.ndarray | list[np.ndarray]:
        """The predicted targets ``(points, target channels)`` of a sample (a list for a list), float32."""
        one = isinstance(samples, MeshSample)
        rows = [self.rows(s) for s in ([samples] if one else samples)]
        out = [p.numpy() for p in predict_mesh(self.surrogate, rows, self.batch_size, self.device)]
        return out[0] if one else out

    def bounds(self, sample: MeshSample, prediction: np.ndarray, coverage: float = 0.9) -> MeshBounds:
        """The calibrated bounds at ``coverage`` of ``prediction`` for ``sample`` (a one-line error where the run
        is not calibrated)."""
        if self.calibration is None:
            raise ConfigError(f"{self.run.path}: not calibrated; run `opformer calibrate {self.run.path}` first")
        return self.calibration.bounds(self.rows(sample), torch.as_tensor(prediction), coverage)

    def split_targets(self, prediction: np.ndarray) -> dict[str, np.ndarray]:
        """A prediction ``(points, channels)`` as the run's target fields by name."""
        fields, start = {}, 0
        for name, count in self.target_fields:
            fields[name] = prediction[:, start:start + count]
            start += count
        return fields


def open_mesh_forecaster(run: Run, device: str = "auto", batch_size: int | None = None, calibrated: bool = False
                         ) -> MeshForecaster:
    """A mesh run's forecaster, with its calibration where ``calibrated``."""
    return MeshForecaster(run, resolve_device(device), run.eval_batch_size(batch_size),
                          load_mesh_calibration(run) if calibrated else None)


def predict_mesh_file(run: Run, input_path: str | os.PathLike, output_path: str | os.PathLike,
                      batch_size: int | None = None, device: str = "auto", coverage: float | None = None) -> Path:
    """Apply a mesh run to every sample of the mesh file ``input_path`` and write ``output_path`` (HDF5) atomically:
    each sample's mesh and input fields with the predicted target fields (and, with ``coverage``, its bounds as
    settings; see the module docstring)."""
    src, out = Path(input_path), Path(output_path)
    if out.resolve() == src.resolve():
        raise ConfigError(f"--output {output_path}: would overwrite the input file")
    if out.suffix.lower() not in (".h5", ".hdf5"):
        raise ConfigError(f"--output {output_path}: a mesh run's predictions are a mesh file; name it .h5")
    forecaster = open_mesh_forecaster(run, device, batch_size, calibrated=coverage is not None)
    if coverage is not None:
        forecaster.calibration.quantiles(coverage)  # a bad level: one line before anything is read
    with MeshFile(src) as data:
        info = data.info
        check_mesh_compatible(forecaster.surrogate, info, forecaster.source, targets=False)
        if info.mesh["task"] != OPERATOR:
            raise DataError(f"{src}: holds mesh trajectories; {forecaster.source} maps operator inputs")
        inputs = [name for name, _ in info.mesh["inputs"]]
        clash = [name for name, _ in forecaster.target_fields if name in inputs]
        if clash:
            raise DataError(f"{src}: its input field {clash[0]!r} has the name of a predicted field")
        pde = dict(info.pde)

        def predicted() -> Iterator[MeshSample]:
            for start in range(0, len(data), CHUNK_SAMPLES):
                samples = [data.sample(i) for i in range(start, min(start + CHUNK_SAMPLES, len(data)))]
                for sample, pred in zip(samples, forecaster.predict(samples)):
                    fields = {name: sample.fields[name] for name in inputs} | forecaster.split_targets(pred)
                    settings = dict(sample.settings)
                    if coverage is not None:
                        bounds = forecaster.bounds(sample, pred, coverage)
                        settings |= {"bound_relative_l2": bounds.relative_l2,
                                     "band_half_width": bounds.band_half_width, "flagged": float(bounds.flagged)}
                    yield replace(sample, fields=fields, settings=settings)

        return write_mesh_dataset(out, predicted(), inputs=inputs, targets=[n for n, _ in forecaster.target_fields],
                                  pde=str(pde.pop("name", "")), settings=pde, force=True,
                                  extra={"predicted_by": forecaster.source})
