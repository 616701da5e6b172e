"""DP-SGD baseline (Abadi et al. 2016) with Opacus: the method a user would pick instead of releasing data.

Privacy: Poisson sampling at rate q = B/n, per-sample clipping to ``clip``,
Gaussian noise with multiplier z, S = epochs * round(n/B) steps: the
``dp_accounting`` event SelfComposed(PoissonSampled(q, Gaussian(z)), S)
(``dpsgd_event``). The generic accountants consume that event directly (it is
not a mixing release and is never described as one): z is calibrated to the
target (epsilon, delta) with ``pld-poisson`` (or ``rdp-poisson``) through
:func:`dpmix_core.privacy.calibration.calibrate_sigma`, which never overshoots;
we pass z to Opacus (``GradSampleModule`` + ``DPOptimizer``) rather than using
``make_private_with_epsilon``, and report epsilon from our pld-poisson and
rdp-poisson accountants *and* from Opacus' RDP and PRV accountants on the same
(q, z, S).

Private feature ranges (``input_norm="dp-ranges"``, one's own file): the inputs are first rescaled by per-feature
ranges released with Gaussian noise (:mod:`dpmix_core.mechanisms.feature_ranges`), which spend
:data:`RANGES_EPSILON_SHARE` of the target on their own; the run's event is then Composed(ranges, DP-SGD steps), z
is calibrated so that the composition meets the target, and epsilon comes from dp_accounting's PLD (pessimistic,
add/remove-one) and RDP accountants and from Opacus' RDP and PRV accountants on the composition
(:func:`dpsgd_with_ranges_epsilons`).

Batches are drawn by our own Poisson sampling on in-memory tensors (what
Opacus' DPDataLoader does, without a per-sample Python DataLoader).
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from typing import TYPE_CHECKING

import torch
from torch import nn

from dpmix_core.privacy.budget import add_remove_pld_epsilon, add_remove_rdp_epsilon, steps_per_epoch
from dpmix_core.privacy.events import SampledGaussianSteps
from dpmix_core.training.names import BATCHNORM_MODELS, MODELS
from dpmix_core.training.train import (
    FitResult,
    OptimSettings,
    StopCheck,
    end_epoch,
    lr_factor,
    make_optimizer,
    set_lr,
)

if TYPE_CHECKING:
    from opacus import GradSampleModule

__all__ = [
    "steps_per_epoch",
    "dpsgd_event",
    "calibrate_noise_multiplier",
    "dpsgd_epsilons",
    "RANGES_EPSILON_SHARE",
    "ranges_noise_multiplier",
    "dpsgd_with_ranges_event",
    "dpsgd_with_ranges_epsilons",
    "calibrate_with_ranges",
    "check_dpsgd_model",
    "per_sample_module",
    "train_dpsgd",
]


def dpsgd_event(*, n: int, batch_size: int, steps: int, noise_multiplier: float) -> SampledGaussianSteps:
    """DP-SGD's privacy event (Abadi et al. 2016): S steps of the Poisson-subsampled Gaussian, q = B/n.

    ``dpsgd_event(...).dp_event()`` is SelfComposed(PoissonSampled(B/n, Gaussian(z)), steps)
    (:meth:`SampledGaussianSteps.dpsgd`, which the privacy budget uses too).
    """
    return SampledGaussianSteps.dpsgd(n=n, batch_size=batch_size, steps=steps, noise_multiplier=noise_multiplier)


@functools.lru_cache(maxsize=256)
def calibrate_noise_multiplier(
    *, n: int, batch_size: int, steps: int, target_epsilon: float, delta: float, accountant: str = "pld-poisson"
) -> float:
    """Smallest z (to the calibration's relative tolerance, see below) with epsilon <= target under ``accountant``.

    By :func:`~dpmix_core.privacy.calibration.calibrate_sigma`: the returned z is always feasible (epsilon <=
    target) and at most slightly above the smallest one: within a relative 0.2 % for pld-poisson and 1e-5 for
    rdp-poisson, or looser when the calibration's 4 s time budget runs out. Results are cached
    (``functools.lru_cache``) per argument set.

    Args:
        n: the number of training records.
        batch_size: B, the expected Poisson batch size (rate B/n), B <= n.
        steps: S, the total number of noisy steps (``epochs * steps_per_epoch(n, B)``).
        target_epsilon: the epsilon not to exceed; positive and finite.
        delta: in (0, 1).
        accountant: "pld-poisson" (default) or "rdp-poisson" (one that accepts DP events).

    Returns:
        z, the noise multiplier: Gaussian noise standard deviation divided by the clipping norm.

    Raises:
        ValueError: B > n, a bad target or delta, an unknown accountant, or a target that z <= 1e4 cannot reach.
    """
    from dpmix_core.privacy.accountants import get_accountant
    from dpmix_core.privacy.calibration import REPRODUCIBLE, calibrate_sigma

    event = dpsgd_event(n=n, batch_size=batch_size, steps=steps, noise_multiplier=1.0)
    acc = get_accountant(accountant)
    return calibrate_sigma(acc, event, target_epsilon=target_epsilon, delta=delta, time_budget=REPRODUCIBLE).sigma_x


def dpsgd_epsilons(*, n: int, batch_size: int, steps: int, noise_multiplier: float, delta: float) -> dict:
    """epsilon of the DP-SGD run from pld-poisson and rdp-poisson (ours) and Opacus' rdp and prv accountants.

    Values are floats, "inf", or a string starting with "error:" when an
    accountant fails on these parameters.

    Args:
        n: the number of training records.
        batch_size: B, the expected Poisson batch size (rate q = B/n), B <= n.
        steps: S, the total number of noisy steps over the run.
        noise_multiplier: z, the noise standard deviation divided by the clipping norm (>= 0).
        delta: in (0, 1).

    Returns:
        dict with keys "pld-poisson", "rdp-poisson", "opacus-rdp" and "opacus-prv", each an epsilon at
        ``delta`` for add/remove-one adjacency as described above.

    Raises:
        ValueError: B > n, or invalid z, steps or delta for our accountants (Opacus failures are reported in
            the dict instead).
    """
    from dpmix_core.privacy.accountants import get_accountant

    event = dpsgd_event(n=n, batch_size=batch_size, steps=steps, noise_multiplier=noise_multiplier).dp_event()
    out: dict = {}
    for name in ("pld-poisson", "rdp-poisson"):
        out[name] = _number(get_accountant(name).epsilon_of_event(event, delta).epsilon)
    return {**out, **_opacus_epsilons([(noise_multiplier, batch_size / n, steps)], delta)}


def _opacus_epsilons(history: list[tuple[float, float, int]], delta: float) -> dict:
    """{"opacus-rdp": eps, "opacus-prv": eps} of Opacus' accountants on ``history`` ((z, q, steps) entries); an
    accountant that fails says so in its value ("error: ...") instead of failing the run."""
    from opacus.accountants import PRVAccountant, RDPAccountant

    out: dict = {}
    for name, cls in (("opacus-rdp", RDPAccountant), ("opacus-prv", PRVAccountant)):
        acc = cls()
        acc.history = list(history)
        try:
            with warnings.catch_warnings():  # PRV takes log(1 - q) = log 0 at rate-1 steps, and handles it
                warnings.simplefilter("ignore", RuntimeWarning)
                out[name] = _number(float(acc.get_epsilon(delta)))
        except Exception as exc:  # noqa: BLE001 - report, do not fail the run
            out[name] = f"error: {type(exc).__name__}: {exc}"[:200]
    return out


RANGES_EPSILON_SHARE = 0.25  # of the target, what the ranges cost alone; composed, DP-SGD adds ~4 % more noise
_RANGES_CALIBRATION_RTOL = 2e-3  # as pld-poisson's calibration of DP-SGD alone
_RANGES_Z_FLOOR = 0.05  # the smallest z tried: below, the PLD grid of the steps gets large


def ranges_noise_multiplier(*, target_epsilon: float, delta: float) -> float:
    """The private feature ranges' noise multiplier: the analytic Gaussian (Balle & Wang 2018) at
    (:data:`RANGES_EPSILON_SHARE` x target, delta) for sensitivity 1; the composition decides the total."""
    from dpmix_core.mechanisms.descriptions import gaussian_sigma

    return gaussian_sigma(
        epsilon=RANGES_EPSILON_SHARE * target_epsilon, delta=delta, sensitivity=1.0, method="analytic"
    )


def dpsgd_with_ranges_event(*, n: int, batch_size: int, steps: int, noise_multiplier: float, ranges_event):
    """Composed(``ranges_event``, DP-SGD's S Poisson-sampled Gaussian steps): the run's whole release."""
    import dp_accounting

    steps_event = dpsgd_event(n=n, batch_size=batch_size, steps=steps, noise_multiplier=noise_multiplier).dp_event()
    return dp_accounting.ComposedDpEvent([ranges_event, steps_event])


@functools.lru_cache(maxsize=256)
def _calibrate_with_ranges(
    n: int, batch_size: int, steps: int, target_epsilon: float, delta: float, ranges_z: float, rounds: int
) -> float:
    import dp_accounting

    ranges_event = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(ranges_z), rounds)

    def eps(z: float) -> float:
        event = dpsgd_with_ranges_event(
            n=n, batch_size=batch_size, steps=steps, noise_multiplier=z, ranges_event=ranges_event
        )
        return add_remove_pld_epsilon(event, delta)

    if add_remove_pld_epsilon(ranges_event, delta) >= target_epsilon:
        raise ValueError(f"the private feature ranges alone exceed epsilon = {target_epsilon:g}.")
    lo, hi = 0.5, 1.0  # epsilon decreases in z: bracket the target (eps(lo) > target >= eps(hi)), bisect on log z
    while eps(hi) > target_epsilon:
        lo, hi = hi, hi * 2
        if hi > 1e4:
            raise ValueError(f"DP-SGD cannot reach epsilon = {target_epsilon:g} with z <= 1e4 next to the ranges.")
    while lo > _RANGES_Z_FLOOR and eps(lo) <= target_epsilon:
        lo, hi = lo / 2, lo
    while hi / lo > 1 + _RANGES_CALIBRATION_RTOL:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if eps(mid) <= target_epsilon else (mid, hi)
    return hi


def calibrate_with_ranges(
    *, n: int, batch_size: int, steps: int, target_epsilon: float, delta: float, ranges_event
) -> float:
    """DP-SGD's z for which Composed(ranges, steps) has PLD epsilon <= target (bisection on log z, within a
    relative 0.2 % of the smallest such z >= 0.05; never above the target). ``ranges_event``: SelfComposed(Gaussian(z_r),
    rounds) (:meth:`~dpmix_core.mechanisms.feature_ranges.FeatureRanges.dp_event`). ValueError when the ranges
    alone use the whole target or z > 1e4 would be needed."""
    return _calibrate_with_ranges(
        n,
        batch_size,
        steps,
        float(target_epsilon),
        float(delta),
        float(ranges_event.event.noise_multiplier),
        int(ranges_event.count),
    )


def dpsgd_with_ranges_epsilons(
    *, n: int, batch_size: int, steps: int, noise_multiplier: float, delta: float, ranges_event
) -> dict:
    """epsilon of the ranges and DP-SGD's steps together: dp_accounting's PLD ("pld-dp-accounting", pessimistic,
    the one z is calibrated with) and RDP ("rdp-dp-accounting"), Opacus' RDP and PRV (each step kind one entry of
    their history; the ranges as rate-1 steps). Same value conventions as :func:`dpsgd_epsilons`."""
    event = dpsgd_with_ranges_event(
        n=n, batch_size=batch_size, steps=steps, noise_multiplier=noise_multiplier, ranges_event=ranges_event
    )
    out: dict = {
        "pld-dp-accounting": _number(add_remove_pld_epsilon(event, delta)),
        "rdp-dp-accounting": _number(add_remove_rdp_epsilon(event, delta)),
    }
    ranges = (float(ranges_event.event.noise_multiplier), 1.0, int(ranges_event.count))
    return {**out, **_opacus_epsilons([(noise_multiplier, batch_size / n, steps), ranges], delta)}


def _number(x: float) -> float | str:
    return "inf" if math.isinf(x) else float(x)


def check_dpsgd_model(model: nn.Module) -> None:
    """Raise ValueError when Opacus cannot compute per-sample gradients for this model (e.g. BatchNorm)."""
    from opacus.validators import ModuleValidator

    errors = ModuleValidator.validate(model, strict=False)
    if errors:
        first = str(errors[0]).split(". ")[0]
        raise ValueError(
            f"model is not DP-SGD compatible ({first}); use {', '.join(m for m in MODELS if m not in BATCHNORM_MODELS)}."
        )


def per_sample_module(model: nn.Module) -> GradSampleModule:
    """``model`` wrapped so each backward pass leaves every record's own gradient in ``p.grad_sample`` (Opacus).

    functorch, not Opacus' module hooks: the hooks give wrong per-sample gradients for channels-last activations
    (Opacus 1.6's ``unfold2d`` takes its patches with ``as_strided`` at NCHW row and column strides), the layout
    :func:`~dpmix_core.training.models.build_model` uses on a CPU; functorch is right there (tested) and within 7 %
    of the hooks' speed on the default layout (docs/PERFORMANCE.md).
    """
    from opacus import GradSampleModule

    return GradSampleModule(model, loss_reduction="mean", force_functorch=True)


def train_dpsgd(
    model: nn.Module,
    loss_fn,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    settings: OptimSettings,
    noise_multiplier: float,
    clip: float,
    generator: torch.Generator,
    noise_generator: torch.Generator | None = None,
    task: str = "classification",
    x_val: torch.Tensor | None = None,
    y_val: torch.Tensor | None = None,
    on_epoch=None,
    stop: StopCheck | None = None,
) -> tuple[nn.Module, FitResult]:
    """DP-SGD (DP-Adam with ``optimizer='adam'``): per epoch round(n/B) steps on Poisson batches of rate B/n.

    Returns the trained module (unwrapped from Opacus) and the training record,
    as :func:`dpmix_core.training.train.fit`.

    Args:
        model: a DP-SGD compatible module (no BatchNorm; see :func:`check_dpsgd_model`); trained in place.
        loss_fn: loss(outputs, targets) -> mean loss over the batch (per-sample gradients assume the mean).
        x: (n, d) float32 training rows (the models reshape them), on the training device.
        y: (n, ...) targets in the form ``loss_fn`` expects (e.g. (n, K) float one-hot rows), on the same device.
        settings: optimizer, learning rate, schedule, epochs and batch size B (the expected Poisson batch
            size, B <= n); ``early_stopping`` is not applied here.
        noise_multiplier: z, the noise standard deviation divided by ``clip`` (from
            :func:`calibrate_noise_multiplier`).
        clip: C, the per-sample gradient L2 norm bound (Opacus' ``max_grad_norm``).
        generator: CPU ``torch.Generator`` drawing the Poisson batch membership.
        noise_generator: generator for Opacus' gradient noise (None: Opacus' default).
        task: "classification" or "regression", for the validation metrics.
        x_val: validation inputs, or None for no validation.
        y_val: validation targets, or None.
        on_epoch: called with each epoch's history entry (see :func:`~dpmix_core.training.train.fit`).
        stop: polled between steps and at each epoch start; raises ``Cancelled`` to stop the run.

    Returns:
        (the trained model as a plain ``nn.Module``, the :class:`FitResult` with one history entry per epoch).

    Raises:
        ValueError: the model is not DP-SGD compatible, B > n, or a plateau schedule (it would read the loss on
            held-out private records, which the accountant does not count).
        Cancelled: ``stop`` asked the run to stop.
    """
    from opacus.optimizers import DPOptimizer

    check_dpsgd_model(model)
    if settings.schedule == "plateau":
        raise ValueError("DP-SGD cannot use a plateau schedule: it reads the loss on held-out private records.")
    n = x.shape[0]
    bs = settings.batch_size
    if bs > n:
        raise ValueError(f"DP-SGD batch size must not exceed the training set. Found B={bs}, n={n}.")
    q = bs / n
    steps = steps_per_epoch(n, bs)
    gsm = per_sample_module(model)
    optimizer = DPOptimizer(
        make_optimizer(gsm.parameters(), settings),
        noise_multiplier=noise_multiplier,
        max_grad_norm=clip,
        expected_batch_size=bs,
        loss_reduction="mean",
        generator=noise_generator,
    )
    result = FitResult()
    with warnings.catch_warnings():
        # Opacus' hooks fire on module outputs because the inputs need no gradient: expected, harmless
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        _dpsgd_epochs(
            gsm,
            optimizer,
            loss_fn,
            x,
            y,
            q=q,
            steps=steps,
            settings=settings,
            generator=generator,
            task=task,
            x_val=x_val,
            y_val=y_val,
            on_epoch=on_epoch,
            stop=stop,
            result=result,
        )
    return gsm.to_standard_module(), result


def _dpsgd_epochs(
    gsm,
    optimizer,
    loss_fn,
    x,
    y,
    *,
    q,
    steps,
    settings,
    generator,
    task,
    x_val,
    y_val,
    on_epoch,
    stop,
    result: FitResult,
) -> None:
    n = x.shape[0]
    for epoch in range(settings.epochs):
        if stop is not None:
            stop(force=True)
        lr = settings.lr * lr_factor(settings, epoch)
        set_lr(optimizer, lr)
        gsm.train()
        t0 = time.perf_counter()
        total = torch.zeros((), device=x.device)
        seen = 0
        for _ in range(steps):
            idx = torch.nonzero(torch.rand(n, generator=generator) < q).squeeze(1).to(x.device)
            optimizer.zero_grad(set_to_none=True)
            if len(idx) == 0:  # still a noisy step: the accountant counts every step
                for p in gsm.parameters():
                    if p.requires_grad:
                        p.grad_sample = torch.zeros((0, *p.shape), device=p.device, dtype=p.dtype)
            else:
                loss = loss_fn(gsm(x.index_select(0, idx)), y.index_select(0, idx))
                loss.backward()
                total += loss.detach() * len(idx)
                seen += len(idx)
            optimizer.step()
            if stop is not None:
                stop()
        result.seconds += time.perf_counter() - t0
        result.samples += seen
        end_epoch(
            result,
            gsm._module,
            epoch=epoch,
            loss=float(total) / max(seen, 1),
            lr=lr,
            loss_fn=loss_fn,
            task=task,
            x_val=x_val,
            y_val=y_val,
            on_epoch=on_epoch,
        )
