"""One training job from its config: data -> (features) -> release or baseline -> train -> evaluate on the real test.

Entry points:

* ``run_job(config: dict, reporter) -> dict`` for background workers (the
  config is ``RunConfig.to_dict()``; the result is JSON-ready);
* ``run_config(config: RunConfig, reporter=None) -> dict`` in-process.

``reporter`` has ``progress(**fields)`` (called at every phase change and at
least once per epoch with the keys phase, epoch, epochs, loss, val_accuracy,
test_accuracy, eta_seconds) and ``should_stop() -> bool`` (polled every epoch
and between batches about once a second; True raises :class:`Cancelled`).

The result always has: test_accuracy, test_mse (None for classification),
test_accuracy_halves (accuracy on the even and on the odd test rows: select on one, report the other),
collapsed (True when the model never left the constant predictor; collapse_reason says why, in a sentence),
epsilon ({accountant: value or "inf"}), delta, seconds,
train_samples_per_second, versions, privacy_card (the release's card for
mixing and label-laplace runs, else None), plus run_key, config, history,
timings and notes (caveats a reader needs).
"""

from __future__ import annotations

import importlib.metadata
import math
import platform
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

import dpmix_core
from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.training.collapse import collapse_reason
from dpmix_core.training.train import Cancelled, OptimSettings, StopCheck

__all__ = ["Cancelled", "NullReporter", "Reporter", "run_job", "run_config", "library_versions", "STOP_POLL_SECONDS"]

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


def _json_eps(x: float | None) -> float | str | None:
    if x is None:
        return None
    return "inf" if math.isinf(x) else float(x)


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


def _majority_rate(y: np.ndarray) -> float | None:
    """Share of the most frequent class among validation labels (one-hot/soft rows: their argmax); None if empty."""
    if len(y) == 0 or y.ndim != 2 or y.shape[1] < 2:
        return None
    counts = np.bincount(np.asarray(y).argmax(axis=1))
    return float(counts.max()) / len(y)


def run_config(config: RunConfig, reporter: Reporter | None = None) -> dict:
    """Run one job in this process (see the module docstring for the result)."""
    import torch

    from dpmix_core.data import load_dataset
    from dpmix_core.mechanisms import resolve_device
    from dpmix_core.training import data as D
    from dpmix_core.training.losses import get_loss
    from dpmix_core.training.models import build_model
    from dpmix_core.training.train import evaluate, fit

    if not isinstance(config, RunConfig):
        raise ValueError(f"run_config needs a RunConfig (use run_job for dicts). Found {type(config).__name__}.")
    reporter = reporter or NullReporter()
    stop = StopCheck(reporter.should_stop, interval=STOP_POLL_SECONDS)
    prog = _Progress(reporter, config.epochs)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    notes: list[str] = []
    extra_versions: list[str] = []
    device = resolve_device(config.device)
    seeds = np.random.SeedSequence(config.seed).generate_state(4)  # split, batch order, torch init, DP noise

    def tick(name: str, t0: float) -> None:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0

    # ---------------------------------------------------------------- data (and fixed features)
    stop(force=True)
    prog.phase("data")
    t0 = time.perf_counter()
    ds = load_dataset(config.dataset, data_dir=config.data_dir)
    ds = D.subsample(ds, train_limit=config.train_limit, test_limit=config.test_limit)
    if ds.x_test is None or ds.y_test is None:
        raise ValueError(f"dataset {config.dataset!r} has no test split to evaluate on.")
    x_test_raw, y_test_raw = ds.x_test, ds.y_test
    tick("data", t0)
    input_shape: tuple[int, ...] = tuple(ds.x_train.shape[1:])
    raw_ds = ds
    # DPFMix App. E.2: the release itself maps records by the public transform (ScatterNet + per-sample GroupNorm)
    syn_config = config.synthesis
    released_features = syn_config is not None and syn_config.features != "pixels"
    if syn_config is not None and released_features:
        from dpmix_core.data.scattering import FEATURE_TRANSFORMS, feature_dataset, scattering_shape

        extra_versions.append("kymatio")
        prog.phase("features")
        t0 = time.perf_counter()
        ds = feature_dataset(raw_ds, syn_config.features, device=str(device), check=lambda: stop())
        input_shape = scattering_shape(raw_ds.x_train.shape[1:])
        notes.append(f"features mixed: {FEATURE_TRANSFORMS[syn_config.features]}")
        tick("features", t0)
    elif config.features == "scattering":
        from dpmix_core.data import Dataset
        from dpmix_core.data.scattering import scattering_features

        extra_versions.append("kymatio")
        prog.phase("features")
        t0 = time.perf_counter()
        check = lambda: stop()  # noqa: E731
        f_train = scattering_features(ds.x_train, device=str(device), check=check)
        f_test = scattering_features(x_test_raw, device=str(device), check=check)
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
        notes.append("features: ScatterNet (J=2, L=8) coefficients of pixels/255, a fixed public transform")
        tick("features", t0)
    k = ds.num_classes
    regression = config.task == "regression"
    num_outputs = 1 if regression else k

    # ---------------------------------------------------------------- what the model trains on
    epsilon: dict[str, Any] = {}
    delta: float | None = None
    privacy_card = None
    extra: dict[str, Any] = {}
    test_map: Callable[[np.ndarray], np.ndarray] = D.pixels01
    if syn_config is not None and config.method in ("mixing", "label-laplace"):
        from dpmix_core.synthesis.export import privacy_card as make_card
        from dpmix_core.synthesis.pipeline import synthesize

        prog.phase("synthesis")
        t0 = time.perf_counter()
        synthesis = (
            synthesize(syn_config, raw_ds, transformed=ds, job=True)
            if released_features
            else synthesize(syn_config, ds, job=True)
        )
        tick("synthesis", t0)
        stop(force=True)
        x_all, y_all = synthesis.data.x, synthesis.data.y
        if config.method == "label-laplace":  # features released unchanged (in order): the real ones, as pixels/255
            x_all = D.pixels01(ds.x_train)
        test_map = D.release_feature_map(synthesis.config, ds.x_train)
        privacy_card = make_card(synthesis)
        extra["released_points"] = int(x_all.shape[0])
        extra["release_notes"] = list(synthesis.data.notes)
        if config.method == "mixing":
            epsilon = {e["accountant"]: e["epsilon"] for e in privacy_card["epsilons"]}
            delta = synthesis.config.delta
            extra["sigma_x"], extra["sigma_y"] = synthesis.config.sigma_x, synthesis.config.sigma_y
        else:
            epsilon = {"laplace": _json_eps(getattr(synthesis.data.release, "epsilon", None))}
            delta = 0.0
            notes.append("label-only Laplace: features are not private; epsilon covers the labels only")
    else:
        x_all = D.pixels01(ds.x_train)
        y_all = ds.y_train.astype(np.float32)[:, None] if regression else D.one_hot(ds.y_train, k)
    test_x = ds.x_test if ds.x_test is not None else x_test_raw
    test_y = ds.y_test if ds.y_test is not None else y_test_raw
    x_test = test_map(test_x)
    y_test = torch.as_tensor(test_y.astype(np.float32) if regression else test_y.astype(np.int64))

    rng_split = np.random.default_rng(int(seeds[0]))
    if config.val_fraction > 0:
        x_tr, y_tr, x_va, y_va = D.split_validation(x_all, y_all, config.val_fraction, rng_split)
    else:
        x_tr, y_tr, x_va, y_va = x_all, y_all, x_all[:0], y_all[:0]
    if config.method in ("dp-sgd", "dp-pca") and len(x_va):
        notes.append(
            "validation accuracy is measured on held-out private records and is not covered by epsilon "
            "(shown for monitoring only; nothing is selected with it)"
        )

    if config.method == "dp-pca":
        from dpmix_core.training.pca import fit_projection

        prog.phase("pca")
        t0 = time.perf_counter()
        proj = fit_projection(
            x_tr,
            num_components=config.pca_components,
            epsilon=config.pca_epsilon,
            delta=config.pca_delta,
            seed=int(seeds[3]),
        )
        x_tr, x_va, x_test = proj.transform(x_tr), proj.transform(x_va), proj.transform(x_test)
        input_shape = (config.pca_components,)
        epsilon = {"analytic-gaussian": _json_eps(proj.epsilon)}
        delta = None if math.isinf(proj.epsilon) else config.pca_delta
        notes.extend(proj.notes)
        notes.append(
            "only the projection is DP: the linear classifier is trained non-privately on the projected "
            "private records (the DP-PCA baseline's protocol)"
        )
        tick("pca", t0)
    if config.method == "non-private":
        epsilon, delta = {"none": "inf"}, None
        notes.append("non-private baseline: trained on the real training records")

    if config.input_norm == "rms":
        scale = np.float32(D.rms_scale(x_tr))
        x_tr, x_va, x_test = x_tr * scale, x_va * scale, x_test * scale
        extra["input_scale"] = float(scale)

    # ---------------------------------------------------------------- model and training
    to = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32).to(device)  # noqa: E731
    xt, yt, xv, yv = to(x_tr), to(y_tr), to(x_va), to(y_va)
    xtest, ytest = to(x_test), y_test.to(device)
    torch.manual_seed(int(seeds[2]))
    model = build_model(
        config.model, input_shape=input_shape, num_outputs=num_outputs, normalised_features=released_features
    ).to(device)
    settings = OptimSettings(
        optimizer=config.optimizer,
        lr=config.lr,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
        schedule=config.schedule,
        lr_step_epochs=config.lr_step_epochs,
        lr_gamma=config.lr_gamma,
        epochs=config.epochs,
        batch_size=config.batch_size,
        lr_milestones=config.lr_milestones,
        early_stopping=config.early_stopping if len(x_va) else None,
    )
    if config.early_stopping is not None and not len(x_va):
        notes.append("early stopping needs a validation split (val_fraction > 0): trained every epoch")
    loss_fn = get_loss(config.loss)
    batch_gen = torch.Generator().manual_seed(int(seeds[1]))
    eval_fraction = len(x_test) / max(len(x_tr), 1)

    def on_epoch(entry: dict) -> None:
        prog.epoch(entry, eval_fraction)

    t0 = time.perf_counter()
    if config.method == "dp-sgd":
        from dpmix_core.training.dpsgd import calibrate_noise_multiplier, dpsgd_epsilons, steps_per_epoch, train_dpsgd

        extra_versions.append("opacus")
        prog.phase("calibration")
        n_priv = int(xt.shape[0])
        steps = steps_per_epoch(n_priv, config.batch_size) * config.epochs
        z = calibrate_noise_multiplier(
            n=n_priv,
            batch_size=config.batch_size,
            steps=steps,
            target_epsilon=config.dpsgd_epsilon,
            delta=config.dpsgd_delta,
            accountant=config.dpsgd_accountant,
        )
        tick("calibration", t0)
        noise_gen = torch.Generator(device=device).manual_seed(int(seeds[3]))
        t0 = time.perf_counter()
        model, fit_res = train_dpsgd(
            model,
            loss_fn,
            xt,
            yt,
            settings=settings,
            noise_multiplier=z,
            clip=config.dpsgd_clip,
            generator=batch_gen,
            noise_generator=noise_gen,
            task=config.task,
            x_val=xv,
            y_val=yv,
            on_epoch=on_epoch,
            stop=stop,
        )
        tick("train", t0)
        epsilon = dpsgd_epsilons(
            n=n_priv, batch_size=config.batch_size, steps=steps, noise_multiplier=z, delta=config.dpsgd_delta
        )
        delta = config.dpsgd_delta
        extra["dpsgd"] = {
            "noise_multiplier": z,
            "sample_rate": config.batch_size / n_priv,
            "steps": steps,
            "clip": config.dpsgd_clip,
            "target_epsilon": config.dpsgd_epsilon,
            "calibrated_with": config.dpsgd_accountant,
        }
        notes.append(
            f"DP-SGD noise multiplier calibrated with {config.dpsgd_accountant}; epsilon also from "
            "Opacus' RDP and PRV accountants on the same (q, z, steps)"
        )
    else:
        fit_res = fit(
            model,
            loss_fn,
            xt,
            yt,
            settings=settings,
            generator=batch_gen,
            task=config.task,
            x_val=xv,
            y_val=yv,
            on_epoch=on_epoch,
            stop=stop,
        )
        tick("train", t0)

    # ---------------------------------------------------------------- evaluation on the real test split
    stop(force=True)
    prog.phase("evaluate", epoch=config.epochs)
    t0 = time.perf_counter()
    metrics = evaluate(model, xtest, ytest, task=config.task, num_classes=k)
    tick("evaluate", t0)
    val_final = fit_res.history[-1]["val_accuracy"] if fit_res.history else None
    if fit_res.best_epoch is not None:
        val_final = fit_res.history[fit_res.best_epoch - 1]["val_accuracy"]
        notes.append(
            f"early stopping (patience {config.early_stopping}): "
            f"{'stopped after' if fit_res.stopped_early else 'ran'} {len(fit_res.history)} epochs, "
            f"kept the weights of epoch {fit_res.best_epoch} (best validation accuracy)"
        )
    collapsed = (
        None
        if regression
        else collapse_reason(
            fit_res.history, val_majority=_majority_rate(y_va), prediction_share=metrics["prediction_share"]
        )
    )
    if collapsed is not None:
        notes.append(collapsed)
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
        "val_accuracy": val_final,
        "collapsed": collapsed is not None,
        "collapse_reason": collapsed,
        "best_epoch": fit_res.best_epoch,
        "epochs_run": len(fit_res.history),
        "epsilon": epsilon,
        "delta": delta,
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
        "privacy_card": privacy_card,
        "notes": notes,
        **extra,
    }
