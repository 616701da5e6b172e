"""``python -m dpmix_core train``: a few repeats of one run in this process, summarised as mean ± std.

With ``--checkpoint-dir DIR`` each run saves its training state in ``DIR/<run key>.ckpt`` at most once a
minute (``$DPMIX_CHECKPOINT_S``, as sweep workers); the same command run again (after Ctrl-C, a closed terminal, a reboot) continues each unfinished
run from its last saved epoch, and a finished run's file is removed.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from pathlib import Path

from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.experiments.runner import run_config
from dpmix_core.resources.files import check_new_file
from dpmix_core.resources.limits import Limits, check_cost, check_training_cost, limits_from_env
from dpmix_core.runtime.worker import checkpoint_interval
from dpmix_core.synthesis.pipeline import SynthesisConfig, planned_release, release_cost
from dpmix_core.training.protocols import protocol_options, train_epochs

__all__ = ["check_before_training", "checkpoint_folder", "train_repeats"]


def checkpoint_folder(path: str | os.PathLike) -> Path:
    """``--checkpoint-dir``: an existing writable folder, or one made in an existing writable folder.

    Raises ValueError with one line naming the path (checked before any work is done)."""
    folder = Path(path).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"checkpoint folder {str(folder)!r} is a file; give a folder.")
    if not folder.exists():
        check_new_file(folder, what="checkpoint")  # its parent exists and is writable
        try:
            folder.mkdir()
        except OSError as exc:
            raise ValueError(f"checkpoint folder {str(folder)!r} cannot be made ({exc.strerror or exc}).") from None
    return check_new_file(folder / "run.ckpt", what="checkpoint").parent


def check_before_training(base: RunConfig, repeats: int, limits: Limits | None = None) -> None:
    """Everything that can be refused before the first progress line: the precision suits the device, the
    dataset loads and has a test split, the release fits it (l <= n, l <= every class size) and the estimated cost of the
    release and of ``repeats`` trainings is within ``limits`` (ValueError with one line otherwise)."""
    from dpmix_core.experiments.run_data import check_run_on, load_run_dataset
    from dpmix_core.mechanisms import resolve_device
    from dpmix_core.training.data import subsample
    from dpmix_core.training.precision import check_precision

    check_precision(base.precision, resolve_device(base.device))
    limits = limits or limits_from_env()
    ds = load_run_dataset(base)
    if ds.x_test is None:
        raise ValueError(f"dataset {base.dataset!r} has no test split to evaluate on.")
    ds = subsample(ds, train_limit=base.train_limit, test_limit=base.test_limit)
    check_run_on(base, ds)  # the model suits the data, the release fits it
    samples = ds.n_train
    if base.release_file is not None and base.synthesis is not None:  # made already: only training costs
        samples = base.synthesis.T
    elif base.synthesis is not None:
        if base.method == "mixing":
            planned_release(base.synthesis, ds)  # calibrates sigma: an unreachable target is refused here too
            samples = base.synthesis.T
        check_cost(release_cost(base.synthesis, ds), limits, change="T or l", job=True)
    check_training_cost(runs=repeats, epochs=base.epochs, n=samples, d=ds.feature_dim, limits=limits)


class _LineReporter:
    """Turns progress fields into one line per epoch (and per phase) for a terminal (``emit`` None: silent),
    and names the run's checkpoint file when there is a checkpoint folder."""

    def __init__(self, emit: Callable[[str], None] | None, prefix: str, checkpoint: Path | None = None) -> None:
        self.emit = emit
        self.prefix = prefix
        self.checkpoint = checkpoint
        self.checkpoint_every_s = checkpoint_interval()  # $DPMIX_CHECKPOINT_S, as the workers; None: once a minute

    def checkpoint_path(self) -> Path | None:
        return self.checkpoint

    def progress(self, **f) -> None:
        if self.emit is None:
            return
        if f.get("phase") == "train":
            val = "" if f.get("val_accuracy") is None else f" val acc {100 * f['val_accuracy']:.1f} %"
            eta = "" if f.get("eta_seconds") is None else f" eta {f['eta_seconds']:.0f} s"
            self.emit(f"{self.prefix} epoch {f['epoch']}/{f['epochs']} loss {f['loss']:.4f}{val}{eta}")
        elif f.get("phase") == "done":
            self.emit(f"{self.prefix} test accuracy {100 * f['test_accuracy']:.2f} %")
        else:
            self.emit(f"{self.prefix} {f.get('phase')}")

    def should_stop(self) -> bool:
        return False


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def _guarantees(result: dict) -> dict[str, str]:
    """How to read each of the run's epsilons: a release's are its privacy card's guarantees (only those: the card
    decides what covers the release); a run without a card (DP-SGD, DP-PCA) reads each by
    views.sweep_report.epsilon_reading; a run without privacy has none."""
    from dpmix_core.views.sweep_report import epsilon_reading

    card = result.get("privacy_card")
    if card:
        return {e["accountant"]: e["guarantee"] for e in card.get("epsilons", [])}
    return {name: epsilon_reading(name) for name in result["epsilon"] if name != "none"}


def train_repeats(
    *,
    method: str,
    dataset: str,
    data_dir: str | None = None,
    synthesis: SynthesisConfig | None = None,
    model: str = "thesis-cnn",
    loss: str | None = None,
    epochs: int | None = None,
    repeats: int = 1,
    seed: int = 0,
    device: str = "auto",
    dpsgd_epsilon: float | None = None,
    dpsgd_delta: float | None = None,
    progress: Callable[[str], None] | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    **run_options,
) -> dict:
    """Run ``repeats`` seeds (seed, seed+1, ...) of one configuration; JSON-ready summary.

    ``dpsgd_epsilon`` (the CLI's --target-epsilon) is DP-SGD's budget, and
    DP-PCA's when the method is dp-pca; ``run_options`` are further
    RunConfig fields (lr, batch_size, train_limit, ...). Fields not given
    (None or absent) take the model's paper protocol
    (:data:`~dpmix_core.training.protocols.PROTOCOLS`), ``loss`` included;
    ``early_stopping=0`` turns the protocol's early stopping off.
    ``checkpoint_dir``: resumable runs (see the module docstring).
    """
    given = {k: v for k, v in dict(run_options, loss=loss).items() if v is not None}
    mechanism = synthesis.mechanism if synthesis is not None and method in ("mixing", "label-laplace") else None
    own_data = run_options.get("data_file") is not None
    kw = {**protocol_options(model, method=method, mechanism=mechanism, own_data=own_data), **given}
    if kw.get("early_stopping") == 0:  # the CLI's --early-stopping 0: train every epoch
        kw["early_stopping"] = None
    if method == "dp-sgd":
        if dpsgd_epsilon is None:
            raise ValueError("dp-sgd needs a target epsilon (--target-epsilon) to calibrate its noise.")
        kw["dpsgd_epsilon"] = dpsgd_epsilon
        if dpsgd_delta is not None:
            kw["dpsgd_delta"] = dpsgd_delta
    if method == "dp-pca":
        if dpsgd_epsilon is not None:
            kw["pca_epsilon"] = dpsgd_epsilon
        if dpsgd_delta is not None:
            kw["pca_delta"] = dpsgd_delta
    base = RunConfig(
        method,
        dataset=dataset,
        data_dir=None if data_dir is None else str(data_dir),
        synthesis=synthesis if method in ("mixing", "label-laplace") else None,
        model=model,
        epochs=train_epochs(model, own_data=own_data) if epochs is None else epochs,
        seed=seed,
        device=device,
        **kw,
    )
    folder = checkpoint_folder(checkpoint_dir) if checkpoint_dir is not None else None
    check_before_training(base, repeats)
    results = []
    for r in range(repeats):
        cfg = base.replace(seed=seed + r)
        prefix = f"[run {r + 1}/{repeats}, seed {cfg.seed}]"
        file = folder / f"{run_key(cfg)}.ckpt" if folder is not None else None
        result = run_config(cfg, _LineReporter(progress, prefix, file))
        if file is not None:
            file.unlink(missing_ok=True)  # the run is finished: its state is no longer needed
        if progress is not None and result.get("resumed_from_epoch"):
            progress(f"{prefix} continued from its checkpoint after epoch {result['resumed_from_epoch']}")
        results.append(result)
    return _summary(base, results)


def _summary(base: RunConfig, results: list[dict]) -> dict:
    """What ``train --json`` prints for the repeats of ``base``: mean and std over seeds, the first run's privacy
    (every seed makes the same release description), collapse counts and each seed's own numbers."""
    acc, acc_std = _mean_std([res["test_accuracy"] for res in results])
    mses = [res["test_mse"] for res in results if res["test_mse"] is not None]
    mse, mse_std = _mean_std(mses)
    first = results[0]
    return {
        "method": base.method,
        "mechanism": base.mechanism,
        "dataset": base.dataset,
        "repeats": len(results),
        "test_accuracy": acc,
        "test_accuracy_std": acc_std,
        "test_mse": mse,
        "test_mse_std": mse_std,
        "epsilon": first["epsilon"],
        "guarantee": _guarantees(first),
        "delta": first["delta"],
        "seconds": sum(res["seconds"] for res in results),
        "train_samples_per_second": statistics.fmean(res["train_samples_per_second"] for res in results),
        "collapsed": sum(bool(res.get("collapsed")) for res in results),
        "collapse_reason": next((res["collapse_reason"] for res in results if res.get("collapsed")), None),
        "runs": [
            {
                "seed": res["config"]["seed"],
                "run_key": res["run_key"],
                "test_accuracy": res["test_accuracy"],
                "test_mse": res["test_mse"],
                "test_accuracy_bn_recalibrated": res.get("test_accuracy_bn_recalibrated"),  # a diagnostic
                "test_accuracy_by_inputs": res.get("test_accuracy_by_inputs"),  # the same model through each loader
                "seconds": res["seconds"],
                "collapsed": bool(res.get("collapsed")),
                "selection_note": res.get("selection_note"),  # early stopping chose on a split at chance
                "best_epoch": res.get("best_epoch"),
                "epochs_run": res.get("epochs_run"),
                "resumed_from_epoch": res.get("resumed_from_epoch"),
            }
            for res in results
        ],
        "release_file": first.get("release_file"),  # train --release: the file, its hash and when it was made
        "data": first.get("data"),  # train --data-file: the file, its hash and the records held out
        "notes": first["notes"],
        "versions": first["versions"],
        "config": base.to_dict(),
    }
