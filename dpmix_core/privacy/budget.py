"""A privacy budget across releases of the same dataset: the total epsilon under composition.

Each release is its ``dp_accounting`` event plus the neighbouring relation its guarantee is stated for.
The events are composed as Renyi DP curves (Mironov 2017, Prop. 1: RDP adds up under composition) and
converted once (dp_accounting's ``compute_epsilon``, Canonne-Kamath-Steinke 2020 / Balle et al. 2020): a
rigorous upper bound, tighter than adding the per-release epsilons. Each release's curve has dp_accounting's
rounding taken on the pessimistic side first (``guarded_rdp``): where the RDP is below double resolution its raw
curve is rounding noise, negative at some orders, and dp_accounting then returns eps = 0. Relations:

* all releases under the same relation: composed under it;
* add/remove-one releases next to replace-one ones: a replace-one neighbour is a removal then an addition,
  so an add/remove mechanism with RDP eps(alpha) is replace-one RDP with
  (alpha - 1/2)/(alpha - 1) * eps(2 alpha) + eps(2 alpha - 1) (Mironov 2017, Prop. 11, weak triangle
  inequality); the total is then stated for replace-one adjacency;
* a label-only release (features published as they are) protects nothing of a record's features, so next to
  any other release the total for replace-one adjacency is infinite, and it says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import dp_accounting
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rdp

from dpmix_core.privacy.accountants.rdp_dp_accounting import (
    POISSON_MAX_ORDER,
    POISSON_ORDER_STEP,
    RDP_ROUNDING,
    guarded_event_rdp,
)
from dpmix_core.privacy.checks import check_delta
from dpmix_core.privacy.events import SampledGaussianSteps
from dpmix_core.privacy.profile import python_orders
from dpmix_core.privacy.release import Adjacency, MixingRelease

__all__ = [
    "steps_per_epoch",
    "RELATIONS",
    "BudgetItem",
    "Budget",
    "compose_budget",
    "mixing_item",
    "gaussian_item",
    "laplace_label_item",
    "dpsgd_item",
    "ADD_REMOVE",
    "REPLACE_ONE",
    "PLD_INTERVAL",
    "add_remove_rdp_epsilon",
    "add_remove_pld_epsilon",
]

REPLACE_ONE, ADD_REMOVE, LABEL_ONLY = "replace-one", "add/remove-one", "label-only (features public)"
RELATIONS = (REPLACE_ONE, ADD_REMOVE, LABEL_ONLY)
BUDGET_ORDERS = tuple(float(a) for a in (*np.linspace(1.25, 10.0, 36), *range(11, 65), 80, 96, 128, 192, 256))
# add/remove budgets extend their orders as rdp-poisson does (x1.5 per step up to 4096 while the largest is the best):
# a small total needs large orders; replace-one stays at <= 256 (dp_accounting's without-replacement bound costs
# O(alpha^2) steps per order)
BUDGET_MAX_ORDER = POISSON_MAX_ORDER


@dataclass(frozen=True)
class BudgetItem:
    """One release: a name, its dp_accounting event, the relation its guarantee holds for."""

    name: str
    event: dp_accounting.DpEvent
    relation: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a budget item needs a name. Found {self.name!r}.")
        if self.relation not in RELATIONS:
            raise ValueError(f"relation must be one of {', '.join(RELATIONS)}. Found {self.relation!r}.")


@dataclass(frozen=True)
class Budget:
    """The total epsilon at delta, each release's epsilon alone, and how they were combined."""

    epsilon: float
    delta: float
    relation: str
    per_item: tuple[tuple[str, float], ...]
    method: str
    notes: tuple[str, ...] = field(default=())


def mixing_item(name: str, release: MixingRelease) -> BudgetItem:
    """A random-mixing release (its own adjacency).

    Args:
        name: how the release is called in the budget (non-empty).
        release: the mechanism's release description (``SyntheticData.release`` or ``params.release(...)``).

    Returns:
        A :class:`BudgetItem` holding the release's dp_accounting event, under add/remove-one for Poisson
        mixing and replace-one otherwise.

    Raises:
        ValueError: the release is not covered by any accountant (``release.not_covered`` is set), or the name
            is empty.
    """
    relation = ADD_REMOVE if release.adjacency is Adjacency.ADD_REMOVE_ONE else REPLACE_ONE
    if not release.covered:
        raise ValueError(
            f"{name!r} is not covered by any accountant ({release.not_covered}); it cannot enter a budget."
        )
    return BudgetItem(name, release.dp_event(), relation)


def gaussian_item(name: str, *, noise_multiplier: float, count: int = 1) -> BudgetItem:
    """A Gaussian release with sigma / Delta_2 = noise_multiplier (e.g. Analyze-Gauss DP-PCA), replace-one."""
    return BudgetItem(
        name, dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(noise_multiplier), count), REPLACE_ONE
    )


def laplace_label_item(name: str, *, epsilon: float) -> BudgetItem:
    """Label-only Laplace: epsilon-DP for labels, features published as they are."""
    return BudgetItem(name, dp_accounting.LaplaceDpEvent(1.0 / epsilon), LABEL_ONLY)


def steps_per_epoch(n: int, batch_size: int) -> int:
    """round(n/B) Poisson-sampled steps make one expected pass over the data (as Opacus' DPDataLoader)."""
    return max(1, round(n / batch_size))


def dpsgd_item(name: str, *, n: int, batch_size: int, steps: int, noise_multiplier: float) -> BudgetItem:
    """A DP-SGD model: Poisson-sampled Gaussian (rate B/n) composed over its steps, add/remove-one.

    Args:
        name: how the model is called in the budget (non-empty).
        n: the number of training records.
        batch_size: B, the expected batch size (the sampling rate is B/n; 1 <= B <= n).
        steps: the total number of noisy steps S over all epochs (``epochs * steps_per_epoch(n, B)``).
        noise_multiplier: z, the Gaussian noise standard deviation divided by the clipping norm.

    Returns:
        A :class:`BudgetItem` with SelfComposed(PoissonSampled(B/n, Gaussian(z)), steps), add/remove-one.

    Raises:
        ValueError: an empty name, B > n, or a non-positive n, B or step count, or a negative z.
    """
    steps_event = SampledGaussianSteps.dpsgd(
        n=n, batch_size=batch_size, steps=steps, noise_multiplier=noise_multiplier, mechanism=name or None
    )
    return BudgetItem(name, steps_event.dp_event(), ADD_REMOVE)


def _rdp_curve(event: dp_accounting.DpEvent, relation: str, orders: Sequence[float] | np.ndarray) -> np.ndarray:
    neighbor = rdp.NeighborRel.ADD_OR_REMOVE_ONE if relation == ADD_REMOVE else rdp.NeighborRel.REPLACE_ONE
    accountant = rdp.RdpAccountant(orders=python_orders(orders), neighboring_relation=neighbor)
    accountant.compose(event)
    pure = _pure_epsilon(event)
    if pure is not None:
        return _guarded_pure_rdp(accountant.rdp, pure)
    return guarded_event_rdp(accountant.rdp, tuple(orders), event)


def _guarded_pure_rdp(rdp_values: np.ndarray, epsilon: float) -> np.ndarray:
    """A Laplace event's RDP with dp_accounting's rounding on the pessimistic side: >= 0, + RDP_ROUNDING * epsilon.

    dp_accounting's eps + log1p(...)/(alpha - 1) (Mironov 2017, Prop. 6) cancels to rounding where the RDP, about
    alpha eps^2 / 2, is below eps * 2^-52: it came out negative at eps = 1e-17 and the budget's total was 0 (at
    delta = 1e-30 < eps/2, where (0, delta)-DP fails). Its shortfall is at most 1.8 ulp of eps (80-digit mpmath,
    eps in [1e-300, 1e3], every budget order); a self-composed event's is count times one event's.
    """
    return np.maximum(np.asarray(rdp_values, dtype=float), 0.0) + RDP_ROUNDING * epsilon


def _replace_one_curve(item: BudgetItem, orders: Sequence[float]) -> np.ndarray:
    """The item's replace-one RDP at ``orders`` (Mironov 2017, Prop. 11 for add/remove items)."""
    if item.relation == REPLACE_ONE:
        return _rdp_curve(item.event, REPLACE_ONE, orders)
    a = np.asarray(orders, dtype=float)
    double = _rdp_curve(item.event, ADD_REMOVE, 2 * a)
    minus = _rdp_curve(item.event, ADD_REMOVE, 2 * a - 1)
    return (a - 0.5) / (a - 1) * double + minus


def _composed_epsilon(events: Sequence[dp_accounting.DpEvent], relation: str, delta: float) -> float:
    """The RDP epsilon at ``delta`` of ``events`` composed under ``relation`` (replace-one or add/remove-one).

    Orders: :data:`BUDGET_ORDERS` (integers only for replace-one); under add/remove, while the largest order is the
    best, one more order x1.5 at a time up to :data:`BUDGET_MAX_ORDER` as long as epsilon still falls.
    """
    orders = [o for o in BUDGET_ORDERS if relation == ADD_REMOVE or float(o).is_integer()]
    total = sum(_rdp_curve(event, relation, orders) for event in events)
    eps, order = rdp.compute_epsilon(python_orders(orders), total, delta)
    top = max(orders)
    while relation == ADD_REMOVE and order >= top and top < BUDGET_MAX_ORDER:
        top = float(min(int(top * POISSON_ORDER_STEP[0]), BUDGET_MAX_ORDER))
        more = sum(_rdp_curve(event, relation, [top]) for event in events)
        new_eps, _ = rdp.compute_epsilon(python_orders([top]), more, delta)
        if new_eps >= eps:
            break
        eps, order = new_eps, top
    return float(eps)


def _alone(item: BudgetItem, delta: float) -> float:
    return _composed_epsilon([item.event], ADD_REMOVE if item.relation == ADD_REMOVE else REPLACE_ONE, delta)


def _pure_epsilon(event: dp_accounting.DpEvent) -> float | None:
    """eps of a pure-DP event (Laplace, possibly self-composed), or None for approximate-DP events."""
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        return 1.0 / event.noise_multiplier
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        inner = _pure_epsilon(event.event)
        return None if inner is None else event.count * inner
    return None


def compose_budget(items: Sequence[BudgetItem], delta: float) -> Budget:
    """The total epsilon at ``delta`` of releasing every item from the same dataset (see the module docstring).

    Args:
        items: the releases made from the dataset (at least one), e.g. from :func:`mixing_item`,
            :func:`gaussian_item`, :func:`laplace_label_item`, :func:`dpsgd_item`.
        delta: the delta of the total (epsilon, delta) guarantee, in (0, 1).

    Returns:
        A :class:`Budget`: the total ``epsilon`` (inf when a label-only release sits next to others), the
        ``delta``, the ``relation`` the total is stated for, ``per_item`` (name, epsilon of that release alone
        at ``delta``), the ``method`` used and ``notes``.

    Raises:
        ValueError: ``items`` is empty, or delta is outside (0, 1).
    """
    check_delta(delta)
    if not items:
        raise ValueError("the budget is empty: add at least one release.")
    per_item = tuple((it.name, _alone(it, delta)) for it in items)
    relations = {it.relation for it in items}
    if LABEL_ONLY in relations and relations != {LABEL_ONLY}:
        label_only = ", ".join(it.name for it in items if it.relation == LABEL_ONLY)
        return Budget(
            math.inf,
            delta,
            REPLACE_ONE,
            per_item,
            "none",
            (f"{label_only} publishes features as they are: no bound protects a whole record",),
        )
    if len(relations) == 1:
        relation = relations.pop()
        eps = _composed_epsilon([it.event for it in items], relation, delta)
        pure = [p for p in (_pure_epsilon(it.event) for it in items) if p is not None]
        if len(pure) == len(items) and sum(pure) < eps:
            return Budget(
                float(sum(pure)),
                delta,
                relation,
                per_item,
                "basic composition of pure DP (Dwork et al. 2006), tighter than RDP here; delta = 0",
            )
        return Budget(eps, delta, relation, per_item, "RDP composition (dp_accounting), rigorous upper bound")
    # replace-one and add/remove releases together: everything stated for replace-one
    orders = [o for o in BUDGET_ORDERS if float(o).is_integer() and o >= 2]
    total = sum(_replace_one_curve(it, orders) for it in items)
    eps = float(rdp.compute_epsilon(orders, total, delta)[0])
    return Budget(
        eps,
        delta,
        REPLACE_ONE,
        per_item,
        "RDP composition (dp_accounting), rigorous upper bound",
        ("add/remove-one releases converted to replace-one (Mironov 2017, Prop. 11)",),
    )


PLD_INTERVAL = 1e-3  # dp_accounting's PLD grid for a composition (pessimistic: any grid is an upper bound)


def add_remove_rdp_epsilon(event: dp_accounting.DpEvent, delta: float) -> float:
    """The RDP bound of ``event`` (a ComposedDpEvent, or one event) under add/remove-one: :func:`compose_budget` of
    its parts (dp_accounting's RDP with rounding guarded)."""
    parts = event.events if isinstance(event, dp_accounting.ComposedDpEvent) else [event]
    return compose_budget(
        [BudgetItem(f"part {i + 1}", part, ADD_REMOVE) for i, part in enumerate(parts)], delta
    ).epsilon


def add_remove_pld_epsilon(event: dp_accounting.DpEvent, delta: float) -> float:
    """dp_accounting's PLD epsilon of ``event`` under add/remove-one (pessimistic: an upper bound on any grid) on a
    grid of :data:`PLD_INTERVAL`, or 1e-4 of the RDP epsilon where that is coarser (large epsilons: fine grids get
    slow, and the bound stays within about that relative step). Tighter than RDP for Poisson-subsampled Gaussians."""
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

    rdp_eps = add_remove_rdp_epsilon(event, delta)
    interval = max(PLD_INTERVAL, 1e-4 * rdp_eps) if math.isfinite(rdp_eps) else PLD_INTERVAL
    accountant = PLDAccountant(value_discretization_interval=interval)
    accountant.compose(event)
    return float(accountant.get_epsilon(delta))
