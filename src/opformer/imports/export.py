"""``opformer export RUN DIR``: a run as a Hub-style model repository that others can load (``opformer import
opformer``, :mod:`opformer.imports.repository`, reads one back as a run directory).

The repository (format ``opformer-model``, :data:`FORMAT_VERSION`)::

    DIR/model.safetensors  the surrogate's tensors: the model's weights and the normalizers' mean and std
                           (safetensors: raw tensors and a JSON header, nothing to unpickle)
    DIR/config.json        format and format_version, the opformer version that wrote it, the surrogate's
                           spec (model config, normalization, data signature: channels, grid, boundary), the
                           run config, the data file's description (PDE, solver, domain), training (epoch,
                           best validation error, history, summary, sessions), test metrics if given, and the
                           SHA-256 of model.safetensors
    DIR/calibration.safetensors  where the run is calibrated (``opformer calibrate``): the calibration's tensors
                           (sorted scores, statistics, estimates), its SHA-256 and the rest of it (the chosen
                           scores, physics settings, what it was calibrated on) in config.json's ``calibration``;
                           a calibration of another checkpoint is left out, config.json saying why
    DIR/README.md          a model card (Hub metadata, model, data, training command, metrics, how to load it)
    DIR/model.onnx         with ``--format onnx``: the surrogate as an ONNX graph for onnxruntime
                           (:mod:`opformer.imports.onnx_graph`; config.json's ``onnx`` describes it, the card shows
                           how to run it)

The folder is written atomically (a temporary sibling renamed into place).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from torch import Tensor

from opformer import __version__
from opformer.data.store import read_info
from opformer.errors import CheckpointError, ConfigError, OpformerError
from opformer.imports.onnx_graph import GRAPH, INPUT, OUTPUT, input_shapes, onnx_modules, write_graph
from opformer.io import atomic_folder, atomic_replace, read_json, sha256_file, write_atomic
from opformer.models.mesh_surrogate import MESH_LAYOUT
from opformer.models.surrogate import Surrogate
from opformer.runs import SUMMARY, Run, finite_json, recorded_sessions

FORMAT = "opformer-model"
#: the version this opformer writes; it reads every version up to it
FORMAT_VERSION = 1
WEIGHTS, CONFIG_JSON, CARD = "model.safetensors", "config.json", "README.md"
CALIBRATION_TENSORS = "calibration.safetensors"
#: what ``opformer export --format`` writes besides the repository: nothing more, or an ONNX graph
EXPORT_FORMATS = ("safetensors", "onnx")


def safetensors_module() -> ModuleType:
    """The safetensors package (a one-line error where it is not installed)."""
    try:
        import safetensors.torch
    except ImportError:
        raise ConfigError("model repositories need the safetensors package: pip install safetensors") from None
    return safetensors


def _unshared(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """The tensors contiguous on the CPU, each owning its storage (safetensors refuses shared memory)."""
    out, seen = {}, set()
    for key, tensor in state.items():
        tensor = tensor.detach().cpu().contiguous()
        storage = tensor.untyped_storage()
        if storage.data_ptr() in seen or storage.nbytes() != tensor.numel() * tensor.element_size():
            tensor = tensor.clone()
        seen.add(tensor.untyped_storage().data_ptr())
        out[key] = tensor
    return out


def data_description(run_config: dict[str, Any]) -> dict[str, Any]:
    """The training data file's self-description (kind, samples, PDE, solver, domain) where it can be read;
    else only its path (a mixture: its members' paths)."""
    data = run_config.get("data", {})
    path = data.get("path")
    described: dict[str, Any] = {"path": path}
    if data.get("mixture"):
        described["mixture"] = [member.get("path") for member in data["mixture"]]
    if path and Path(path).is_file():
        try:
            info = read_info(path)
        except OpformerError:
            return described
        described.update(kind=info.kind, samples=info.n_samples, stored_shape=list(info.spatial_shape),
                         pde=info.pde, solver=info.solver, domain=info.domain)
    return described


def calibration_export(run: Run) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """config.json's ``calibration`` entry of a run and the tensors of :data:`CALIBRATION_TENSORS` (none where the
    run has no calibration of its best checkpoint: the entry then says why). The tensors are keyed
    ``"<group index>/<key>"`` in the order of the entry's ``groups``; a group's other values (numbers) are in its
    ``values``."""
    if not run.calibrated:
        return {"included": False, "why": "the run is not calibrated (opformer calibrate RUN)"}, {}
    try:
        record = run.calibration_record()
    except CheckpointError as exc:
        return {"included": False, "why": str(exc)}, {}
    names = list(record["groups"])
    tensors = {f"{i}/{key}": value for i, name in enumerate(names) for key, value in record["groups"][name].items()
               if isinstance(value, Tensor)}
    values = [{key: value for key, value in record["groups"][name].items() if not isinstance(value, Tensor)}
              for name in names]
    return {"included": True, "format": record["format"], "version": record["version"], "meta": record["meta"],
            "groups": names, "values": values}, _unshared(tensors)


def export_run(run_dir: str | os.PathLike, out: str | os.PathLike, metrics: str | os.PathLike | None = None,
               export_format: str = "safetensors", opset: int | None = None) -> Path:
    """Write the best checkpoint of ``run_dir`` as the model repository ``out`` (absent or empty; see the
    module docstring); ``metrics``: an ``opformer evaluate --json`` file whose results go into the card;
    ``export_format`` ``"onnx"``: the ONNX graph too (``opset``: its opset, else the exporter's default)."""
    run_dir, out = Path(run_dir), Path(out)
    if export_format not in EXPORT_FORMATS:
        raise ConfigError(f"--format {export_format}: expected one of {', '.join(EXPORT_FORMATS)}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CheckpointError(f"{out}: exists and is not an empty folder; choose a new or empty one")
    run = Run(run_dir)
    surrogate, payload = run.surrogate, run.payload
    results = None
    if metrics is not None:
        evaluated = read_json(Path(metrics))
        if not isinstance(evaluated, dict) or not isinstance(evaluated.get("results"), list):
            raise ConfigError(f"--metrics {metrics}: expected the JSON file of opformer evaluate --json")
        results = {k: evaluated.get(k) for k in ("data", "split")} | {"results": evaluated["results"]}
    summary = read_json(run_dir / SUMMARY)
    config = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "opformer_version": __version__,
        "spec": surrogate.spec, "run_config": payload["run_config"],
        "data": data_description(payload["run_config"]),
        "training": {"epoch": payload["epoch"], "best_val_relative_l2": payload["best_val"],
                     "history": payload["history"], "summary": summary if isinstance(summary, dict) else None,
                     "sessions": recorded_sessions(run_dir)},
        "metrics": results,
    }
    state = _unshared(surrogate.state_dict())
    calibration, calibration_tensors = calibration_export(run)
    with atomic_folder(out) as tmp:
        if export_format == "onnx":
            config["onnx"] = write_onnx(surrogate, tmp / GRAPH, opset)
        _save_tensors(tmp / WEIGHTS, state)
        config["weights_sha256"] = sha256_file(tmp / WEIGHTS)
        if calibration_tensors:
            _save_tensors(tmp / CALIBRATION_TENSORS, calibration_tensors)
            calibration["sha256"] = sha256_file(tmp / CALIBRATION_TENSORS)
        config["calibration"] = calibration
        write_atomic(tmp / CONFIG_JSON, json.dumps(finite_json(config), indent=2, allow_nan=False) + "\n")
        write_atomic(tmp / CARD, model_card(config, sum(p.numel() for p in surrogate.model.parameters())))
    return out


def _save_tensors(path: Path, tensors: dict[str, Tensor]) -> None:
    """``tensors`` as the safetensors file ``path``, written atomically with ordinary permissions."""
    size = sum(t.numel() * t.element_size() for t in tensors.values())
    with atomic_replace(path, size=size) as tmp:
        mode = tmp.stat().st_mode  # ordinary permissions, which safetensors' own file lacks
        safetensors_module().torch.save_file(tensors, str(tmp), metadata={
            "format": FORMAT, "format_version": str(FORMAT_VERSION)})
        tmp.chmod(mode)


def write_onnx(surrogate: Surrogate, path: Path, opset: int | None) -> dict[str, Any]:
    """The graph ``path`` (checked in onnxruntime) and its description for config.json."""
    error = write_graph(surrogate, path, opset)
    graph = onnx_modules()[0].load(str(path), load_external_data=False)
    return {"file": GRAPH, "opset": next(o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")),
            "input": INPUT, "output": OUTPUT, "input_shape": input_shapes(surrogate)[INPUT],
            "inputs": input_shapes(surrogate),
            "relative_l2_vs_torch": error, "sha256": sha256_file(path)}


def onnx_card(config: dict[str, Any]) -> list[str]:
    """The card's lines on the ONNX graph: what it takes and gives, and how to run it in Python, C++ and C#."""
    graph, signature = config["onnx"], config["spec"]["data"]
    inputs = graph.get("inputs", {graph["input"]: graph["input_shape"]})
    shape = ", ".join(map(str, graph["input_shape"]))
    mesh = "pos" in inputs
    axes = ("The batch and point axes are free: a padded batch, `pos` the points' coordinates, `weights` their "
            "quadrature weights (summing to 1 over each sample's points, 0 on padding), `mask` (bool) True on real "
            "points" if mesh else "The batch axis is free, the grid is the one above")
    example = {name: ", ".join("1" if a == "batch" else "100" if a == "points" else str(a) for a in dims)
               for name, dims in inputs.items()}
    fill = {"weights": "np.full(({}), 0.01, dtype=np.float32)", "mask": "np.ones(({}), dtype=bool)"}
    feeds = [f"{name} = {fill.get(name, 'np.zeros(({}), dtype=np.float32)').format(example[name])}"
             + ("  # your inputs" if name == graph["input"] else "") for name in inputs]
    return ["", "## Run it without opformer: `model.onnx`", "",
            f"The whole surrogate (normalizers inside) as an ONNX graph (opset {graph['opset']}): input "
            f"`{graph['input']}` of shape `({shape})` in physical units, its last axis the channels "
            f"{', '.join(signature['input_channels']) or '(none: the coordinates alone)'}; output "
            f"`{graph['output']}`, its last axis the channels {', '.join(signature['target_channels'])}; float32. "
            f"{axes}. onnxruntime's output differed from torch's by a relative L2 of "
            f"{graph['relative_l2_vs_torch']:.2g} at export; the graph's metadata_props hold the channels, grid "
            "and `t_in`.", "",
            "```python", "import numpy as np, onnxruntime as ort",
            'session = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])', *feeds,
            f'y = session.run(["{graph["output"]}"], {{{", ".join(f"{n!r}: {n}" for n in inputs)}}})[0]', "```", "",
            "C++ (`onnxruntime_cxx_api.h`), in outline: `Ort::Env env; Ort::Session session(env, \"model.onnx\", "
            "Ort::SessionOptions{});` then `session.Run(Ort::RunOptions{}, {\"x\"}, &input, 1, {\"y\"}, 1)` with "
            "`input = Ort::Value::CreateTensor<float>(memory_info, data, size, shape, rank)`.", "",
            "C# (`Microsoft.ML.OnnxRuntime`), in outline: `using var session = new InferenceSession(\"model.onnx\");` "
            "then `session.Run(new[] { NamedOnnxValue.CreateFromTensor(\"x\", new DenseTensor<float>(data, "
            "shape)) })`."]


def _value(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _kind(kind: Any) -> str:
    """A grid kind of a data signature (older signatures: periodic or not)."""
    return ("periodic" if kind else "closed") if isinstance(kind, bool) else str(kind)


def _settings(mapping: Any) -> str:
    if not isinstance(mapping, dict) or not mapping:
        return "not recorded"
    return ", ".join(f"{k} = {_value(v)}" for k, v in mapping.items() if not isinstance(v, (dict, list)))


def model_card(config: dict[str, Any], parameters: int) -> str:
    """The README.md of a model repository: Hub metadata, then the model, data, training, metrics and use."""
    spec, run, data, training = config["spec"], config["run_config"], config["data"], config["training"]
    model = spec["model"]["name"]
    signature = spec["data"]
    summary = training.get("summary") or {}
    command = next((s.get("command") for s in training.get("sessions", []) if s.get("command")), None)
    imported = run.get("imported")
    lines = ["---", "library_name: opformer", f"tags: [opformer, neural-operator, pde, {model}]", "---", "",
             f"# {model} surrogate (opformer)", "",
             f"Written by `opformer export` (opformer {config['opformer_version']}, format {FORMAT} version "
             f"{config['format_version']}). Load it with `opformer import opformer hf://OWNER/NAME --out RUN` "
             "(or a local copy of this folder), then `opformer evaluate RUN --data FILE` or "
             "`opformer predict RUN ...`.", "",
             "## Model", "",
             f"- `{model}`, {parameters:,} parameters; its full configuration is `spec.model` in config.json",
             f"- normalization: input `{spec['normalize_input']}`, target `{spec['normalize_target']}` (the "
             "statistics are in model.safetensors); output boundary condition: "
             f"`{spec.get('boundary', 'none')}`", "",
             "## Data", "",
             f"- inputs: {', '.join(signature['input_channels'])}; targets: {', '.join(signature['target_channels'])}",
             _mesh_line(signature) if signature.get("layout") == MESH_LAYOUT else
             f"- grid: {' x '.join(map(str, signature['stored_shape']))}, kinds "
             f"{', '.join(_kind(k) for k in signature.get('grid', signature['periodic']))}, lengths "
             f"{', '.join(_value(v) for v in signature.get('lengths', []))}",
             f"- mixture of {len(data['mixture'])} files: " + ", ".join(f"`{p}`" for p in data["mixture"])
             if data.get("mixture") else
             f"- file: `{data.get('path')}`" + (f" ({data['kind']}, {data['samples']} samples)" if "kind" in data
                                                 else " (not readable at export: no PDE settings recorded)")]
    if "pde" in data:
        lines += [f"- PDE: {_settings(data['pde'])}", f"- solver: {_settings(data['solver'])}"]
    lines += ["", "## Training", ""]
    if imported:
        lines.append(f"- weights imported from {imported['format']} file {imported['source']} "
                     f"(SHA-256 {imported['sha256']}), not trained by opformer")
    else:
        lines += [f"- command: `{command}`" if command else "- command: not recorded",
                  f"- epochs: {summary.get('epochs', training['epoch'] + 1)}, best epoch {summary.get('best_epoch')}, "
                  f"best validation relative L2 {_value(training['best_val_relative_l2'])}",
                  f"- seed {run.get('seed')}; the whole run config is `run_config` in config.json"]
    lines += ["", "## Test metrics", ""]
    metrics = config.get("metrics")
    if metrics:
        rows = [r for r in metrics["results"] if isinstance(r, dict)]
        columns = [k for k in dict.fromkeys(k for r in rows for k in r)
                   if all(not isinstance(r.get(k), (dict, list)) for r in rows)]
        lines += [f"On `{metrics.get('data')}`, split {metrics.get('split')}:", "",
                  "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(_value(r.get(k, "")) for k in columns) + " |" for r in rows]
    else:
        lines.append("Not given at export (`opformer export RUN DIR --metrics EVAL.json`, EVAL.json written by "
                     "`opformer evaluate RUN --json EVAL.json`).")
    lines += ["", "## Error bounds", "", _calibration_text(config.get("calibration"))]
    if config.get("onnx"):
        lines += onnx_card(config)
    return "\n".join(lines) + "\n"


def _mesh_line(signature: dict[str, Any]) -> str:
    """The model card's line on a mesh run's points."""
    return (f"- mesh: {signature['space_dim']}D points, any number per sample (the model's sums weighted by each "
            "mesh's quadrature weights, read from the mesh file)")


def _calibration_text(calibration: dict[str, Any] | None) -> str:
    """The model card's line on the calibration the repository carries (or why it carries none)."""
    if not calibration or not calibration.get("included"):
        why = (calibration or {}).get("why", "not recorded")
        return f"No calibration: {why}. Calibrate the imported run (`opformer calibrate RUN --data FILE`)."
    meta = calibration["meta"]
    source = meta.get("source", {})
    files = ", ".join(f"`{d.get('path')}`" for d in source.get("data", []) if isinstance(d, dict))
    chosen = ", ".join(f"{name + ': ' if name else ''}{c.get('score')}" for name, c in meta.get("chosen", {}).items()
                       ) or "quadrature-weighted relative_l2"  # a mesh run's calibration has one score
    return (f"Calibrated on {files or 'unrecorded files'} (split {source.get('split')}; per-sample score {chosen}); "
            f"the calibration is in `{CALIBRATION_TENSORS}`, checksummed in config.json, and the imported run keeps "
            "it: `opformer predict RUN --coverage 0.9` and `load_surrogate(RUN).bounds(...)` answer. Its guarantee "
            "holds for inputs drawn like that data.")
