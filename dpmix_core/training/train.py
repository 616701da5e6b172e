"""The training loop: tensors in memory, one index gather per batch, no per-sample Python.

``fit`` trains any model on (x, y) float tensors already on their device;
``evaluate`` measures accuracy (and MSE for regression). Both respect
``torch.set_num_threads`` (nothing here changes it). Randomness: the batch
order comes from ``generator`` (a CPU ``torch.Generator``); dropout and
initialisation from torch's global RNG, seeded by the runner.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from dpmix_core.data import pick_rows
from dpmix_core.training.cancel import Cancelled, StopCheck
from dpmix_core.training.checkpoint import Checkpointer, data_fingerprint, model_spec
from dpmix_core.training.losses import tied_label_shares
from dpmix_core.training.names import OPTIMIZERS, PRECISIONS, SCHEDULES
from dpmix_core.training.precision import autocast

__all__ = [
    "Cancelled",
    "StopCheck",
    "OptimSettings",
    "FitResult",
    "make_optimizer",
    "match_state_layout",
    "lr_factor",
    "plateau_factor",
    "EarlyStopper",
    "fit",
    "end_epoch",
    "evaluate",
    "predict",
]


@dataclass(frozen=True)
class OptimSettings:
    """Optimizer and schedule: Adam or SGD (momentum), constant / step (x gamma every k epochs) / multistep / cosine
    / plateau.

    ``multistep``: x gamma at each epoch in ``lr_milestones`` (DPFMix App. E.3:
    ÷10 at 80, 120, 160). ``plateau``: x gamma once ``lr_patience`` epochs pass without a lower validation loss
    (torch's ``ReduceLROnPlateau``; :func:`plateau_factor`); it needs a validation split. ``early_stopping``: patience
    in epochs on the
    validation accuracy, restoring the best weights (thesis §4.2, appendix B:
    Keras ``EarlyStopping(monitor='val_accuracy', patience=3,
    restore_best_weights=True)``); None trains every epoch.
    """

    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9
    weight_decay: float = 0.0
    schedule: str = "constant"
    lr_step_epochs: int = 10
    lr_gamma: float = 0.5
    epochs: int = 10
    batch_size: int = 128
    lr_milestones: tuple[int, ...] = ()
    early_stopping: int | None = None
    precision: str = "fp32"  # "bf16": forward passes under bfloat16 autocast (training.precision)
    lr_patience: int = 10  # plateau: epochs without a lower validation loss before x gamma (torch's default)

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}. Found {self.precision!r}.")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}. Found {self.optimizer!r}.")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}. Found {self.schedule!r}.")
        if self.schedule == "multistep" and not self.lr_milestones:
            raise ValueError("schedule 'multistep' needs lr_milestones (epochs at which lr is multiplied by gamma).")
        if self.early_stopping is not None and self.early_stopping < 1:
            raise ValueError(f"early_stopping patience must be >= 1 or None. Found {self.early_stopping}.")
        if self.lr_patience < 0:
            raise ValueError(f"lr_patience must be >= 0. Found {self.lr_patience}.")


def make_optimizer(params, settings: OptimSettings, *, fused: bool = False) -> torch.optim.Optimizer:
    """Adam or SGD from ``settings``; ``fused``: torch's one-kernel Adam (the same update up to float rounding).

    :func:`fit` asks for the fused Adam on a CPU, where it makes the thesis CNN's batch-32 training about 1.2x
    faster on 2 cores (docs/PERFORMANCE.md). The fused kernel reads a moment tensor whose memory layout differs
    from its weight's as if they matched, so state loaded from a checkpoint is first put in its weight's layout
    (:func:`match_state_layout`). DP-SGD keeps the default (Opacus sets the gradients itself; not measured fused).
    """
    if settings.optimizer == "adam":
        return torch.optim.Adam(params, lr=settings.lr, weight_decay=settings.weight_decay, fused=fused or None)
    return torch.optim.SGD(params, lr=settings.lr, momentum=settings.momentum, weight_decay=settings.weight_decay)


def match_state_layout(optimizer: torch.optim.Optimizer) -> None:
    """Give every per-weight state tensor (Adam's moments, SGD's momentum) its weight's memory layout, in place.

    A checkpoint saved before :func:`~dpmix_core.training.models.build_model` kept its CNNs channels-last holds
    NCHW moments for NHWC weights; the values are kept, only their layout changes.
    """
    for param, state in optimizer.state.items():
        for name, value in state.items():
            if torch.is_tensor(value) and value.shape == param.shape and value.stride() != param.stride():
                state[name] = torch.empty_like(param).copy_(value)


def lr_factor(settings: OptimSettings, epoch: int, val_losses: Sequence[float] = ()) -> float:
    """Learning-rate multiplier in epoch ``epoch`` (0-based): step = gamma^(epoch // k) (thesis: halved every 10).

    multistep = gamma^(number of milestones <= epoch), torch's MultiStepLR rule (DPFMix App. E.3). plateau =
    :func:`plateau_factor` of ``val_losses``, the validation losses of the epochs before ``epoch``.
    """
    if settings.schedule == "plateau":
        return plateau_factor(val_losses, gamma=settings.lr_gamma, patience=settings.lr_patience)
    if settings.schedule == "step":
        return settings.lr_gamma ** (epoch // settings.lr_step_epochs)
    if settings.schedule == "multistep":
        return settings.lr_gamma ** sum(1 for m in settings.lr_milestones if m <= epoch)
    if settings.schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * epoch / settings.epochs))
    return 1.0


def plateau_factor(val_losses: Sequence[float], *, gamma: float, patience: int) -> float:
    """torch's ``ReduceLROnPlateau(mode="min", factor=gamma, patience=patience)`` replayed on ``val_losses``.

    The multiplier after one scheduler step per finished epoch, from torch's own scheduler on a throw-away
    optimiser: a pure function of the history, so a run resumed from a checkpoint (whose history is restored)
    continues at the same rate. Relative threshold 1e-4, no cooldown and no minimum rate are torch's defaults;
    ``eps=0`` makes the factor exactly gamma^k (torch's 1e-8 would stop it at 1e-8 on the probe's rate of 1).
    """
    if not 0 < gamma < 1:
        raise ValueError(f"a plateau schedule needs 0 < lr_gamma < 1. Found {gamma}.")
    probe = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(probe, mode="min", factor=gamma, patience=patience, eps=0.0)
    for loss in val_losses:
        scheduler.step(loss)
    return float(probe.param_groups[0]["lr"])


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


@dataclass
class FitResult:
    history: list[dict] = field(default_factory=list)  # one dict per epoch
    samples: int = 0  # training samples processed (all epochs)
    seconds: float = 0.0  # time in training steps only (no evaluation)
    best_epoch: int | None = None  # 1-based epoch whose weights were kept (early stopping), else None
    stopped_early: bool = False
    resumed_from: int | None = None  # epochs restored from a checkpoint (run by an earlier worker), else None
    checkpoint_notes: list[str] = field(default_factory=list)  # why a checkpoint was ignored or not saved

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0


EpochCallback = Callable[[dict], None]


class EarlyStopper:
    """Keras ``EarlyStopping(monitor='val_accuracy', patience=p, restore_best_weights=True)`` (thesis appendix B).

    ``update(model, val_accuracy)`` after each epoch returns True when ``patience``
    epochs passed without a strictly better validation accuracy; ``restore``
    loads the best epoch's weights back into the model.
    """

    def __init__(self, patience: int) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1. Found {patience}.")
        self.patience = patience
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.best_state: dict | None = None
        self.waited = 0

    def update(self, model: nn.Module, val_accuracy: float | None, epoch: int) -> bool:
        if val_accuracy is None:
            return False
        if self.best is None or val_accuracy > self.best:
            self.best, self.best_epoch, self.waited = val_accuracy, epoch, 0
            self.best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            return False
        self.waited += 1
        return self.waited >= self.patience

    def restore(self, model: nn.Module) -> None:
        if self.best_state is not None:
            model.load_state_dict(self.best_state)

    def state(self) -> dict:
        """What a checkpoint needs to continue counting patience (see :mod:`dpmix_core.training.checkpoint`)."""
        return {"best": self.best, "best_epoch": self.best_epoch, "best_state": self.best_state, "waited": self.waited}

    def load_state(self, state: dict) -> None:
        self.best, self.best_epoch = state["best"], state["best_epoch"]
        self.best_state, self.waited = state["best_state"], state["waited"]


def fit(
    model: nn.Module,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    settings: OptimSettings,
    generator: torch.Generator,
    task: str = "classification",
    x_val: torch.Tensor | None = None,
    y_val: torch.Tensor | None = None,
    on_epoch: EpochCallback | None = None,
    stop: StopCheck | None = None,
    checkpoint: Checkpointer | None = None,
) -> FitResult:
    """Mini-batch training for ``settings.epochs`` epochs on shuffled in-memory tensors.

    ``on_epoch`` gets {epoch (1-based), loss (mean over the epoch), lr,
    val_accuracy, val_mse, val_loss, seconds (training time so far)} after each epoch;
    ``stop`` is polled between batches (it rate-limits itself) and at every
    epoch end. With ``settings.early_stopping`` and a validation split,
    training stops after that many epochs without a better validation
    accuracy and the best epoch's weights are restored (thesis §4.2). With ``checkpoint``, training
    continues from the run's last saved epoch when there is one that matches, and saves its state at
    epoch ends (:mod:`dpmix_core.training.checkpoint`); ``on_epoch`` is then called once with the last
    restored entry.

    Args:
        model: the module to train, in place, on the device of ``x``.
        loss_fn: loss(outputs, targets) -> mean loss over the batch (see ``training.losses.get_loss``).
        x: (n, d) float32 training rows, n >= 1 (the models reshape them).
        y: (n, ...) targets in the form ``loss_fn`` expects (e.g. (n, K) soft or one-hot label rows).
        settings: optimizer, learning rate, schedule, epochs, batch size and early-stopping patience.
        generator: CPU ``torch.Generator`` for the shuffling (one permutation per epoch).
        task: "classification" or "regression", for the validation metrics (see :func:`evaluate`).
        x_val: validation rows, or None (no validation metrics, no early stopping).
        y_val: validation targets (class indices or label rows), or None.
        on_epoch: called with each epoch's history entry (the dict above).
        stop: a :class:`StopCheck`, or None.
        checkpoint: where to save and resume the training state, or None (no checkpoints).

    Returns:
        The :class:`FitResult`: ``history`` (one dict per epoch run), ``samples`` and ``seconds`` (training
        steps only), with early stopping ``best_epoch`` (1-based) and ``stopped_early``, and with a
        checkpoint ``resumed_from`` (epochs restored) and ``checkpoint_notes``.

    Raises:
        ValueError: ``x`` has no rows.
        Cancelled: ``stop`` asked the run to stop.
    """
    n = x.shape[0]
    if n == 0:
        raise ValueError("no training samples.")
    if settings.schedule == "plateau" and (x_val is None or not len(x_val)):
        raise ValueError("schedule 'plateau' lowers the rate on the validation loss: it needs a validation split.")
    optimizer = make_optimizer(model.parameters(), settings, fused=x.device.type == "cpu")
    result = FitResult()
    stopper = (
        EarlyStopper(settings.early_stopping) if settings.early_stopping and x_val is not None and len(x_val) else None
    )
    trainee = _Trainee(model, optimizer, generator, result, stopper, x.device)
    identity: dict = {}
    start = 0
    if checkpoint is not None:
        identity = {
            "settings": _settings_identity(settings),
            "data": data_fingerprint(x, y, *(t for t in (x_val, y_val) if t is not None)),
            "model_spec": model_spec(model),
        }
        start = _resume(checkpoint, identity, trainee)
        if start and on_epoch is not None:
            on_epoch(result.history[-1])
    last_save = time.monotonic()
    for epoch in range(start, settings.epochs):
        if stop is not None:
            stop(force=True)
        lr = settings.lr * lr_factor(settings, epoch, [h["val_loss"] for h in result.history])
        set_lr(optimizer, lr)
        model.train()
        t0 = time.perf_counter()
        order = torch.randperm(n, generator=generator).to(x.device)
        epoch_loss = _train_epoch(
            model, optimizer, loss_fn, x, y, order, settings.batch_size, stop, precision=settings.precision
        )
        result.seconds += time.perf_counter() - t0
        result.samples += n
        end_epoch(
            result,
            model,
            epoch=epoch,
            loss=epoch_loss,
            lr=lr,
            loss_fn=loss_fn,
            task=task,
            x_val=x_val,
            y_val=y_val,
            on_epoch=on_epoch,
        )
        if stopper is not None and stopper.update(model, result.history[-1]["val_accuracy"], epoch + 1):
            result.stopped_early = True
            break
        if (
            checkpoint is not None
            and epoch + 1 < settings.epochs
            and time.monotonic() - last_save >= checkpoint.every_s
        ):
            _save(checkpoint, identity, trainee, epoch + 1)
            last_save = time.monotonic()
    if stopper is not None:
        stopper.restore(model)
        result.best_epoch = stopper.best_epoch
    return result


def _settings_identity(settings: OptimSettings) -> str:
    """The settings a checkpoint must match; float32 leaves ``precision`` out (checkpoints saved before it resume)."""
    d = asdict(settings)
    if d["precision"] == "fp32":
        d.pop("precision")
    if d["schedule"] != "plateau":  # checkpoints saved before the plateau schedule resume
        d.pop("lr_patience")
    return json.dumps(d, sort_keys=True)


def _train_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    order: torch.Tensor,
    batch_size: int,
    stop: StopCheck | None,
    *,
    precision: str = "fp32",
) -> float:
    """One pass over ``x`` in the batches of ``order``; the epoch's mean loss (one device sync per epoch).

    ``precision`` "bf16": the forward pass only runs under bfloat16 autocast (backward follows its dtypes)."""
    total = torch.zeros((), device=x.device)
    for first in range(0, len(order), batch_size):
        idx = order[first : first + batch_size]
        xb, yb = x.index_select(0, idx), y.index_select(0, idx)
        optimizer.zero_grad(set_to_none=True)
        with autocast(precision, x.device):
            out = model(xb)
        loss = loss_fn(out.float(), yb)  # bf16 outputs: the loss is computed in float32
        loss.backward()
        optimizer.step()
        total += loss.detach() * len(idx)
        if stop is not None:
            stop()
    return float(total) / len(order)


def fit_closed_form(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    sigma_x: float,
    sigma_y: float = 0.0,
    task: str = "classification",
    x_val: torch.Tensor | None = None,
    y_val: torch.Tensor | None = None,
    on_epoch: EpochCallback | None = None,
) -> FitResult:
    """Fit a linear model's weights in closed form: noise-corrected least squares (model ``corrected-lsq``).

    See :mod:`dpmix_core.training.corrected_lsq`: ``sigma_x`` and ``sigma_y`` are the release's published noise
    on features and labels (0 for real records); the eigenvalue floor is chosen on ``x_val``/``y_val`` (the
    release's own held-out points). The history has one entry: ``loss`` is the mean squared error on the fitted
    points, ``val_loss`` the corrected squared error on the held-out points (the choice's score), ``floor`` the
    chosen floor, ``val_accuracy`` as for trained models; no optimiser runs (``lr`` None). Regression fits the
    label value (one column).

    Raises:
        ValueError: a model without a single ``linear`` layer, or what
            :func:`~dpmix_core.training.corrected_lsq.corrected_least_squares` refuses.
    """
    from dpmix_core.training.corrected_lsq import corrected_least_squares

    layer = getattr(model, "linear", None)
    if not isinstance(layer, nn.Linear):
        raise ValueError(f"closed-form fitting needs a linear model. Found {type(model).__name__}.")
    as_rows = lambda t: t.detach().cpu().numpy().reshape(len(t), -1)  # noqa: E731
    targets = lambda t: as_rows(t if task != "regression" or t.ndim > 1 else t[:, None])  # noqa: E731
    val = (x_val, y_val) if x_val is not None and y_val is not None and len(x_val) > 0 else None
    t0 = time.perf_counter()
    lin = corrected_least_squares(
        as_rows(x),
        targets(y),
        sigma_x=sigma_x,
        sigma_y=sigma_y,
        x_val=None if val is None else as_rows(val[0]),
        y_val=None if val is None else targets(val[1]),
    )
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(lin.weight.T, dtype=layer.weight.dtype))
        layer.bias.copy_(torch.as_tensor(lin.bias, dtype=layer.bias.dtype))
    result = FitResult(samples=len(x), seconds=time.perf_counter() - t0)
    entry = {
        "epoch": 1,
        "loss": lin.train_mse,
        "lr": None,
        "val_accuracy": None,
        "val_mse": None,
        "val_loss": lin.scores.get(lin.floor),
        "floor": lin.floor,
        "floor_scores": {f"{tau:g}": risk for tau, risk in lin.scores.items()},  # held-out corrected risk per floor
        "floor_errors": {f"{tau:g}": se for tau, se in lin.score_errors.items()},  # their standard errors
        "ineligible_floors": list(lin.ineligible),  # implausibly low, or not told from the largest: not chosen
        "seconds": result.seconds,
    }
    if val is not None:
        metrics = evaluate(model, val[0], val[1], task=task)
        entry.update(val_accuracy=metrics["accuracy"], val_mse=metrics["mse"])
    result.history.append(entry)
    if on_epoch is not None:
        on_epoch(entry)
    return result


@dataclass
class _Trainee:
    """The training objects a checkpoint saves and restores (:mod:`dpmix_core.training.checkpoint`)."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    generator: torch.Generator
    result: FitResult
    stopper: EarlyStopper | None
    device: torch.device

    def state(self, epochs_done: int) -> dict:
        """Everything needed to continue after ``epochs_done`` epochs."""
        out = {
            "epoch": epochs_done,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "history": self.result.history,
            "samples": self.result.samples,
            "seconds": self.result.seconds,
            "stopper": self.stopper.state() if self.stopper is not None else None,
        }
        if self.device.type == "cuda":
            out["cuda_rng"] = torch.cuda.get_rng_state(self.device)
        return out

    def restore(self, state: dict) -> int:
        """Load ``state`` (its identity already matched) into the objects; the epochs it holds."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        match_state_layout(self.optimizer)
        self.generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        if self.device.type == "cuda" and "cuda_rng" in state:
            torch.cuda.set_rng_state(state["cuda_rng"], self.device)
        if self.stopper is not None:
            self.stopper.load_state(state["stopper"])
        self.result.history = list(state["history"])
        self.result.samples, self.result.seconds = int(state["samples"]), float(state["seconds"])
        self.result.resumed_from = int(state["epoch"])
        return self.result.resumed_from


def _save(checkpoint: Checkpointer, identity: dict, trainee: _Trainee, epochs_done: int) -> None:
    """Save the training state after ``epochs_done`` epochs; a failed save is noted once, never fatal."""
    try:
        checkpoint.save({**identity, **trainee.state(epochs_done)})
    except (OSError, ValueError, RuntimeError) as exc:
        note = f"checkpoint not saved ({exc}): this run cannot resume if it is stopped"
        if note not in trainee.result.checkpoint_notes:
            trainee.result.checkpoint_notes.append(note)


def _resume(checkpoint: Checkpointer, identity: dict, trainee: _Trainee) -> int:
    """Restore a matching checkpoint; the number of epochs it holds (0: none, or one that does not match)."""
    state, why_not = checkpoint.load(identity)
    if why_not is not None:
        trainee.result.checkpoint_notes.append(why_not)
    if state is None:
        return 0
    if (state["stopper"] is None) != (trainee.stopper is None):
        trainee.result.checkpoint_notes.append(
            "checkpoint was made with another early-stopping setting; trained from epoch 0"
        )
        return 0
    return trainee.restore(state)


def end_epoch(
    result: FitResult,
    model: nn.Module,
    *,
    epoch: int,
    loss: float,
    lr: float,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    task: str,
    x_val: torch.Tensor | None,
    y_val: torch.Tensor | None,
    on_epoch: EpochCallback | None,
) -> None:
    """Append the epoch's history entry (validation metrics when a split is given) and report it.

    Args:
        result: the run's record; the entry is appended to ``result.history`` (``seconds`` is read from it).
        model: the model being trained, evaluated on the validation split.
        epoch: the epoch just finished, 0-based (stored 1-based as "epoch").
        loss: the mean training loss over the epoch's samples.
        lr: the learning rate used in the epoch.
        loss_fn: the training loss, also reported on the validation split as "val_loss".
        task: "classification" or "regression" (see :func:`evaluate`).
        x_val: validation rows, or None (or empty) for no validation metrics.
        y_val: validation targets, or None.
        on_epoch: called with the entry, or None.

    Returns:
        None. The entry holds epoch, loss, lr, val_accuracy, val_mse, val_loss (None without validation) and
        seconds (training time so far).
    """
    entry = {"epoch": epoch + 1, "loss": loss, "lr": lr, "val_accuracy": None, "val_mse": None, "val_loss": None}
    if x_val is not None and y_val is not None and len(x_val):
        metrics = evaluate(model, x_val, y_val, task=task, loss_fn=loss_fn)
        entry.update(val_accuracy=metrics["accuracy"], val_mse=metrics["mse"], val_loss=metrics["loss"])
    entry["seconds"] = result.seconds
    result.history.append(entry)
    if on_epoch is not None:
        on_epoch(entry)


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, *, batch_size: int = 256) -> torch.Tensor:
    """Model outputs for every row, in eval mode, a batch at a time."""
    model.eval()
    outs = [model(x[i : i + batch_size]) for i in range(0, x.shape[0], batch_size)]
    return torch.cat(outs) if outs else torch.empty(0)


@torch.no_grad()
def evaluate(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    task: str = "classification",
    num_classes: int | None = None,
    batch_size: int = 256,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> dict:
    """{accuracy, accuracy_halves, mse, loss, prediction_share}: accuracy against class indices or argmax(y).

    A label row whose largest value several classes share (label-only Laplace's labels clamped to [0, 1] often
    tie at 1) counts a prediction among its k tied classes as 1/k right: the accuracy a uniformly random tie-break
    gives on average, where ``argmax`` alone would call the first tied class the label and favour class 0.

    ``prediction_share`` (classification) is the largest fraction of rows
    predicted as one class: near 1 for the constant predictor (collapse check).

    ``accuracy_halves`` is the accuracy on the even and on the odd rows (pick a
    hyper-parameter on one half, report the other). ``loss`` is ``loss_fn`` on
    all rows (None without it): on a release's own held-out split it is the
    selection signal that stays meaningful when the released labels are too
    noisy for their argmax to be (thesis §4.1).

    Regression (one output, the label as a number): ``mse`` to y and
    ``accuracy`` of the prediction rounded to the nearest class (clamped to
    0..K-1 when ``num_classes`` is given).

    Args:
        model: the trained model (put in eval mode).
        x: (n, d) float32 rows on the model's device.
        y: (n,) class indices, or (n, K) label rows (argmax taken); for regression the label values.
        task: "classification" or "regression".
        num_classes: K, used for regression only, to clamp the rounded predictions; None: no clamp.
        batch_size: rows per forward pass.
        loss_fn: loss(outputs, y) over all rows, or None.

    Returns:
        dict: "accuracy" (a fraction in [0, 1]), "accuracy_halves" ([even rows, odd rows], None for an empty
        half), "mse" (regression, else None), "loss" (None without ``loss_fn``), "prediction_share"
        (classification, else None). With no rows in ``x`` every value is None (halves [None, None]).
    """
    if x.shape[0] == 0:
        return {"accuracy": None, "accuracy_halves": [None, None], "mse": None, "loss": None, "prediction_share": None}
    out = predict(model, x, batch_size=batch_size)
    loss = float(loss_fn(out, y.to(out.device))) if loss_fn is not None else None
    mse, share = None, None
    if task == "regression":
        pred = out.reshape(-1).float()
        target = y.reshape(-1).float().to(pred.device)
        mse = float(torch.mean((pred - target) ** 2))
        hi = (num_classes - 1) if num_classes else None
        correct = torch.round(pred.clamp(0, hi) if hi is not None else pred) == torch.round(target)
    else:
        pred = out.argmax(dim=1)
        if y.ndim == 2:  # right with weight 1/k among the k classes that share a row's largest value
            correct = tied_label_shares(y.to(out.device)).gather(1, pred[:, None]).squeeze(1)
        else:
            correct = pred == y.to(out.device)
        share = float(torch.bincount(pred).max()) / len(pred)
    correct = correct.float()
    halves = [float(half.mean()) if len(half := pick_rows(correct, rows)) else None for rows in ("even", "odd")]
    return {
        "accuracy": float(correct.mean()),
        "accuracy_halves": halves,
        "mse": mse,
        "loss": loss,
        "prediction_share": share,
    }
