"""RDP accountants delegated to Google's dp_accounting (the field's reference library)."""

from __future__ import annotations

import math

import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rdp

from dpmix_core.privacy.accountants.base import Accountant, MixingSetting
from dpmix_core.privacy.accountants.extremes import at_most_unsampled, settled_by_noise
from dpmix_core.privacy.accountants.wbk import wbk_epsilon
from dpmix_core.privacy.events import AccountedRelease, SampledGaussianSteps, UnsupportedEventError
from dpmix_core.privacy.release import Adjacency, DataBounds, Sampling

# Integer orders only: fractional orders cost a slow series and rarely win here.
# Orders are a speed/tightness trade-off (bench/bench_accountants.py): dp_accounting's
# without-replacement bound costs O(alpha^2) Python steps per order.
POISSON_ORDERS = tuple(range(2, 33)) + (40, 48, 56, 64, 80, 96, 128, 192, 256)
# adaptive cap: at orders <= 256 the conversion alone costs log(1/delta)/255 ~ 0.045 at delta = 1e-5, a floor that large
# z (an epsilon of 1e-2 or less) hit; an integer order costs alpha terms at ~3.4 us (2048: 7 ms), one order per step
POISSON_MAX_ORDER = 4096
# 384, 576, 864, 1296, 1944, 2916, 4096: one order per step, stopping where it stops helping
POISSON_ORDER_STEP = (1.5,)
WOR_ORDERS = tuple(range(2, 13)) + (14, 16, 20, 24, 32, 48, 64)
WOR_MAX_ORDER = 128  # adaptive cap: floor log(1/delta)/127 = 0.09 at delta = 1e-5; orders 80..128 cost ~60 ms
THM9_ORDERS = np.arange(2, 101)  # lee2019's orders: the Thm. 9 bound on the same release is always at hand


# dp_accounting sums an order's terms (about 1 in total) in log space: its one-step RDP is up to ~2 ulp below the
# truth (measured against 60-digit mpmath, q in [1e-6, 1], z in [1e2, 1e12]); 8 ulp per step covers it.
RDP_ROUNDING = 8 * float(np.finfo(float).eps)


def guarded_rdp(rdp_values: np.ndarray, orders: tuple[float, ...], steps: int, z: float) -> np.ndarray:
    """Composed RDP with dp_accounting's rounding taken on the pessimistic side: computed + T * RDP_ROUNDING, never
    above T alpha / (2 z^2), the RDP of the same T Gaussian steps without subsampling (subsampling never raises
    RDP: exp((alpha - 1) D_alpha) is jointly convex, Mironov 2017 / WBK 2019).

    Where the one-step RDP is below double resolution (T * q^2 / z^2 near 1e-16 T) dp_accounting returns rounding
    noise, negative at some orders, and then an epsilon of 0 for the whole release (seen at T = 1e12, q = 0.5,
    z = 7e8: 0 where its own bound in exact arithmetic is 0.0196 and the CLT gives 1e-3).
    """
    a = np.asarray(orders, dtype=float)
    with np.errstate(over="ignore", divide="ignore"):
        gaussian = steps * a / (2.0 * z * z) if z > 0 else np.full_like(a, np.inf)
    noisy = np.maximum(np.asarray(rdp_values, dtype=float), 0.0) + steps * RDP_ROUNDING
    return np.minimum(noisy, gaussian)


def guarded_event_rdp(rdp_values: np.ndarray, orders: tuple[float, ...], event) -> np.ndarray:
    """dp_accounting's composed RDP of ``event`` at ``orders``, through :func:`guarded_rdp` where the event is T steps
    of a subsampled Gaussian (a mixing release, DP-SGD); other events (a Gaussian's closed form) as computed.

    For the callers that hand dp_accounting a whole event (a budget, a privacy profile) instead of a release.
    """
    try:
        steps = SampledGaussianSteps.from_dp_event(event)
    except UnsupportedEventError:
        return np.asarray(rdp_values, dtype=float)
    return guarded_rdp(rdp_values, orders, steps.num_points, steps.noise_multiplier())


def _rdp_epsilon(release: AccountedRelease, delta: float, orders: tuple[int, ...], relation) -> tuple[float, float]:
    accountant = rdp.RdpAccountant(orders=list(orders), neighboring_relation=relation)
    accountant.compose(release.dp_event())
    values = guarded_rdp(accountant.rdp, orders, release.num_points, release.noise_multiplier())
    eps, order = rdp.compute_epsilon(list(orders), values, delta)
    return float(eps), float(order)


def extended_rdp_epsilon(
    release: AccountedRelease,
    delta: float,
    orders: tuple[int, ...],
    max_order: int,
    relation,
    factors: tuple[float, ...],
) -> tuple[float, float, int]:
    """The RDP epsilon at ``orders``, then, while the best order is the largest tried and a batch of larger orders
    (``top * factors``, capped at ``max_order``) still lowers epsilon, at those too: a small budget needs large orders
    (the conversion costs log(1/delta)/(alpha - 1)), a large one never tries them. Returns (epsilon, best order, largest
    order tried). A work cap, not a clock, so the same release always gets the same number."""
    eps, order = _rdp_epsilon(release, delta, orders, relation)
    top = max(orders)
    while order >= top and top < max_order:
        batch = tuple(sorted({min(int(top * f), max_order) for f in factors}))
        new_eps, new_order = _rdp_epsilon(release, delta, batch, relation)
        top = max(batch)
        if new_eps >= eps:
            break
        eps, order = new_eps, new_order
    return eps, order, top


class RdpPoissonAccountant(Accountant):
    """Poisson-subsampled Gaussian RDP (Mironov, Talwar, Zhang 2019; Zhu & Wang 2019), via dp_accounting.

    Same release and sensitivities as gdp-clt (Poisson rate m/n, add/remove,
    Delta = C/m); conversion by Canonne-Kamath-Steinke 2020, Prop. 12 (as in
    dp_accounting). Orders 2..256, extended (x1.5, one order per step, up to ``max_order``, 4096 by default) while the
    largest order is the best and still improves: below epsilon ~ 0.05 at delta = 1e-5 the largest order sets the bound
    (at z = 200, q = 64/60000, T = 60000: 0.0197 with orders <= 256, 0.0032 at order 1944). ``details["max_order"]`` is
    the largest order tried. A rigorous upper bound.
    """

    name = "rdp-poisson"
    title = "Poisson-subsampled Gaussian RDP"
    reference = "Mironov, Talwar, Zhang 2019; Zhu & Wang 2019; dp_accounting RdpAccountant"
    rigorous = True
    sampling = Sampling.POISSON
    adjacency = Adjacency.ADD_REMOVE_ONE
    formula = (
        r"\varepsilon_{\mathrm{RDP}}(\alpha)=\frac{T}{\alpha-1}\log\sum_{k=0}^{\alpha}\binom{\alpha}{k}(1-q)^{\alpha-k}q^k"
        r"e^{(k^2-k)/(2z^2)},\ q=\frac{m}{n}"
    )
    explanation = (
        "The standard DP-SGD accountant applied to Poisson mixing: tracks the whole Renyi curve of the "
        "subsampled Gaussian, then converts. A guaranteed upper bound, usually a bit loose."
    )

    def __init__(self, *, orders: tuple[int, ...] = POISSON_ORDERS, max_order: int = POISSON_MAX_ORDER) -> None:
        if not orders or min(orders) < 2:
            raise ValueError("orders must be integers >= 2.")
        self.orders = tuple(int(a) for a in orders)
        self.max_order = max(int(max_order), max(self.orders))

    def bounds_for(self, setting: MixingSetting) -> DataBounds:
        return DataBounds.clipped(setting.clip_x, setting.clip_y)

    def _compute(self, release: AccountedRelease, delta: float):
        if (settled := settled_by_noise(release, delta)) is not None:
            return settled
        eps, order, top = extended_rdp_epsilon(
            release, delta, self.orders, self.max_order, rdp.NeighborRel.ADD_OR_REMOVE_ONE, POISSON_ORDER_STEP
        )
        return eps, order, (("noise_multiplier", release.noise_multiplier()), ("max_order", float(top))), None


class RdpWorAccountant(Accountant):
    """Tight RDP for sampling without replacement (WBK 2019, Thm. 27), via dp_accounting; never above lee2019.

    Replace-one adjacency, gamma = l/n; the bounds are those of lee2019 ([0,1]^d)
    unless a DP-CDA clip c is given, or clipped records (||x|| <= Cx, ||y|| <= Cy: DPFMix
    App. E.3's DPMix; the theorem holds for any bounded sensitivity). At one order Thm. 27 is never above Thm. 9 (the
    extra min{., 2 e^{(j-1) eps(j)}} term) and the improved RDP -> DP conversion is never
    above the classic one; orders cost O(alpha^2) Python steps, so they start at
    ``orders`` (up to 64) and, while the best order is the largest tried and still
    improves, extend geometrically (x1.25..x2 per batch) up to ``max_order`` (128 by
    default: ~60 ms more; order 256 alone costs ~0.2 s, so pass it for tiny budgets).
    A work cap, not a clock, so the same release always gets the same number. The Thm. 9 bound
    with the classic conversion at alpha in {2..100} (lee2019's and dpcda's formula on
    this same release) is also computed, and the smaller valid bound is reported;
    ``details`` says which won ("thm27_epsilon", "thm9_epsilon") and ``reason`` names
    Thm. 9 when it did. A rigorous upper bound.
    """

    name = "rdp-wor"
    title = "Tight without-replacement RDP"
    reference = "Wang, Balle, Kasiviswanathan 2019, Thm. 27 and Thm. 9; dp_accounting RdpAccountant (REPLACE_ONE)"
    rigorous = True
    sampling = Sampling.WITHOUT_REPLACEMENT
    adjacency = Adjacency.REPLACE_ONE
    formula = (
        r"\varepsilon'(\alpha)\le\frac{1}{\alpha-1}\log\Big(1+\gamma^2\binom{\alpha}{2}\min\{4(e^{\varepsilon(2)}-1),2e^{\varepsilon(2)}\}"
        r"+\sum_{j\ge3}\gamma^j\binom{\alpha}{j}\min\{4\sqrt{B_{2\lfloor j/2\rfloor}B_{2\lceil j/2\rceil}},\,2e^{(j-1)\varepsilon(j)}\}\Big)"
    )
    explanation = (
        "The same release as DPMix/DP-CDA, accounted with the strongest published analysis for "
        "sampling without replacement (as implemented by Google's dp_accounting). It also computes "
        "the published DPMix bound for the same release and shows the smaller one, so it is never "
        "looser than lee2019 or dpcda on the same release."
    )

    def __init__(
        self,
        *,
        orders: tuple[int, ...] = WOR_ORDERS,
        max_order: int = WOR_MAX_ORDER,
    ) -> None:
        if not orders or min(orders) < 2:
            raise ValueError("orders must be integers >= 2.")
        self.orders = tuple(int(a) for a in orders)
        self.max_order = max(int(max_order), max(self.orders))

    def bounds_for(self, setting: MixingSetting) -> DataBounds:
        if setting.clip_records:
            return DataBounds.clipped(setting.clip_x, setting.clip_y)
        if setting.clip is not None:
            return DataBounds.clipped_one_hot(setting.clip)
        return DataBounds.unit_box(setting.dx, setting.dy)

    def _compute(self, release: AccountedRelease, delta: float):
        if (settled := settled_by_noise(release, delta)) is not None:
            return settled
        z = release.noise_multiplier()
        thm9, thm9_order = wbk_epsilon(release, delta, THM9_ORDERS)
        try:
            thm27, thm27_order, top = self._thm27(release, delta)
            failure = None
        except (ValueError, OverflowError, FloatingPointError, ZeroDivisionError) as exc:
            thm27, thm27_order, top = math.inf, None, max(self.orders)
            failure = f"dp_accounting's Thm. 27 failed ({type(exc).__name__}: {exc})"
        details = (("noise_multiplier", z), ("thm27_epsilon", thm27), ("thm9_epsilon", thm9), ("max_order", float(top)))
        if thm27 <= thm9:
            return at_most_unsampled((thm27, thm27_order, details, None), release, delta)
        why = failure or f"Thm. 27 at orders <= {top} is looser here"
        reason = (
            f"{why}; showing the WBK Thm. 9 bound with the classic conversion (the lee2019 formula, "
            "alpha <= 100) for this same release, the smaller valid bound"
        )
        return at_most_unsampled((thm9, thm9_order, details, reason), release, delta)

    def _thm27(self, release: AccountedRelease, delta: float) -> tuple[float, float, int]:
        """Thm. 27 with orders extended geometrically while the best order is the largest and improves."""
        return extended_rdp_epsilon(
            release, delta, self.orders, self.max_order, rdp.NeighborRel.REPLACE_ONE, (1.25, 1.5, 1.75, 2.0)
        )
