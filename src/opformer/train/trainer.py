"""The one training loop for every model: epochs of mini-batches, validation-based model selection,
atomic checkpoints every epoch and exact resumption."""

from __future__ import annotations

import dataclasses
import math
import os
import time
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from opformer.config import RunConfig, config_from_dict, config_to_dict, grid_defaults
from opformer.data.normalize import fit_together
from opformer.errors import CheckpointError, ConfigError, TrainingDiverged
from opformer.models.registry import resolve_model_config
from opformer.models.surrogate import Surrogate
from opformer.runs import (CONFIG, Run, check_fresh, end_session, load_checkpoint, run_lock,
                           save_checkpoint, start_session, write_metrics, write_run_config, write_summary)
from opformer.runtime import (compile_cache, grad_scaler, process_age, release_freed_memory, retain_freed_memory,
                              set_matmul_precision)
from opformer.train.distributed import Context, check_batch, session
from opformer.train.optim import build_optimizer, build_scheduler, use_fused_update
from opformer.train.pipeline import Pipeline
from opformer.train.progress import Progress
from opformer.train.step import TrainStep, check_graphs
from opformer.train.strategies import StepDraws
from opformer.train.tasks import Task, make_task
from opformer.train.transfer import initialize


#: the ``torch.compile`` backend of ``train.compile`` (the tests use "eager", which builds no C++)
COMPILE_BACKEND = "inductor"


class Trainer:
    """Trains the surrogate described by a :class:`RunConfig` into a run directory.

    What the run directory holds is :mod:`opformer.runs`; ``best.pt`` is selected on the validation error
    (the test split is never looked at during training). Each epoch reseeds the RNG from ``seed + epoch``, so
    a resumed run reproduces an uninterrupted one exactly.

    With a ``context`` of several processes (:mod:`opformer.train.distributed`) every process trains the
    model wrapped in DistributedDataParallel on its rows of each global batch, validates its shard of the
    validation split, and only the main process writes the run directory.
    """

    def __init__(self, config: RunConfig, run_dir: str | os.PathLike, context: Context | None = None) -> None:
        self.config = config
        self.run_dir = Path(run_dir)
        if config.train.num_threads:
            torch.set_num_threads(config.train.num_threads)
        if config.train.retain_freed_memory:
            retain_freed_memory()
        torch.set_flush_denormal(config.train.flush_denormal)  # process-wide, as the thread count
        self.context = context or Context.local(config.train.device)
        check_batch(config.train.batch_size, self.context.world)
        self.device = self.context.device
        self.task: Task = make_task(config)
        data, data_spec = config.data, self.task.spec_data()
        periodic = data_spec.get("periodic")  # None: mesh data, no grid
        model = config.model if periodic is None else grid_defaults(config.model, periodic)
        if (self.run_dir / "last.pt").is_file() and (self.run_dir / CONFIG).is_file():
            # a resumed run keeps the grid keys it was trained with: none that its config.yaml, written before them,
            # leaves out (it evaluates and resumes as it was trained)
            stored = Run(self.run_dir).config.model
            model = {k: v for k, v in model.items() if k in config.model or k in stored}
        self.config = config = dataclasses.replace(config, model=model)
        spec = {
            "model": dict(config.model),
            "normalize_input": data.normalize_input,
            "normalize_target": data.normalize_target,
            "data": data_spec,
            "boundary": data.boundary,
        }
        torch.manual_seed(config.seed)  # the initial weights depend on the seed only
        self.surrogate = Surrogate.from_spec(spec)
        spec["model"] = self.surrogate.model.config  # defaults filled in
        self._check_data_fit()
        self.init_note = ""  # what the init section copied, logged when training starts
        if config.init.checkpoint and not (self.run_dir / "last.pt").is_file():  # resumed: its own weights
            self.init_note = initialize(self.surrogate.model, config.init)
        fit_together(self.task.normalizer_chunks(), self.surrogate.input_normalizer, self.surrogate.target_normalizer)
        if config.loss.normalized:  # the other tasks refuse it
            self.task.normalize_loss(self.surrogate.target_normalizer)
        self.surrogate.to(self.device)
        set_matmul_precision(config.train.matmul_precision)
        self.model = self.context.wrap(self.surrogate)  # what the training steps call
        if config.train.compile:  # the surrogate (saved, validated) stays uncompiled: no _orig_mod. in state dicts
            compile_cache()
            self.model = torch.compile(self.model, backend=COMPILE_BACKEND)
        if config.train.cuda_graphs:
            check_graphs(self.device, config.train.precision)
            if self.context.world > 1:
                raise ConfigError("train.cuda_graphs: one process only (a data-parallel step all-reduces outside "
                                  "the graph); set it to false or train with one process")
        self.pipeline = Pipeline(self.task, self.context, config.data.device_memory_gb, config.data.workers)
        self.optimizer = build_optimizer(self.surrogate.parameters(), config.optim)
        self.scaler = grad_scaler(config.train.precision, self.device)
        steps = self.task.steps_per_epoch()
        self.scheduler = build_scheduler(self.optimizer, config.schedule, config.train.epochs * steps, steps)
        self.device_reads = 0  # reads of device values by the training loop (its log points)
        self.stepped = False  # whether this session has made a step
        self.history: list[dict[str, float]] = []
        self.best_val = math.inf
        self.start_epoch = 0

    def _check_data_fit(self) -> None:
        """The model's channels (or more, where the surrogate pads them), domain, grid and output shape must be
        those of the data."""
        model_cfg = self.surrogate.model.config
        info = self.task.info
        for key, names in (("in_channels", self.task.input_channels), ("out_channels", self.task.target_channels)):
            if model_cfg.get(key) is not None and model_cfg[key] != len(names) + self.surrogate.padding:
                raise ConfigError(f"model.{key}: is {model_cfg[key]} but {info.path} has "
                                  f"{len(names)} ({', '.join(names)})")
        if info.ndim == 1:
            for key, value in (("length", info.domain["lengths"][0]), ("periodic", info.domain["periodic"][0])):
                if key in model_cfg and model_cfg[key] != value:
                    raise ConfigError(f"model.{key}: is {model_cfg[key]!r} but the domain of {info.path} "
                                      f"has {key} {value!r}")
        self.task.check_fit(self.surrogate)  # the model on the data's channels

    def resume(self) -> None:
        """Continue from ``last.pt`` of the run directory (a fresh start if no epoch was finished)."""
        path = self.run_dir / "last.pt"
        if not path.is_file():
            return
        payload = load_checkpoint(path)
        stored = {**payload["spec"], "model": resolve_model_config(payload["spec"]["model"])}  # + newer defaults
        if stored != self.surrogate.spec:
            raise CheckpointError(f"{path}: was written for another model or data set than {self.run_dir}/config.yaml")
        trained_for = payload["run_config"]["train"]["epochs"]
        extending = self.config.train.epochs != trained_for
        if extending and self.config.train.epochs <= payload["epoch"] + 1:
            raise ConfigError(f"train.epochs: {self.config.train.epochs} would not extend {self.run_dir}, which "
                              f"has trained {payload['epoch'] + 1} epochs")
        self._check_same_recipe(path, payload["run_config"], skip=("train", "epochs") if extending else None)
        self.surrogate.load_state_dict(payload["state_dict"])
        self.optimizer.load_state_dict(payload["training_state"]["optimizer"])
        use_fused_update(self.optimizer)
        if extending:  # the schedule of the longer run, at the step this run has reached
            with warnings.catch_warnings():  # stepping the schedule alone is the point here, not a mistake
                warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
                for _ in range((payload["epoch"] + 1) * self.task.steps_per_epoch()):
                    self.scheduler.step()
        else:
            self.scheduler.load_state_dict(payload["training_state"]["scheduler"])
        if payload["training_state"].get("scaler"):  # fp16 runs only (a disabled scaler's state is empty)
            self.scaler.load_state_dict(payload["training_state"]["scaler"])
        self.history = payload["history"]
        self.best_val = payload["best_val"]
        self.start_epoch = payload["epoch"] + 1

    def _check_same_recipe(self, path: Path, stored: dict[str, Any], skip: tuple[str, ...] | None = None) -> None:
        """The optimiser, schedule, loss, seed and the settings that shape the schedule must be the checkpoint's
        (but ``skip``: the epochs of a run being extended); keys added since it was written take their defaults."""
        current, stored = config_to_dict(self.config), config_to_dict(config_from_dict(stored))
        keys = [(section,) for section in ("optim", "schedule", "loss", "seed")]
        keys += [("train", key) for key in ("epochs", "batch_size", "grad_clip", "precision")]
        for key in (k for k in keys if k != skip):
            now, then = current, stored
            for part in key:
                now, then = now.get(part), (then or {}).get(part)
            if now != then:
                raise CheckpointError(f"{path}: was trained with {'.'.join(key)} = {then!r}, but "
                                      f"{self.run_dir}/config.yaml says {now!r}")

    def _save(self, name: str, epoch: int, with_state: bool) -> None:
        if not self.context.is_main:
            return
        state = ({"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                  "scaler": self.scaler.state_dict()} if with_state else None)
        save_checkpoint(self.run_dir / name, self.surrogate, run_config=config_to_dict(self.config), epoch=epoch,
                        history=self.history, best_val=self.best_val, training_state=state)

    def _train_epoch(self, epoch: int, progress: Progress) -> float:
        seed = self.config.seed + epoch
        # the global RNG (dropout) differs between processes; the generator (order, windows, noise) is shared
        torch.manual_seed(seed * self.context.world + self.context.rank)
        generator = torch.Generator().manual_seed(seed)
        self.surrogate.train()
        world, log_every = self.context.world, self.config.train.log_every
        self.step.meter.reset()
        count = 0
        steps = self.task.steps_per_epoch()

        def loss_fn(tensors: tuple[torch.Tensor, ...], draws: StepDraws) -> torch.Tensor:
            return self.task.drawn_loss(self.model, tensors, epoch, draws)

        summed = self.config.loss.reduction == "sum"
        for step, batch in enumerate(self.pipeline.epoch(epoch, generator)):
            # the mean over this part, weighted so that DDP's average over processes is the mean over the global
            # batch; the epoch's sum counts each process's value / world, the all-reduce at reads adds them.
            # loss.reduction sum: the global batch's sum, the batch's mean times its size (the epoch's mean loss
            # is still the mean: the samples it counts for are divided by as much)
            scale = batch.size if summed else 1
            weight = (batch.part.share * world if world > 1 else 1.0) * scale
            self.step(loss_fn, batch.tensors, batch.draws, weight, batch.size / world / scale)
            self.scheduler.step()
            self.step.sync_hyperparameters()
            count += batch.size
            progress.step(batch.size)
            if not self.stepped:  # what start-up, data and the first batch cost, from the command
                self.stepped = True
                age = process_age()
                if age is not None:
                    progress.log(f"first step done {age:.1f} s after the process started")
            if (step + 1) % log_every == 0 and step + 1 < steps:
                progress.note_loss(self._read_losses(epoch) / count)
        return self._read_losses(epoch) / count  # the epoch's end is a log point

    def _read_losses(self, epoch: int) -> float:
        """The loop's one read of device values (at a log point): the epoch's loss sum so far, summed over the
        processes; a non-finite loss since the epoch began stops training with the step it first occurred at."""
        total, first_bad, bad_value = self.step.meter.values().unbind()
        first_bad = torch.where(first_bad < 0, torch.inf, first_bad)
        sums = self.context.reduce_tensor(torch.stack([total, bad_value]))
        first_bad = self.context.reduce_tensor(first_bad.reshape(1), "min")
        self.device_reads += 1
        total, bad_value, first_bad = torch.cat([sums, first_bad]).tolist()
        if math.isfinite(first_bad):
            value = bad_value / self.context.world  # the processes' losses are summed
            last = self.run_dir / "last.pt"
            kept = f"last good checkpoint: {last}" if last.is_file() else "no checkpoint was written yet"
            raise TrainingDiverged(f"loss is {value} at epoch {epoch + 1}, step {int(first_bad) + 1}; training "
                                   f"stopped ({kept}); try a lower optim.lr or train.grad_clip")
        return total

    def fit(self) -> dict[str, Any]:
        """Train for the configured epochs (from :attr:`start_epoch`); return the run summary. Only the main
        process writes; the others wait for it at the end of every epoch."""
        main, world = self.context.is_main, self.context.world
        if main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_run_config(self.run_dir, self.config)
        epochs = self.config.train.epochs
        progress = Progress(self.run_dir, epochs, self.task.steps_per_epoch(), self.start_epoch, quiet=not main)
        if self.start_epoch >= epochs:
            progress.log(f"the run has already trained all {epochs} epochs; nothing to do")
            return self._summary()
        if stopped := self._diverged():
            progress.log(f"the run stopped at epoch {self.start_epoch}: {stopped}; nothing to do")
            return self._summary()
        sessions = start_session(self.run_dir, str(self.device), self.start_epoch, world) if main else []
        processes = f" x {world} processes" if world > 1 else ""
        progress.log(f"{'resumed at' if self.start_epoch else 'started'} epoch {self.start_epoch + 1} of {epochs}, "
                     f"{self.task.steps_per_epoch()} steps each, on {self.device} with {torch.get_num_threads()} "
                     f"threads{processes}: {sessions[-1]['command'] if main else ''}")
        if self.init_note:
            progress.log(self.init_note)
        if self.pipeline.where:
            progress.log(self.pipeline.where + (", steps as CUDA graphs" if self.config.train.cuda_graphs else ""))
        self.step = TrainStep(list(self.surrogate.parameters()), self.optimizer, self.scaler,
                              self.config.train.precision, self.config.train.grad_clip, self.device,
                              graphs=self.config.train.cuda_graphs, batch_size=self.config.train.batch_size,
                              name=self.surrogate.model.__class__.__name__)
        writer = _tensorboard(self.run_dir) if main else None
        for epoch in range(self.start_epoch, epochs):
            if self.config.train.retain_freed_memory:
                release_freed_memory()  # what loading, validation and saving left: only the steps' blocks stay
            progress.begin_epoch(epoch)
            start = time.perf_counter()
            train_loss = self._train_epoch(epoch, progress)
            seconds = time.perf_counter() - start
            val = self.task.validate(self.surrogate, self.device, self.context)
            record = {"epoch": epoch + 1, "train_loss": train_loss, "val_relative_l2": val,
                      **self.task.validation_columns(),  # a mixture's members: val_<name>
                      "lr": self.optimizer.param_groups[0]["lr"], "seconds": seconds}
            self.history.append(record)
            if main:  # before last.pt: a run stopped in between never shows fewer epochs than it can resume from
                write_metrics(self.run_dir, self.history)
            if val < self.best_val:
                self.best_val = val
                self._save("best.pt", epoch, with_state=False)
            self._save("last.pt", epoch, with_state=True)
            progress.end_epoch(record)
            if writer is not None:
                for key in (k for k in record if k not in ("epoch", "seconds")):
                    writer.add_scalar(key, record[key], epoch + 1)
            self.context.barrier()
            if stopped := self._diverged():  # every process holds the same validation errors
                progress.log(f"stopped after epoch {epoch + 1}: {stopped}")
                break
        if writer is not None:
            writer.close()
        if main:
            end_session(self.run_dir, sessions, len(self.history))
        return self._summary()

    def _diverged(self) -> str | None:
        """Why the run counts as diverged under ``train.stop_when_diverged`` (see :func:`divergence`), or None."""
        train = self.config.train
        if train.stop_when_diverged is None:
            return None
        return divergence([r["val_relative_l2"] for r in self.history], train.stop_when_diverged,
                          train.divergence_epochs)

    def _summary(self) -> dict[str, Any]:
        best = min(self.history, key=lambda r: r["val_relative_l2"]) if self.history else {}
        steps = self.task.steps_per_epoch() * len(self.history)
        summary = {
            "epochs": len(self.history),
            "best_epoch": best.get("epoch"),
            "best_val_relative_l2": best.get("val_relative_l2"),
            "parameters": sum(p.numel() for p in self.surrogate.model.parameters()),
            "train_seconds": sum(r["seconds"] for r in self.history),
            "seconds_per_step": sum(r["seconds"] for r in self.history) / steps if steps else None,
            "diverged": self._diverged(),
        }
        if self.context.is_main:
            write_summary(self.run_dir, summary)
        return summary


def divergence(validation: list[float], factor: float, epochs: int) -> str | None:
    """Why a run whose validation errors per epoch are ``validation`` has diverged: its last ``epochs`` errors
    all above ``factor`` times the best before them (a loss spike the model does not come back from; ``best.pt``
    holds the best epoch before it); else None."""
    if len(validation) <= epochs:
        return None
    before, last = validation[:-epochs], validation[-epochs:]
    best = min(before)
    if min(last) <= factor * best:
        return None
    return (f"the validation error stayed above {factor:g}x its best ({best:.4g}, epoch {before.index(best) + 1}) "
            f"for {epochs} epochs (train.stop_when_diverged)")


def _tensorboard(run_dir: Path) -> Any:
    """A TensorBoard writer if the optional ``tensorboard`` package is installed, else ``None``."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(run_dir / "tensorboard"))


def train(config: RunConfig, run_dir: str | os.PathLike, resume: bool = False) -> dict[str, Any]:
    """Train (or resume) a run; returns its summary. The run directory is locked against a second writer, and a
    new run never goes into a folder that already holds files.

    Started by ``torchrun`` with several processes, each process trains its shard of every batch
    (:mod:`opformer.train.distributed`); the main process checks, locks and writes the run directory.

    Parameters
    ----------
    config
        The run's config (:func:`opformer.config.load_config`). Its data paths are stored absolute.
    run_dir
        The run directory: absent or empty for a new run; with ``resume``, the run to continue.
    resume
        Continue ``run_dir`` from its ``last.pt`` (a fresh start if no epoch finished); a larger
        ``train.epochs`` than the run's extends it.

    Returns
    -------
    dict[str, Any]
        The summary, also written to the run directory: ``epochs``, ``best_epoch``, ``best_val_relative_l2``,
        ``parameters``, ``train_seconds`` and ``seconds_per_step``.

    Raises
    ------
    CheckpointError
        A new run's folder holds files, or a resumed run's ``last.pt`` was written for another model, data set or
        recipe.
    ConfigError
        The config does not fit the data, or ``train.epochs`` of a resumed run would not extend it.
    TrainingDiverged
        The loss is not finite.
    """
    run_dir = Path(run_dir)
    with session(config.train.device) as context:
        if not resume and context.is_main:
            check_fresh(run_dir)
        if config.data.path:  # stored absolute, so that evaluate and plot find the data from any folder
            data = dataclasses.replace(config.data, path=str(Path(config.data.path).absolute()))
            config = dataclasses.replace(config, data=data)
        if config.init.checkpoint:
            init = dataclasses.replace(config.init, checkpoint=str(Path(config.init.checkpoint).absolute()))
            config = dataclasses.replace(config, init=init)
        if config.data.mixture:
            members = [dataclasses.replace(m, path=str(Path(m.path).absolute())) for m in config.data.mixture]
            config = dataclasses.replace(config, data=dataclasses.replace(config.data, mixture=members))
        trainer = Trainer(config, run_dir, context)  # checks the config against the data; writes nothing
        with run_lock(run_dir) if context.is_main else nullcontext():
            if resume:
                trainer.resume()
            elif context.is_main:
                check_fresh(run_dir)  # again under the lock: another process may have started between the checks
            return trainer.fit()

