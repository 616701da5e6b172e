"""Exact numerical privacy-loss-distribution accounting, via Google's dp_accounting."""

from __future__ import annotations

import math
import warnings

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld

from dpmix_core.privacy.accountants.base import Accountant, MixingSetting
from dpmix_core.privacy.accountants.extremes import at_most_unsampled, settled_by_noise
from dpmix_core.privacy.accountants.rdp_dp_accounting import RdpPoissonAccountant
from dpmix_core.privacy.analysis.gdp import gdp_epsilon, poisson_clt_mu
from dpmix_core.privacy.events import AccountedRelease
from dpmix_core.privacy.release import Adjacency, DataBounds, Sampling

MIN_INTERVAL = 1e-6  # refinement floor; the work cap usually stops earlier
MAX_INTERVAL = 1e-2  # coarsest first grid, unless the loss spans need a coarser one
FIRST_SINGLE_BINS = 8_000  # first grid: one-step PMF built at ~8-17 us per bin (connect-the-dots), <= 0.15 s
FIRST_COMPOSED_BINS = 80_000  # first grid: composed PMF by FFT and truncation, <= 0.2 s at T = 1e7
MAX_BINS = 2**22  # composed-PMF length cap: ~64 MB per complex FFT array, ~0.3 GB peak
WORK_CAP = 40_000.0  # grid work per evaluation, in one-step PMF bins (~7.5 us each: ~0.3 s on the 2-core VM)
FFT_BIN_WORK = 1 / 40  # work of one composed-PMF bin in one FFT composition, in one-step PMF bins (measured)
_LEGACY_SECONDS = 0.3  # the wall-clock budget WORK_CAP replaces: time_budget=t maps to WORK_CAP * t / 0.3
REFINE_RTOL = 1e-3  # stop refining once halving h moves epsilon by less than this fraction
MAX_STEPS = 10**9  # above, no affordable grid beats RDP (at T = 1e12, h = 0.066: 1.5 s for eps = 1.8e6 vs RDP 6497)
_TAIL_DELTA = 1e-15  # dp_accounting truncates composed tails at about this mass


class PldPoissonAccountant(Accountant):
    """Poisson-subsampled Gaussian composed T times as a privacy loss distribution.

    Koskela et al. 2020, Meiser & Mohammadi 2018; implementation: dp_accounting
    (connect-the-dots, Doroshenko et al. 2022) with pessimistic rounding, so every
    grid gives a rigorous upper bound; a coarser grid only makes it looser.

    Grid from a work cap, never a clock, so a release gets the same epsilon on any machine at
    any load (a calibrated sigma is re-evaluated to the very number the calibration saw):
    the first interval is h = relative_accuracy * eps_CLT / sqrt(T), clamped to [1e-6, 1e-2]
    and coarsened until both PMFs are small enough to build in ~0.1-0.3 s
    (:func:`loss_spans`: the one-step loss over the +-10 z Gaussian range that dp_accounting
    keeps, and the composed loss up to eps_RDP(1e-15) above and -40 below, since
    E_Q[e^L] <= 1). h is then halved while the work of all grids so far plus the next one
    (:func:`grid_work`, from the release's parameters only) stays within ``work_cap``, the
    composed PMF stays under ``MAX_BINS`` (memory) and epsilon still moves by more than
    0.1 %; the smallest pessimistic value is reported. Every grid is rounded pessimistically,
    so where the cap stops is a matter of tightness, never of validity.

    ``details``: "epsilon_pessimistic" (the reported bound), "epsilon_optimistic"
    (dp_accounting's optimistic privacy-buckets estimate at the final h, a lower value, so
    epsilon lies between the two; buckets round every step down by up to h, so where T*h
    exceeds epsilon, or T > 1e5, it is not computed and 0 is shown), "discretization" (h),
    "grid_error_estimate" (what the last halving gained; the remaining error is about as
    large) and "rdp_epsilon". The rdp-poisson bound of the same release is always computed
    and reported, with the reason, when smaller; above T = 1e9 steps the PLD is skipped
    (pessimistic rounding adds about h per step, so beating RDP would need h << eps/T).
    The result is never above rdp-poisson, nor above the exact bound of the same T Gaussian steps without
    subsampling (mu = sqrt(T)/z GDP, :func:`~dpmix_core.privacy.accountants.extremes.unsampled_gaussian_epsilon`),
    which is shown, with the reason, where it is smaller (tiny z: subsampling barely helps and the grid overflows).
    """

    name = "pld-poisson"
    title = "Exact PLD (Poisson sampling)"
    reference = "Koskela et al. 2020; Doroshenko et al. 2022; dp_accounting PLD"
    rigorous = True
    sampling = Sampling.POISSON
    adjacency = Adjacency.ADD_REMOVE_ONE
    formula = (
        r"\delta(\varepsilon)=\mathbb{E}_{L\sim \mathrm{PLD}^{\otimes T}}\big[(1-e^{\varepsilon-L})_+\big],\ "
        r"\mathrm{PLD}=\log\frac{(1-q)\mathcal{N}(0,z^2)+q\,\mathcal{N}(1,z^2)}{\mathcal{N}(0,z^2)}"
    )
    explanation = (
        "Computes the full distribution of the privacy loss numerically and composes it exactly "
        "(up to a discretization that is rounded pessimistically). The most accurate guaranteed "
        "number for Poisson mixing; shown with an optimistic estimate as its error bar. Never above "
        "rdp-poisson, nor above the exact bound of the same T steps without subsampling (each shown, with "
        "its reason, where it is smaller)."
    )

    def __init__(
        self,
        *,
        relative_accuracy: float = 0.1,
        work_cap: float = WORK_CAP,
        optimistic: bool = True,
        time_budget: float | None = None,
    ) -> None:
        """Args: relative_accuracy sets the first grid; work_cap bounds its refinement (0: first grid only).

        ``time_budget`` (seconds) is deprecated: it made epsilon depend on machine load. It
        maps to ``work_cap = WORK_CAP * time_budget / 0.3`` (0 stays "first grid only").
        """
        if not 0 < relative_accuracy <= 10:
            raise ValueError(f"relative_accuracy must be in (0, 10]. Found {relative_accuracy}.")
        if time_budget is not None:
            if not (math.isfinite(time_budget) and time_budget >= 0):
                raise ValueError(f"time_budget must be a finite number >= 0. Found {time_budget}.")
            warnings.warn(
                "pld-poisson's time_budget is deprecated (epsilon depended on machine load); "
                f"use work_cap= instead (time_budget={time_budget:g} is read as "
                f"work_cap={WORK_CAP * time_budget / _LEGACY_SECONDS:g}).",
                DeprecationWarning,
                stacklevel=2,
            )
            work_cap = WORK_CAP * time_budget / _LEGACY_SECONDS
        if not (isinstance(work_cap, (int, float)) and math.isfinite(work_cap) and work_cap >= 0):
            raise ValueError(f"work_cap must be a finite number >= 0. Found {work_cap}.")
        self.relative_accuracy = relative_accuracy
        self.work_cap = float(work_cap)
        self.optimistic = optimistic

    def bounds_for(self, setting: MixingSetting) -> DataBounds:
        return DataBounds.clipped(setting.clip_x, setting.clip_y)

    def discretization(
        self, release: AccountedRelease, delta: float, spans: tuple[float, float] | None = None
    ) -> float:
        """The first interval h tried for this release (see class docstring); spans = loss_spans(release)."""
        single, composed = loss_spans(release) if spans is None else spans
        mu = poisson_clt_mu(release.sampling_rate, release.num_points, release.noise_multiplier())
        scale = max(gdp_epsilon(delta, mu), 1e-3) if math.isfinite(mu) else 1.0
        h = self.relative_accuracy * scale / math.sqrt(release.num_points)
        h = min(max(h, MIN_INTERVAL), MAX_INTERVAL)
        return max(h, single / FIRST_SINGLE_BINS, composed / FIRST_COMPOSED_BINS)

    def _compute(self, release: AccountedRelease, delta: float):
        if (settled := settled_by_noise(release, delta)) is not None:
            return settled
        return at_most_unsampled(self._pld_or_rdp(release, delta), release, delta)

    def _pld_or_rdp(self, release: AccountedRelease, delta: float):
        """(epsilon, RDP order or None, details, reason): the PLD bound, or rdp-poisson's where that is smaller."""
        z = release.noise_multiplier()
        rdp_eps, rdp_order, _, _ = RdpPoissonAccountant()._compute(release, delta)
        if release.num_points > MAX_STEPS:
            return (
                rdp_eps,
                rdp_order,
                (("noise_multiplier", z), ("fallback_rdp", 1.0)),
                (
                    f"T = {release.num_points:.3g} steps: pessimistic PLD rounding adds about h per step, and a grid "
                    f"fine enough to beat RDP is unaffordable above T = {MAX_STEPS:.0e}; showing the rdp-poisson bound"
                ),
            )
        spans = loss_spans(release)
        if not all(math.isfinite(x) for x in spans):
            return (
                rdp_eps,
                rdp_order,
                (("noise_multiplier", z), ("fallback_rdp", 1.0)),
                ("privacy loss unbounded at double precision (noise too small); showing the rdp-poisson bound"),
            )
        try:
            pess, h, grid_error = self._refine(release, delta, spans)
            # privacy buckets round every step down by up to h: with T*h above eps the estimate is 0 anyway
            informative = self.optimistic and release.num_points <= _DIRECT_LIMIT and release.num_points * h <= pess
            opt = self._optimistic(release, delta, h) if informative else math.nan
        except (MemoryError, ValueError, OverflowError, FloatingPointError) as exc:
            return (
                rdp_eps,
                rdp_order,
                (("noise_multiplier", z), ("fallback_rdp", 1.0)),
                (f"PLD failed ({type(exc).__name__}: {exc}); showing the rdp-poisson upper bound instead"),
            )
        details = (
            ("epsilon_pessimistic", pess),
            ("epsilon_optimistic", min(opt, pess) if math.isfinite(opt) else 0.0),
            ("discretization", h),
            ("grid_error_estimate", grid_error),
            ("rdp_epsilon", rdp_eps),
            ("noise_multiplier", z),
        )
        if pess <= rdp_eps:
            return pess, None, details, None
        return (
            rdp_eps,
            rdp_order,
            details + (("fallback_rdp", 1.0),),
            (
                f"the PLD on the finest grid within the work cap {self.work_cap:g} (h = {h:.2g}, T = {release.num_points:g}) "
                f"gives {pess:.4g}; the rdp-poisson bound of the same release is smaller and is shown"
            ),
        )

    def _refine(
        self, release: AccountedRelease, delta: float, spans: tuple[float, float]
    ) -> tuple[float, float, float]:
        """(smallest pessimistic epsilon, its interval, last improvement or inf), halving h within the work cap.

        Deterministic: the grids tried depend on the release, delta and the options only.
        """
        h = self.discretization(release, delta, spans)
        best, best_h, last = math.inf, h, math.inf
        spent = 0.0
        while True:
            eps = pld_epsilon(release, delta, h, pessimistic=True)
            spent += grid_work(spans, release.num_points, h)
            if eps < best:
                best, best_h = eps, h
            improvement = last - eps if math.isfinite(last) and math.isfinite(eps) else math.inf
            last = eps
            converged = improvement <= REFINE_RTOL * eps
            finer = h / 2
            if (
                converged
                or finer < MIN_INTERVAL
                or spans[1] / finer > MAX_BINS
                or spent + grid_work(spans, release.num_points, finer) > self.work_cap
            ):
                return best, best_h, max(improvement, 0.0)
            h = finer

    @staticmethod
    def _optimistic(release: AccountedRelease, delta: float, h: float) -> float:
        try:
            return pld_epsilon(release, delta, h, pessimistic=False)
        except (ValueError, OverflowError, FloatingPointError):
            return math.nan  # dp_accounting's optimistic buckets overflow on coarse grids: lower value 0


def grid_work(spans: tuple[float, float], num_points: int, interval: float) -> float:
    """Work of one pessimistic PLD evaluation on grid ``interval``, in one-step PMF bins (a cost model, no clock).

    Building the one-step connect-the-dots PMF costs ~7.5 us per bin (dp_accounting, 2-core
    VM); each FFT composition costs about FFT_BIN_WORK of that per bin of the composed span:
    one for T <= 1e5 (one FFT power), and for larger T the compositions that
    :func:`_self_compose` makes (the 4096-fold block, the squarings and products of the binary
    power, and the remainder). Measured against wall time within a factor ~2 (T = 1e2-1e7).

    Args:
        spans: (one-step, composed) loss spans from :func:`loss_spans`, in nats.
        num_points: the number T of composed steps.
        interval: the discretization interval h, in nats.

    Returns:
        The modelled work, a positive float; compared with ``work_cap`` to decide whether to refine.
    """
    single, composed = spans
    return single / interval + composed / interval * FFT_BIN_WORK * _compositions(num_points)


def _compositions(count: int) -> int:
    """How many FFT compositions :func:`_self_compose` makes for ``count`` steps (1 up to _DIRECT_LIMIT)."""
    if count <= _DIRECT_LIMIT:
        return 1
    blocks, rest = divmod(count, _CHUNK)
    power = blocks.bit_length() - 1 + bin(blocks).count("1") - 1  # squarings, then products
    return 1 + power + (2 if rest else 0)


def loss_spans(release: AccountedRelease) -> tuple[float, float]:
    """(one-step, composed) privacy-loss spans that dp_accounting's PMFs cover, from above; inf if unbounded.

    One step: L(x) = log(1 - q + q e^{(2x-1)/(2z^2)}) over x in [-10z, 1 + 10z] (tail mass
    e^-50 dropped). Composed: twice eps_RDP(1e-15) + 40 (its Chernoff truncation is about
    2x wider than the RDP tail bound, measured), plus the one-step span.

    Args:
        release: a Poisson-sampled release or DP event; its noise multiplier z and rate q set the loss.

    Returns:
        (single, composed): the width of the one-step privacy-loss range and of the T-fold composed range,
        in nats (units of the privacy loss L). Used to size the first discretization grid.
    """
    z, q = release.noise_multiplier(), release.sampling_rate
    with np.errstate(divide="ignore", over="ignore"):
        a = (2.0 * np.array([-10.0 * z, 1.0 + 10.0 * z]) - 1.0) / (2.0 * z * z)
        loss = np.logaddexp(np.log1p(-q) if q < 1 else -np.inf, math.log(q) + a)
    single = float(loss[1] - loss[0])
    eps, _, _, _ = RdpPoissonAccountant()._compute(release, _TAIL_DELTA)
    return single, 2.0 * (eps + 40.0) + single


def pld_epsilon(release: AccountedRelease, delta: float, interval: float, *, pessimistic: bool) -> float:
    """epsilon of the T-fold Poisson-subsampled Gaussian PLD on grid ``interval`` (dp_accounting).

    Args:
        release: a Poisson-sampled release or DP event: noise multiplier z, rate q and T = ``num_points`` steps.
        delta: the delta at which epsilon is read off the composed PLD, in (0, 1).
        interval: the value-discretization interval h of the privacy loss (nats); smaller is tighter and slower.
        pessimistic: True for dp_accounting's pessimistic connect-the-dots PLD (a rigorous upper bound);
            False for its optimistic privacy-buckets estimate (a lower value, not a bound).

    Returns:
        epsilon at ``delta`` as a float (inf when the composed PLD's infinite mass exceeds delta).

    Raises:
        ValueError, OverflowError or FloatingPointError: from dp_accounting, seen with ``pessimistic=False`` on
            coarse grids (the optimistic buckets overflow); the accountant catches them.
    """
    # dp_accounting divides by a vanishing mass on its way to the same answer; at vanishing noise (z ~ 1e-12) its
    # e^(eps + log Phi) overflows to inf before its math.exp raises OverflowError (caught by the accountant): either
    # way nothing but a RuntimeWarning on stderr, which broke the CLI's one-line output
    with np.errstate(over="ignore"):
        single = pld.from_gaussian_mechanism(
            standard_deviation=release.noise_multiplier(),
            sensitivity=1.0,
            pessimistic_estimate=pessimistic,
            use_connect_dots=pessimistic,  # connect-the-dots is pessimistic only; optimistic uses privacy buckets
            value_discretization_interval=interval,
            sampling_prob=release.sampling_rate,
        )
        return float(_self_compose(single, release.num_points).get_epsilon_for_delta(delta))


_DIRECT_LIMIT = 100_000
_CHUNK = 4096


def _self_compose(single, count: int):
    """single composed count times: one dp_accounting FFT power up to 1e5, blocks of 4096 above.

    dp_accounting sizes one FFT power by a Chernoff bound at orders +-20/len, which for a
    short PMF raised to a huge power is ~(len-1) * count bins (T = 1e12 once took 17 GB),
    and its sparse path evaluates size**count (4 s at T = 1e7). Above 1e5 steps we take a
    4096-fold block by one FFT power and raise it to count // 4096 by squaring with
    ``compose``, which truncates tail mass 1e-15 on the actual probabilities, so every FFT
    stays near the true width of the composed loss. Truncation is pessimistic (left tail
    onto the first bin, right tail to the infinity mass): still an upper bound.
    """
    if count <= _DIRECT_LIMIT:
        return single.self_compose(count)
    blocks, rest = divmod(count, _CHUNK)
    out = _power(single.self_compose(_CHUNK), blocks)
    return out.compose(single.self_compose(rest)) if rest else out


def _power(base, count: int):
    """base composed count >= 1 times by binary powering (log2(count) truncating compositions)."""
    result, power = None, base
    while count:
        if count & 1:
            result = power if result is None else result.compose(power)
        count >>= 1
        if count:
            power = power.compose(power)
    return result
