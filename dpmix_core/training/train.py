"""The training loop: tensors in memory, one index gather per batch, no per-sample Python.

``fit`` trains any model on (x, y) float tensors already on their device;
``evaluate`` measures accuracy (and MSE for regression). Both respect
``torch.set_num_threads`` (nothing here changes it). Randomness: the batch
order comes from ``generator`` (a CPU ``torch.Generator``); dropout and
initialisation from torch's global RNG, seeded by the runner.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from dpmix_core.training.cancel import Cancelled, StopCheck
from dpmix_core.training.names import OPTIMIZERS, SCHEDULES

__all__ = [
    "Cancelled",
    "StopCheck",
    "OptimSettings",
    "FitResult",
    "make_optimizer",
    "lr_factor",
    "fit",
    "end_epoch",
    "evaluate",
    "predict",
]


@dataclass(frozen=True)
class OptimSettings:
    """Optimizer and schedule: Adam or SGD (momentum), constant / step (x gamma every k epochs) / cosine."""

    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9
    weight_decay: float = 0.0
    schedule: str = "constant"
    lr_step_epochs: int = 10
    lr_gamma: float = 0.5
    epochs: int = 10
    batch_size: int = 128

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}. Found {self.optimizer!r}.")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}. Found {self.schedule!r}.")


def make_optimizer(params, settings: OptimSettings) -> torch.optim.Optimizer:
    if settings.optimizer == "adam":
        return torch.optim.Adam(params, lr=settings.lr, weight_decay=settings.weight_decay)
    return torch.optim.SGD(params, lr=settings.lr, momentum=settings.momentum, weight_decay=settings.weight_decay)


def lr_factor(settings: OptimSettings, epoch: int) -> float:
    """Learning-rate multiplier in epoch ``epoch`` (0-based): step = gamma^(epoch // k) (thesis: halved every 10)."""
    if settings.schedule == "step":
        return settings.lr_gamma ** (epoch // settings.lr_step_epochs)
    if settings.schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * epoch / settings.epochs))
    return 1.0


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


@dataclass
class FitResult:
    history: list[dict] = field(default_factory=list)  # one dict per epoch
    samples: int = 0  # training samples processed (all epochs)
    seconds: float = 0.0  # time in training steps only (no evaluation)

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0


EpochCallback = Callable[[dict], None]


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
) -> FitResult:
    """Mini-batch training for ``settings.epochs`` epochs on shuffled in-memory tensors.

    ``on_epoch`` gets {epoch (1-based), loss (mean over the epoch), lr,
    val_accuracy, val_mse, val_loss, seconds (training time so far)} after each epoch;
    ``stop`` is polled between batches (it rate-limits itself) and at every
    epoch end.
    """
    n = x.shape[0]
    if n == 0:
        raise ValueError("no training samples.")
    optimizer = make_optimizer(model.parameters(), settings)
    result = FitResult()
    bs = settings.batch_size
    for epoch in range(settings.epochs):
        if stop is not None:
            stop(force=True)
        lr = settings.lr * lr_factor(settings, epoch)
        set_lr(optimizer, lr)
        model.train()
        t0 = time.perf_counter()
        order = torch.randperm(n, generator=generator).to(x.device)
        total = torch.zeros((), device=x.device)
        for start in range(0, n, bs):
            idx = order[start : start + bs]
            xb, yb = x.index_select(0, idx), y.index_select(0, idx)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.detach() * len(idx)
            if stop is not None:
                stop()
        epoch_loss = float(total) / n  # one device sync per epoch
        result.seconds += time.perf_counter() - t0
        result.samples += n
        end_epoch(result, model, epoch=epoch, loss=epoch_loss, lr=lr, loss_fn=loss_fn, task=task, x_val=x_val,
                  y_val=y_val, on_epoch=on_epoch)
    return result


def end_epoch(result: FitResult, model: nn.Module, *, epoch: int, loss: float, lr: float,
              loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], task: str,
              x_val: torch.Tensor | None, y_val: torch.Tensor | None, on_epoch: EpochCallback | None) -> None:
    """Append the epoch's history entry (validation metrics when a split is given) and report it."""
    entry = {"epoch": epoch + 1, "loss": loss, "lr": lr, "val_accuracy": None, "val_mse": None, "val_loss": None}
    if x_val is not None and len(x_val):
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
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, task: str = "classification",
             num_classes: int | None = None, batch_size: int = 256,
             loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None) -> dict:
    """{accuracy, accuracy_halves, mse, loss}: accuracy against class indices (1-D y) or argmax(y) (2-D y).

    ``accuracy_halves`` is the accuracy on the even and on the odd rows (pick a
    hyper-parameter on one half, report the other). ``loss`` is ``loss_fn`` on
    all rows (None without it): on a release's own held-out split it is the
    selection signal that stays meaningful when the released labels are too
    noisy for their argmax to be (thesis §4.1).

    Regression (one output, the label as a number): ``mse`` to y and
    ``accuracy`` of the prediction rounded to the nearest class (clamped to
    0..K-1 when ``num_classes`` is given).
    """
    if x.shape[0] == 0:
        return {"accuracy": None, "accuracy_halves": [None, None], "mse": None, "loss": None}
    out = predict(model, x, batch_size=batch_size)
    loss = float(loss_fn(out, y.to(out.device))) if loss_fn is not None else None
    mse = None
    if task == "regression":
        pred = out.reshape(-1).float()
        target = y.reshape(-1).float().to(pred.device)
        mse = float(torch.mean((pred - target) ** 2))
        hi = (num_classes - 1) if num_classes else None
        correct = torch.round(pred.clamp(0, hi) if hi is not None else pred) == torch.round(target)
    else:
        labels = y.argmax(dim=1) if y.ndim == 2 else y
        correct = out.argmax(dim=1) == labels.to(out.device)
    correct = correct.float()
    halves = [float(correct[i::2].mean()) if len(correct[i::2]) else None for i in (0, 1)]
    return {"accuracy": float(correct.mean()), "accuracy_halves": halves, "mse": mse, "loss": loss}
