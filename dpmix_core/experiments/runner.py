"""One training job from its config: data -> (features) -> release or baseline -> train -> evaluate on the real test.

The pipeline is the same for every method; what differs (the training set and its
accounting, a private projection, the optimiser) is a small class per method in
:mod:`dpmix_core.experiments.methods`.

Entry points:

* ``run_job(config: dict, reporter) -> dict`` for background workers (the
  config is ``RunConfig.to_dict()``; the result is JSON-ready);
* ``run_config(config: RunConfig, reporter=None) -> dict`` in-process.

``reporter`` has ``progress(**fields)`` (called at every phase change and at
least once per epoch with the keys phase, epoch, epochs, loss, val_accuracy,
test_accuracy, eta_seconds) and ``should_stop() -> bool`` (polled every epoch
and between batches about once a second; True raises :class:`Cancelled`).
A reporter may also have ``checkpoint_path() -> Path | None`` and
``checkpoint_every_s`` (seconds, or None for the default; a store's worker has them): training then saves its
state there and a run started again continues from it
(:mod:`dpmix_core.training.checkpoint`; DP-SGD runs always start at epoch 0).

A resumed run's result has ``resumed_from_epoch`` (the epochs an earlier worker ran; None when the run
trained from epoch 0) and a note saying so.

The result always has: test_accuracy, test_mse (None for classification),
test_accuracy_halves (accuracy on the even and on the odd test rows: select on one, report the other),
test_accuracy_by_inputs (a clipped class-centric z-score release: {test_inputs name: {accuracy, halves, collapsed}}
of the same trained model on the test split through each loader: with the release's clip, without it, and clipped
then multiplied by release_scale, the released points' median norm over the clip, also in the result; else None),
collapsed (True when the model did not learn: the constant predictor or chance accuracy; collapse_reason says why),
selection_note (early stopping chose its epoch on a validation split at chance: a sentence saying so; else None),
test_accuracy_bn_recalibrated (models with BatchNorm: the accuracy with its statistics re-estimated on the
unlabelled test inputs, a diagnostic of the release/test shift, never the result; else None),
epsilon ({accountant: value or "inf"}), delta, seconds,
train_samples_per_second, versions, privacy_card (the release's card for
mixing and label-laplace runs, else None), plus run_key, config, history,
timings and notes (caveats a reader needs).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import math
import platform
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

import dpmix_core
from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.experiments.methods import RunContext, get_method
from dpmix_core.training.checkpoint import Checkpointer
from dpmix_core.training.collapse import COLLAPSE_CAUSE, collapse_reason, majority_rate, selection_note, shift_note
from dpmix_core.training.names import TEST_INPUTS
from dpmix_core.training.precision import check_precision
from dpmix_core.training.train import Cancelled, OptimSettings, StopCheck

__all__ = [
    "run_release",
    "run_seeds",
    "Cancelled",
    "NullReporter",
    "Reporter",
    "run_job",
    "run_config",
    "checkpointer",
    "library_versions",
    "STOP_POLL_SECONDS",
]

STOP_POLL_SECONDS = 1.0  # should_stop() is polled between batches at most this often (and at every epoch)


class Reporter(Protocol):
    def progress(self, **fields: Any) -> None: ...

    def should_stop(self) -> bool: ...


class NullReporter:
    """Reports nowhere and never asks to stop."""

    def progress(self, **fields: Any) -> None:
        return None

    def should_stop(self) -> bool:
        return False


def library_versions(extra: tuple[str, ...] = ()) -> dict[str, str | None]:
    """Versions of python, torch, numpy, dpmix_core and the libraries a run used."""
    import torch

    out: dict[str, str | None] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "dpmix_core": dpmix_core.__version__,
    }
    for name in ("scipy", "dp-accounting", *extra):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def run_job(config: dict, reporter: Reporter) -> dict:
    """Run the job described by ``config`` (a ``RunConfig.to_dict()``); JSON-ready result. Raises Cancelled."""
    return run_config(RunConfig.from_dict(config), reporter)


class _Progress:
    """Phase and per-epoch progress with an ETA from the measured epoch time."""

    def __init__(self, reporter: Reporter, epochs: int) -> None:
        self.reporter = reporter
        self.epochs = epochs

    def phase(self, phase: str, **extra: Any) -> None:
        fields = dict(
            phase=phase, epoch=0, epochs=self.epochs, loss=None, val_accuracy=None, test_accuracy=None, eta_seconds=None
        )
        fields.update(extra)
        self.reporter.progress(**fields)

    def epoch(self, entry: dict, eval_fraction: float) -> None:
        done = entry["epoch"]
        per_epoch = entry["seconds"] / done
        # evaluation left: a forward pass costs about a third of a training step per sample
        eta = per_epoch * (self.epochs - done) + per_epoch * eval_fraction / 3
        self.reporter.progress(
            phase="train",
            epoch=done,
            epochs=self.epochs,
            loss=entry["loss"],
            val_accuracy=entry["val_accuracy"],
            test_accuracy=None,
            eta_seconds=eta,
        )


def _finite_or_none(value: Any) -> Any:
    """NaN/inf (a diverged loss) -> None, so the result stays JSON-ready."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def run_config(
    config: RunConfig,
    reporter: Reporter | None = None,
    *,
    keep: dict | None = None,
    watch: Callable[[dict, Any, Any, Any], None] | None = None,
) -> dict:
    """Run one job in this process (see the module docstring for the result).

    ``keep`` (in-process callers only; the result stays JSON-ready): a dict that receives the trained
    ``model``, its ``device`` and the validation split it never trained on, ``x_val`` / ``y_val`` (numpy, in
    the model's input space; for a release, its held-out released points with their noisy labels), the
    real test split ``x_test`` / ``y_test`` (numpy, in the same input space), and ``input_map``, the run's
    ``input_norm`` as a function (numpy rows before it -> the model's input space; the identity for "none"), with
    ``x_val_raw``, the validation points before it (another run's points reach this model through ``input_map``),
    and ``synthesis``, the release a mixing run made (None for the other methods).
    ``watch(entry, model, x_test, y_test)`` (in-process diagnostics, e.g. ``bench/epoch_trajectory.py``): called
    after each epoch with the history entry, the model and the test tensors; it must not train the model or
    draw random numbers, and nothing it computes reaches the result.
    """
    import torch

    from dpmix_core.mechanisms import resolve_device
    from dpmix_core.training import data as D
    from dpmix_core.training.losses import get_loss
    from dpmix_core.training.models import build_model

    if not isinstance(config, RunConfig):
        raise ValueError(f"run_config needs a RunConfig (use run_job for dicts). Found {type(config).__name__}.")
    reporter = reporter or NullReporter()
    stop = StopCheck(reporter.should_stop, interval=STOP_POLL_SECONDS)
    prog = _Progress(reporter, config.epochs)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    notes: list[str] = []
    extra_versions: list[str] = []
    extra: dict[str, Any] = {}
    device = resolve_device(config.device)
    check_precision(config.precision, device)  # bf16 where the device has no bfloat16 arithmetic: refused
    seeds = run_seeds(config)

    method = get_method(config.method)
    ctx = RunContext(config, device, seeds, stop, prog.phase, timings, notes, extra_versions, extra)
    ctx.checkpoint = checkpointer(reporter, config)
    ds, raw_ds, input_shape, released_features = _load_data(ctx)
    x_test_raw, y_test_raw = raw_ds.x_test, raw_ds.y_test
    k = ds.num_classes
    regression = config.task == "regression"
    num_outputs = 1 if regression else k

    # ---------------------------------------------------------------- what the model trains on (the method's step 1)
    training = method.training_set(ctx, ds, raw_ds, released_features)
    privacy = training.privacy
    test_x = ds.x_test if ds.x_test is not None else x_test_raw
    test_y = ds.y_test if ds.y_test is not None else y_test_raw
    x_test = training.test_map(test_x)
    other_tests = {name: test_map(test_x) for name, test_map in training.other_test_maps.items()}
    if config.test_inputs == "unclipped":
        assert config.synthesis is not None  # RunConfig allows "unclipped" only for class-centric z-score releases
        notes.append(
            f"test inputs z-scored as the release's records but not clipped to ||x|| <= {config.synthesis.clip:g} "
            "(DP-CDA's 'original test partition' read as z-scoring only); the release and its epsilon are unchanged"
        )
    elif config.test_inputs == "release-scale":
        notes.append(
            f"test inputs z-scored and clipped as the release's records, then multiplied by {extra['release_scale']:.4g} "
            "(the released points' median norm over the clip: the scale the model's inputs had); the release and its "
            "epsilon are unchanged"
        )
    y_test = torch.as_tensor(test_y.astype(np.float32) if regression else test_y.astype(np.int64))

    rng_split = np.random.default_rng(int(seeds[0]))
    if config.val_fraction > 0:
        x_tr, y_tr, x_va, y_va = D.split_validation(training.x, training.y, config.val_fraction, rng_split)
    else:
        x_tr, y_tr, x_va, y_va = training.x, training.y, training.x[:0], training.y[:0]
    if method.private_validation and len(x_va):
        notes.append(
            "validation accuracy is measured on held-out private records and is not covered by epsilon "
            "(shown for monitoring only; nothing is selected with it)"
        )
    (x_tr, x_va, x_test), input_shape, projected = method.project(ctx, (x_tr, x_va, x_test), input_shape)
    privacy = projected or privacy
    if projected is not None:  # a private projection is fitted for the run's own test loader only
        other_tests = {}

    x_va_raw = x_va
    input_map: Callable[[np.ndarray], np.ndarray] = lambda a: a  # noqa: E731
    if config.input_norm == "rms":
        scale = np.float32(D.rms_scale(x_tr))
        input_map = lambda a: a * scale  # noqa: E731
        x_tr, x_va, x_test = x_tr * scale, x_va * scale, x_test * scale
        other_tests = {name: x * scale for name, x in other_tests.items()}
        extra["input_scale"] = float(scale)
    elif config.input_norm == "standardize":
        standardize = input_map = D.standardizer(x_tr)
        x_tr, x_va, x_test = standardize(x_tr), standardize(x_va), standardize(x_test)
        other_tests = {name: standardize(x) for name, x in other_tests.items()}
        notes.append(
            "inputs standardised: each feature minus its mean over the training inputs, divided by their standard "
            "deviation (the same constants for the validation and test inputs; on a release, post-processing)"
        )

    # ---------------------------------------------------------------- model and training
    to = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32).to(device)  # noqa: E731
    xt, yt, xv, yv = to(x_tr), to(y_tr), to(x_va), to(y_va)
    xtest, ytest = to(x_test), y_test.to(device)
    torch.manual_seed(int(seeds[2]))
    model = build_model(
        config.model,
        input_shape=input_shape,
        num_outputs=num_outputs,
        normalised_features=released_features,
        init=config.init,
        device=device,
    )
    settings = _optim_settings(config, has_validation=len(x_va) > 0)
    if config.early_stopping is not None and not len(x_va):
        notes.append("early stopping needs a validation split (val_fraction > 0): trained every epoch")
    if config.schedule == "plateau" and not len(x_va):
        notes.append("the plateau schedule needs a validation split (too few points to hold any out): constant rate")
    loss_fn = get_loss(config.loss)
    batch_gen = torch.Generator().manual_seed(int(seeds[1]))
    eval_fraction = len(x_test) / max(len(x_tr), 1)

    def on_epoch(entry: dict) -> None:
        prog.epoch(entry, eval_fraction)
        if watch is not None:
            watch(entry, model, xtest, ytest)

    model, fit_res, trained = method.train(ctx, model, loss_fn, (xt, yt, xv, yv), settings, batch_gen, on_epoch)
    privacy = trained or privacy
    notes.extend(fit_res.checkpoint_notes)
    if fit_res.resumed_from:
        notes.append(
            f"resumed from a checkpoint after epoch {fit_res.resumed_from} of {config.epochs}: an earlier worker ran "
            "those epochs (their training time is in the history; 'seconds' counts this worker only)"
        )

    if keep is not None:  # e.g. best-release's pooled validation: every candidate's model on every held-out split
        keep.update(
            model=model,
            device=device,
            x_val=x_va,
            y_val=y_va,
            x_test=x_test,
            y_test=y_test.numpy(),
            input_map=input_map,
            x_val_raw=x_va_raw,
            synthesis=ctx.synthesis,
        )

    # ---------------------------------------------------------------- evaluation on the real test split
    stop(force=True)
    prog.phase("evaluate", epoch=config.epochs)
    metrics, val_final, recalibrated, collapsed = _evaluate(
        ctx, model, fit_res, (xtest, ytest), y_va=y_va, num_classes=k
    )
    no_signal = _selection(ctx, fit_res, y_va=y_va, num_classes=k)
    others = {name: to(x) for name, x in other_tests.items()}
    by_inputs = _readings_by_inputs(ctx, model, fit_res, (metrics, collapsed), others, ytest, y_va=y_va, num_classes=k)
    seconds = time.perf_counter() - t_start
    prog.phase(
        "done",
        epoch=config.epochs,
        loss=fit_res.history[-1]["loss"] if fit_res.history else None,
        val_accuracy=val_final,
        test_accuracy=metrics["accuracy"],
        eta_seconds=0.0,
    )
    return {
        "run_key": run_key(config),
        "config": config.to_dict(),
        "method": config.method,
        "mechanism": config.mechanism,
        "test_accuracy": metrics["accuracy"],
        "test_mse": metrics["mse"] if regression else None,
        "test_accuracy_halves": metrics["accuracy_halves"],
        "test_accuracy_by_inputs": by_inputs,
        "val_accuracy": val_final,
        "collapsed": collapsed is not None,
        "collapse_reason": collapsed,
        "selection_note": no_signal,
        "test_accuracy_bn_recalibrated": recalibrated,
        "best_epoch": fit_res.best_epoch,
        "epochs_run": len(fit_res.history),
        "resumed_from_epoch": fit_res.resumed_from,
        "epsilon": privacy.epsilon,
        "delta": privacy.delta,
        "seconds": seconds,
        "train_samples_per_second": fit_res.samples_per_second,
        "train_samples": fit_res.samples,
        "n_train": int(xt.shape[0]),
        "n_val": int(xv.shape[0]),
        "n_test": int(xtest.shape[0]),
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
        "history": [{k: _finite_or_none(v) for k, v in h.items()} for h in fit_res.history],
        "timings": timings,
        "versions": library_versions(tuple(extra_versions)),
        "privacy_card": privacy.card,
        "notes": notes,
        **extra,
    }


def _optim_settings(config: RunConfig, *, has_validation: bool) -> OptimSettings:
    """The optimiser, schedule and early stopping of ``config`` (early stopping and the plateau schedule only with a
    validation split: without one, a plateau run keeps its initial rate)."""
    return OptimSettings(
        optimizer=config.optimizer,
        lr=config.lr,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
        schedule=config.schedule if has_validation or config.schedule != "plateau" else "constant",
        lr_step_epochs=config.lr_step_epochs,
        lr_gamma=config.lr_gamma,
        epochs=config.epochs,
        batch_size=config.batch_size,
        lr_milestones=config.lr_milestones,
        lr_patience=config.lr_patience,
        early_stopping=config.early_stopping if has_validation else None,
        precision=config.precision,
    )


def _evaluate(ctx: RunContext, model, fit_res, test, *, y_va: np.ndarray, num_classes: int):
    """(metrics, val_accuracy, BatchNorm-recalibrated accuracy, collapse reason) of the trained model on the real
    test split ``test`` = (x, y) tensors; its notes (early stopping, collapse, BatchNorm shift) go to ``ctx.notes``.

    The recalibrated accuracy re-estimates BatchNorm statistics on the test inputs: a diagnostic, never the result.
    """
    from dpmix_core.training.batchnorm import has_batchnorm, recalibrate_batchnorm
    from dpmix_core.training.train import evaluate

    config = ctx.config
    xtest, ytest = test
    regression = config.task == "regression"
    t0 = time.perf_counter()
    metrics = evaluate(model, xtest, ytest, task=config.task, num_classes=num_classes)
    ctx.tick("evaluate", t0)
    val_final = fit_res.history[-1]["val_accuracy"] if fit_res.history else None
    if fit_res.best_epoch is not None:
        val_final = fit_res.history[fit_res.best_epoch - 1]["val_accuracy"]
        ctx.notes.append(
            f"early stopping (patience {config.early_stopping}): "
            f"{'stopped after' if fit_res.stopped_early else 'ran'} {len(fit_res.history)} epochs, "
            f"kept the weights of epoch {fit_res.best_epoch} (best validation accuracy)"
        )
    recalibrated = None
    if not regression and has_batchnorm(model) and xtest.shape[0] >= 2:
        t0 = time.perf_counter()
        rec = evaluate(recalibrate_batchnorm(model, xtest), xtest, ytest, task=config.task, num_classes=num_classes)
        recalibrated = rec["accuracy"]
        ctx.tick("evaluate", t0)
    y_test = ytest.cpu().numpy()
    cause = shift_note(metrics["accuracy"], recalibrated, collapsed=True) or COLLAPSE_CAUSE
    collapsed = _collapse(config, fit_res, metrics, y_va=y_va, y_test=y_test, cause=cause)
    note = collapsed or shift_note(metrics["accuracy"], recalibrated, collapsed=False)
    if note is not None:
        ctx.notes.append(note)
    return metrics, val_final, recalibrated, collapsed


def _selection(ctx: RunContext, fit_res, *, y_va: np.ndarray, num_classes: int) -> str | None:
    """:func:`selection_note` for the run (None: no early stopping, a regression, or a choice that read something);
    the note also goes to ``ctx.notes``."""
    if fit_res.best_epoch is None or ctx.config.task == "regression":
        return None
    note = selection_note(
        fit_res.history,
        best_epoch=fit_res.best_epoch,
        val_majority=majority_rate(y_va),
        val_rows=len(y_va),
        label_agreement=_label_agreement(ctx, num_classes),
    )
    if note is not None:
        ctx.notes.append(note)
    return note


def _label_agreement(ctx: RunContext, num_classes: int) -> float | None:
    """Share of the release's hard labels that are the true class (None: soft labels, or no release noise known)."""
    from dpmix_core.mechanisms.mixing import hard_label_agreement

    syn = ctx.config.synthesis
    sigma_y = ctx.extra.get("sigma_y")
    if not getattr(syn, "hard_labels", False) or sigma_y is None or num_classes < 2:
        return None
    return hard_label_agreement(float(sigma_y), num_classes)


def _collapse(config: RunConfig, fit_res, metrics: dict, *, y_va, y_test: np.ndarray, cause: str) -> str | None:
    """Why the trained model did not learn, read on one test loader's ``metrics`` (None: it learned, or regression)."""
    if config.task == "regression":
        return None
    return collapse_reason(
        fit_res.history,
        val_majority=majority_rate(y_va),
        prediction_share=metrics["prediction_share"],
        cause=cause,
        test_accuracy=metrics["accuracy"],
        test_majority=majority_rate(y_test),
        test_rows=len(y_test),
    )


def _readings_by_inputs(
    ctx: RunContext, model, fit_res, own: tuple[dict, str | None], others: dict[str, Any], ytest, *, y_va, num_classes
) -> dict[str, dict] | None:
    """{test_inputs name: {"accuracy", "halves", "collapsed"}} of the trained model on the test split through each
    loader that applies to the release, in ``TEST_INPUTS`` order; the run's own is ``own`` = (its metrics, its
    collapse reason). None when only the run's own applies (every release but a clipped class-centric z-score one).

    A loader's "collapsed" is the run's collapse test read on that loader's predictions: BatchNorm statistics that do
    not fit one loader's scale can make the same model a constant predictor there and not on the other.
    """
    from dpmix_core.training.train import evaluate

    if not others:
        return None
    t0 = time.perf_counter()
    metrics, collapsed = own
    readings = {ctx.config.test_inputs: _reading(metrics, collapsed)}
    y_test = ytest.cpu().numpy()
    for name, xtest in others.items():
        m = evaluate(model, xtest, ytest, task=ctx.config.task, num_classes=num_classes)
        readings[name] = _reading(m, _collapse(ctx.config, fit_res, m, y_va=y_va, y_test=y_test, cause=COLLAPSE_CAUSE))
    ctx.tick("evaluate", t0)
    return {name: readings[name] for name in TEST_INPUTS if name in readings}


def _reading(metrics: dict, collapsed: str | None) -> dict:
    """One test loader's reading of the trained model: accuracy, [even, odd] halves, collapsed."""
    return {"accuracy": metrics["accuracy"], "halves": metrics["accuracy_halves"], "collapsed": collapsed is not None}


def checkpointer(reporter: Reporter, config: RunConfig) -> Checkpointer | None:
    """The run's :class:`Checkpointer` when its reporter names a checkpoint file (a store's worker does), else None."""
    where = getattr(reporter, "checkpoint_path", None)
    path = where() if callable(where) else None
    if path is None:
        return None
    every_s = getattr(reporter, "checkpoint_every_s", None)  # None: the checkpoint module's default
    if every_s is None:
        return Checkpointer(path, run_key(config))
    return Checkpointer(path, run_key(config), every_s=float(every_s))


def run_seeds(config: RunConfig) -> np.ndarray:
    """The run's four seeds, from ``config.seed``: split, batch order, torch init, DP noise."""
    return np.random.SeedSequence(config.seed).generate_state(4)


def run_release(config: RunConfig):
    """The release a mixing run trains on, made again exactly as :func:`run_config` makes it (the same data, seeds,
    noise and device type, so the same points: publishing it costs nothing beyond the run's release), without
    training: a :class:`~dpmix_core.synthesis.pipeline.Synthesis`. ValueError for a run that makes no release."""
    from dpmix_core.mechanisms import resolve_device

    if config.method != "mixing" or config.release_file is not None:
        raise ValueError("run_release remakes the release of a mixing run that synthesises one.")
    ctx = RunContext(config, resolve_device(config.device), run_seeds(config), StopCheck(None), lambda _: None)
    ds, raw_ds, _, released_features = _load_data(ctx)
    get_method(config.method).training_set(ctx, ds, raw_ds, released_features)
    return ctx.synthesis


def _load_data(ctx: RunContext):
    """(dataset the model sees, raw dataset, input shape, whether the release mixes public features).

    Loads and subsamples the dataset, then maps every record by the run's public feature
    transform: the release's own (DPFMix App. E.2: ScatterNet + per-sample GroupNorm, mixed
    by the release) or the model's fixed ScatterNet input (``config.features``).
    """
    from dpmix_core.data import Dataset
    from dpmix_core.experiments.run_data import held_out_note, load_run_dataset
    from dpmix_core.training import data as D

    config, stop = ctx.config, ctx.stop
    stop(force=True)
    ctx.phase("data")
    t0 = time.perf_counter()
    ds = load_run_dataset(config)
    ds = D.subsample(ds, train_limit=config.train_limit, test_limit=config.test_limit)
    if config.data_file is not None:  # one's own file: which records were held out, in words and numbers
        ctx.extra["data"] = held_out_note(config, ds)
    if config.release_file is not None:  # the release is made already: the private training split is not read
        ds = dataclasses.replace(ds, x_train=ds.x_train[:0], y_train=ds.y_train[:0])
    if ds.x_test is None or ds.y_test is None:
        raise ValueError(f"dataset {config.dataset!r} has no test split to evaluate on.")
    x_test_raw = ds.x_test
    ctx.tick("data", t0)
    raw_ds, input_shape = ds, tuple(ds.x_train.shape[1:])
    syn_config = config.synthesis
    released_features = syn_config is not None and syn_config.features != "pixels"
    if syn_config is not None and released_features:
        from dpmix_core.data.scattering import FEATURE_TRANSFORMS, feature_dataset, scattering_shape

        ctx.extra_versions.append("kymatio")
        ctx.phase("features")
        t0 = time.perf_counter()
        ds = feature_dataset(raw_ds, syn_config.features, device=str(ctx.device), check=lambda: stop())
        input_shape = scattering_shape(raw_ds.x_train.shape[1:])
        ctx.notes.append(f"features mixed: {FEATURE_TRANSFORMS[syn_config.features]}")
        ctx.tick("features", t0)
    elif config.features == "scattering":
        from dpmix_core.data.scattering import scattering_features

        ctx.extra_versions.append("kymatio")
        ctx.phase("features")
        t0 = time.perf_counter()
        check = lambda: stop()  # noqa: E731
        f_train = scattering_features(ds.x_train, device=str(ctx.device), check=check)
        f_test = scattering_features(x_test_raw, device=str(ctx.device), check=check)
        input_shape = tuple(f_train.shape[1:])
        ds = Dataset(
            f"{ds.name}-scattering",
            D.flat(f_train),
            ds.y_train,
            D.flat(f_test),
            ds.y_test,
            ds.num_classes,
            f"{ds.source}; ScatterNet J=2, L=8 features {input_shape}",
            ds.label_names,
        )
        ctx.notes.append("features: ScatterNet (J=2, L=8) coefficients of pixels/255, a fixed public transform")
        ctx.tick("features", t0)
    return ds, raw_ds, input_shape, released_features
