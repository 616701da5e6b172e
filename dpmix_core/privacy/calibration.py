"""Calibration against a target epsilon: the smallest noise (``calibrate_sigma``) or the most points (``max_points``).

Both searches return a setting whose epsilon was *evaluated* and is within the
target, so the answer is a guarantee of the accountant at that setting even if
the search stops early (a note then says how far from optimal it may be).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from scipy.optimize import brentq

from dpmix_core.privacy.accountants import Accountant, EpsilonResult, MixingSetting, UnsupportedReleaseError
from dpmix_core.privacy.accountants.base import check_delta
from dpmix_core.privacy.accountants.gdp_clt import GdpCltAccountant
from dpmix_core.privacy.accountants.pld_poisson import PldPoissonAccountant
from dpmix_core.privacy.accountants.rdp_dp_accounting import RdpPoissonAccountant
from dpmix_core.privacy.events import SampledGaussianSteps
from dpmix_core.privacy.release import MixingRelease, Sampling

__all__ = [
    "Calibration",
    "ComposedCalibration",
    "PointBudget",
    "calibrate_sigma",
    "calibrate_sigma_composed",
    "max_points",
    "SIGMA_MAX",
    "T_MAX",
    "TIME_BUDGET",
]

SIGMA_MAX = 1e4
T_MAX = 10**12  # the most points max_points searches (a trillion: beyond any release that can be written)
TIME_BUDGET = 4.0  # seconds per calibration; at the deadline the best feasible sigma so far is returned
# No deadline: the search runs to its tolerance, so the sigma depends on the inputs only, never on machine load.
# Used wherever a sigma becomes part of a stored or released result (synthesis, training, best-release).
REPRODUCIBLE = math.inf
_SIGMA_MIN = 1e-12  # below this the search stops: the target holds at (practically) no noise
_RTOL = 1e-5  # relative width of the final bracket on sigma
_FIRST_GRID_SEARCH_T = 100_000  # above, one PLD evaluation costs 0.3-1 s (block squaring): search on the first grid
_PLD_RTOL = 2e-3  # PLD calibration stops at a 0.2 % bracket on sigma (each evaluation costs up to ~1 s)
_LATE = "time budget reached: sigma is feasible but may be up to {} larger than needed"
_LATE_OPEN = (
    "time budget reached: sigma is feasible; a smaller sigma may be too (no sigma above the target was found below it)"
)
_LATE_T = "time budget reached: T is within the target; the largest such T is below {:,} (up to {} larger)"
_LATE_T_OPEN = (
    "time budget reached: T is within the target; a larger T may be too (no T above the target was found yet)"
)


@dataclass(frozen=True)
class Calibration:
    sigma_x: float
    sigma_y: float
    target_epsilon: float
    result: EpsilonResult  # epsilon at the returned sigma: never above the target
    note: str | None = None  # why the search stopped early, if it did (the sigma is still feasible)

    def to_json(self) -> dict:
        out = self.result.to_json()
        out.update(sigma_x=self.sigma_x, sigma_y=self.sigma_y, target_epsilon=self.target_epsilon, note=self.note)
        return out


def calibrate_sigma(
    accountant: Accountant,
    setting: MixingSetting | MixingRelease | SampledGaussianSteps,
    *,
    target_epsilon: float,
    delta: float,
    sigma_ratio: float = 1.0,
    sigma_max: float = SIGMA_MAX,
    time_budget: float = TIME_BUDGET,
) -> Calibration:
    """sigma_x reaching eps <= target by monotone root finding on log sigma, within a time budget.

    epsilon decreases in sigma; we keep a bracket [lo, hi] with eps(lo) > target
    >= eps(hi), shrink it (Brent on log eps - log target, bisection while eps is
    infinite) and return hi, so the returned noise never overshoots the budget
    (Opacus' get_noise_multiplier once returned sigma whose eps exceeded the
    target by ~0.5). A target that needs sigma > sigma_max is a ValueError. When
    ``time_budget`` seconds pass, the best feasible sigma so far is returned with a note.

    pld-poisson is bracketed cheaply first: the rdp-poisson sigma is feasible for it
    (pld-poisson is never above rdp-poisson), the gdp-clt sigma is a first guess below
    it, and a few PLD evaluations (Illinois regula falsi on log eps vs log sigma, to a
    0.2 % bracket) find the answer. Every returned result is a pld-poisson evaluation at
    the returned sigma, so it is a rigorous bound there.

    ``setting`` is either user input (each accountant builds its paper's release),
    the exact release a mechanism makes (its sigmas are replaced), or a DP event of
    T subsampled-Gaussian steps (e.g. DP-SGD's): then "sigma_x" is its noise
    multiplier z and ``sigma_ratio`` must be 1.

    Args:
        accountant: the accountant whose epsilon must stay within the target (e.g. ``get_accountant("rdp-wor")``).
        setting: what is calibrated (see above); its own sigmas (or z) are ignored and replaced at each trial.
        target_epsilon: the epsilon not to exceed at ``delta``; positive and finite.
        delta: the delta of the (epsilon, delta) guarantee, in (0, 1).
        sigma_ratio: lambda = sigma_y / sigma_x, held fixed during the search; positive and finite.
        sigma_max: the largest sigma_x tried; a target out of reach at it is an error.
        time_budget: wall-clock seconds for the search; at the deadline the best feasible sigma is returned.

    Returns:
        A :class:`Calibration`: ``sigma_x`` (noise standard deviation on each released *average*, or z for a
        DP event), ``sigma_y = sigma_ratio * sigma_x``, the target, ``result`` (the accountant's
        :class:`EpsilonResult` at that sigma, epsilon <= target) and ``note`` (None, or why the search
        stopped early and how much larger than needed the sigma may be).

    Raises:
        ValueError: a non-positive or non-finite target or sigma ratio, delta outside (0, 1), a DP event with
            sigma_ratio != 1, or a target that even ``sigma_max`` does not reach.
        UnsupportedReleaseError: (a ValueError) the accountant does not cover the release's or event's
            sampling and adjacency.
    """
    if not (isinstance(target_epsilon, (int, float)) and math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ValueError(f"target epsilon must be a positive finite number. Found {target_epsilon}.")
    if not (math.isfinite(sigma_ratio) and sigma_ratio > 0):
        raise ValueError(f"sigma ratio lambda must be a positive finite number. Found {sigma_ratio}.")
    check_delta(delta)
    if isinstance(setting, SampledGaussianSteps) and sigma_ratio != 1.0:
        raise ValueError("a DP event has one noise multiplier z: sigma ratio lambda must be 1.")
    if isinstance(setting, (MixingRelease, SampledGaussianSteps)) and not accountant.supports(setting):
        raise UnsupportedReleaseError(
            f"{accountant.name} does not cover {setting.sampling.value} sampling with {setting.adjacency.value} adjacency."
        )
    sigma_max = min(sigma_max, _largest_finite_sigma_x(sigma_ratio))
    deadline = time.perf_counter() + time_budget

    def evaluator(acc: Accountant) -> Callable[[float], EpsilonResult]:
        def result_at(sigma_x: float) -> EpsilonResult:
            sigma_y = sigma_ratio * sigma_x
            if isinstance(setting, SampledGaussianSteps):
                return acc.epsilon(setting.with_noise_multiplier(sigma_x), delta)
            if isinstance(setting, MixingRelease):
                return acc.epsilon(setting.with_sigma(sigma_x, sigma_y), delta)
            return acc.epsilon(acc.release_for(replace(setting, sigma_x=sigma_x, sigma_y=sigma_y)), delta)

        return result_at

    if isinstance(accountant, PldPoissonAccountant):
        steps = setting.T if isinstance(setting, MixingSetting) else setting.num_points
        return _calibrate_pld(accountant, evaluator, steps, target_epsilon, sigma_ratio, sigma_max, deadline)
    hi, hi_res, note = _search(evaluator(accountant), target_epsilon, sigma_max, deadline, accountant.name)
    return Calibration(hi, sigma_ratio * hi, target_epsilon, hi_res, note)


@dataclass(frozen=True)
class ComposedCalibration:
    """sigma of a release calibrated so that it and another release of the same data stay within a target together."""

    sigma_x: float
    sigma_y: float
    target_epsilon: float
    epsilon: float  # of the composition at the returned sigma: <= target


def calibrate_sigma_composed(
    release: MixingRelease,
    composed: Callable[[MixingRelease], float],
    *,
    target_epsilon: float,
    delta: float,
    sigma_ratio: float = 1.0,
    rtol: float = _PLD_RTOL,
) -> ComposedCalibration:
    """The least sigma_x (to a factor 1 + ``rtol``, the feasible end, evaluated) with ``composed(release at sigma)``
    <= target: epsilon of the release next to what else was published from the same data, decreasing in sigma.

    The bracket starts at the sigma the release alone needs for the target (pld-poisson for Poisson sampling,
    rdp-wor otherwise), walked down while the composition is still within it (a grid's rounding), its high end
    doubles until feasible; then bisection on log sigma.

    Raises:
        ValueError: a non-positive or non-finite target, delta outside (0, 1), a bad sigma ratio, or a target the
            rest uses up (no sigma up to :data:`SIGMA_MAX` fits).
    """
    from dpmix_core.privacy.accountants import get_accountant

    if not (isinstance(target_epsilon, (int, float)) and math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ValueError(f"target epsilon must be a positive finite number. Found {target_epsilon}.")
    if not (math.isfinite(sigma_ratio) and sigma_ratio > 0):
        raise ValueError(f"sigma ratio lambda must be a positive finite number. Found {sigma_ratio}.")
    check_delta(delta)

    def eps_at(sigma_x: float) -> float:
        return float(composed(release.with_sigma(sigma_x, sigma_ratio * sigma_x)))

    alone = "pld-poisson" if release.sampling is Sampling.POISSON else "rdp-wor"
    start = calibrate_sigma(
        get_accountant(alone),
        release,
        target_epsilon=target_epsilon,
        delta=delta,
        sigma_ratio=sigma_ratio,
        time_budget=REPRODUCIBLE,
    ).sigma_x
    lo: float | None = None
    hi, hi_eps = start, eps_at(start)
    while hi_eps > target_epsilon:  # the usual case: the rest costs something, so more noise is needed
        lo, hi = hi, 2.0 * hi
        if hi > SIGMA_MAX:
            raise ValueError(
                f"target epsilon {target_epsilon:g} is out of reach: what else was published uses it up on its own."
            )
        hi_eps = eps_at(hi)
    if lo is None:  # the sigma alone is feasible next to the rest (a grid's rounding): walk down to an infeasible one
        lo = hi / 1.25
        while (lo_eps := eps_at(lo)) <= target_epsilon:
            hi, hi_eps, lo = lo, lo_eps, lo / 1.25
            if lo < _SIGMA_MIN:
                return ComposedCalibration(hi, sigma_ratio * hi, float(target_epsilon), hi_eps)
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        mid_eps = eps_at(mid)
        if mid_eps <= target_epsilon:
            hi, hi_eps = mid, mid_eps
        else:
            lo = mid
    return ComposedCalibration(hi, sigma_ratio * hi, float(target_epsilon), hi_eps)


def _largest_finite_sigma_x(sigma_ratio: float) -> float:
    """The largest sigma_x whose sigma_y = sigma_ratio * sigma_x is a finite double (half of it, against rounding).

    The search starts at sigma_max: at lambda = 1e305 its sigma_y = 1e309 overflowed to inf and every accountant
    refused the release ('sigma_y must be a finite number'), though sigma_x = 3.4 meets eps = 1 there.
    """
    return sys.float_info.max / sigma_ratio / 2.0


def _calibrate_pld(
    accountant, evaluator, steps: int, target: float, ratio: float, sigma_max: float, deadline: float
) -> Calibration:
    """rdp-poisson bracket, gdp-clt first guess, then Illinois regula falsi on log eps vs log sigma with the PLD.

    Above T = 1e5 one PLD evaluation costs 0.3-1 s: the search runs on the first grid only
    (``work_cap=0``, a rigorous bound too), then continues with the full grid from that
    feasible sigma, guessing sigma * eps_full / target, while the budget lasts.
    """
    hi, _, _ = _search(evaluator(RdpPoissonAccountant()), target, sigma_max, deadline, "pld-poisson")
    try:
        guess = _search(evaluator(GdpCltAccountant()), target, hi, deadline, "gdp-clt")[0]
    except ValueError:
        guess = hi / 1.5
    stages = [accountant]
    if steps > _FIRST_GRID_SEARCH_T:
        first_grid = PldPoissonAccountant(
            relative_accuracy=accountant.relative_accuracy, work_cap=0.0, optimistic=False
        )
        stages = [first_grid, accountant]
    hi_res, note = None, None
    for acc in stages:
        result_at = _timed(evaluator(acc))
        if time.perf_counter() + result_at.slowest > deadline and hi_res is not None:
            break
        res = result_at(hi)  # feasible: <= rdp-poisson, or <= the previous stage's bound at hi
        if hi_res is None or res.epsilon <= hi_res.epsilon:
            hi_res = res
        if hi_res is not res:
            guess = hi / 1.5
        elif hi_res.epsilon > 0:
            guess = min(guess, hi * hi_res.epsilon / target) if acc is stages[0] else hi * hi_res.epsilon / target
        hi, hi_res, note = _illinois(result_at, guess, hi, hi_res, target, deadline)
    if hi_res is None:  # the bracket always holds a feasible result by now
        raise ValueError(f"calibration found no sigma meeting epsilon <= {target:g}.")
    return Calibration(hi, ratio * hi, target, hi_res, note)


class _timed:
    """An evaluator that remembers its slowest call (to stop before a deadline, not after)."""

    def __init__(self, result_at: Callable[[float], EpsilonResult]) -> None:
        self.result_at, self.slowest = result_at, 0.0

    def __call__(self, sigma_x: float) -> EpsilonResult:
        t0 = time.perf_counter()
        res = self.result_at(sigma_x)
        self.slowest = max(self.slowest, time.perf_counter() - t0)
        return res


def _illinois(
    result_at: _timed, guess: float, hi: float, hi_res: EpsilonResult, target: float, deadline: float
) -> tuple[float, EpsilonResult, str | None]:
    """(smallest feasible sigma, its result, note): walk down from the guess, then regula falsi in log-log."""

    def late() -> bool:  # would one more evaluation overrun the deadline?
        return time.perf_counter() + result_at.slowest > deadline

    lo, lo_res = min(guess, hi / (1 + _PLD_RTOL)), None
    while not late():  # walk down from the guess until infeasible
        lo_res = result_at(lo)
        if lo_res.epsilon > target:
            break
        hi, hi_res, lo_res = lo, lo_res, None
        lo /= 1.5
        if lo < _SIGMA_MIN:  # feasible at any noise (e.g. q T <= delta): as in _search
            return hi, hi_res, None
    if lo_res is None:
        return hi, hi_res, _LATE_OPEN

    def g(res: EpsilonResult) -> float:
        return math.log(max(res.epsilon, 1e-300)) - math.log(target)

    x_lo, x_hi, g_lo, g_hi, side = math.log(lo), math.log(hi), g(lo_res), g(hi_res), 0
    while x_hi - x_lo > math.log1p(_PLD_RTOL):
        if late():
            return hi, hi_res, _LATE.format(_percent(math.expm1(x_hi - x_lo)))
        if math.isfinite(g_lo) and g_lo > g_hi:
            x = x_hi - g_hi * (x_hi - x_lo) / (g_hi - g_lo)
        else:
            x = 0.5 * (x_lo + x_hi)
        x = min(max(x, x_lo + 1e-3 * (x_hi - x_lo)), x_hi - 1e-3 * (x_hi - x_lo))
        res = result_at(math.exp(x))
        if res.epsilon <= target:
            x_hi, g_hi, hi, hi_res = x, g(res), math.exp(x), res
            side = side + 1 if side > 0 else 1
            if side > 1:
                g_lo /= 2  # Illinois: halve the stale end's value
        else:
            x_lo, g_lo = x, g(res)
            side = side - 1 if side < 0 else -1
            if side < -1:
                g_hi /= 2
    return hi, hi_res, None


def _percent(fraction: float) -> str:
    """A relative gap for a person, never "0.0%": 2 significant digits ("0.031 %", "12 %", "7e+02 %")."""
    return f"{100 * fraction:.2g} %"


def _search(
    result_at: Callable[[float], EpsilonResult],
    target_epsilon: float,
    sigma_max: float,
    deadline: float,
    name: str,
    start: float | None = None,
) -> tuple[float, EpsilonResult, str | None]:
    """(smallest feasible sigma found, its result, note if the deadline stopped the search)."""
    top = result_at(sigma_max)
    if top.epsilon > target_epsilon:
        raise ValueError(
            f"target epsilon {target_epsilon:g} is out of reach for {name}: even sigma_x = {sigma_max:g} "
            f"gives epsilon = {top.epsilon:.4g}."
        )
    hi, hi_res = sigma_max, top
    lo = min(1.0, sigma_max / 2.0) if start is None else start
    lo_res = result_at(lo)
    while lo_res.epsilon <= target_epsilon:  # walk down until the target is exceeded
        hi, hi_res = lo, lo_res
        lo /= 8.0
        if lo < _SIGMA_MIN:
            return hi, hi_res, None
        if time.perf_counter() > deadline:
            return hi, hi_res, _LATE_OPEN
        lo_res = result_at(lo)
    while not math.isfinite(lo_res.epsilon) and hi / lo > 1 + _RTOL:  # bisect out of the infinite zone
        if time.perf_counter() > deadline:
            return hi, hi_res, _LATE.format(_percent(hi / lo - 1))
        mid = math.sqrt(lo * hi)
        mid_res = result_at(mid)
        if mid_res.epsilon <= target_epsilon:
            hi, hi_res = mid, mid_res
        else:
            lo, lo_res = mid, mid_res

    if hi / lo <= 1 + _RTOL:
        return hi, hi_res, None
    log_target = math.log(target_epsilon)
    cache: dict[float, EpsilonResult] = {}

    class _Late(Exception):
        pass

    def f(log_sigma: float) -> float:
        if time.perf_counter() > deadline:
            raise _Late
        res = result_at(math.exp(log_sigma))
        cache[log_sigma] = res
        return math.log(max(res.epsilon, 1e-300)) - log_target

    note = None
    try:
        root = brentq(f, math.log(lo), math.log(hi), xtol=_RTOL / 4, rtol=1e-12, maxiter=100)
    except _Late:
        root, note = None, "late"
    for log_sigma, res in cache.items():  # tightest feasible point seen
        if res.epsilon <= target_epsilon and math.exp(log_sigma) < hi:
            hi, hi_res = math.exp(log_sigma), res
    if root is None:
        infeasible = [math.exp(s) for s, r in cache.items() if r.epsilon > target_epsilon] + [lo]
        return hi, hi_res, _LATE.format(_percent(hi / max(infeasible) - 1))
    candidate = math.exp(root) * (1 + _RTOL)
    if candidate < hi:
        res = result_at(candidate)
        if res.epsilon <= target_epsilon:
            hi, hi_res = candidate, res
    return hi, hi_res, note


@dataclass(frozen=True)
class PointBudget:
    """The largest T whose epsilon stays within a target at fixed noise, and the epsilon there."""

    T: int
    target_epsilon: float
    result: EpsilonResult  # epsilon at T: never above the target
    note: str | None = None  # the search hit T_MAX or its time budget (T is still within the target)

    def to_json(self) -> dict:
        out = self.result.to_json()
        out.update(T=self.T, target_epsilon=self.target_epsilon, note=self.note)
        return out


def max_points(
    accountant: Accountant,
    setting: MixingSetting,
    *,
    target_epsilon: float,
    delta: float,
    T_max: int = T_MAX,
    time_budget: float = TIME_BUDGET,
) -> PointBudget:
    """The most synthetic points T at the setting's noise whose epsilon stays within ``target_epsilon``.

    Composition over the T points makes epsilon non-decreasing in T for every
    accountant, so we gallop up from the smallest release (x4 per step) until the
    target is exceeded, then bisect on integers. ``setting.T`` is ignored.
    Class-centric mixing releases floor(T/K) points per class, so T moves in
    steps of K and the answer is the number of points actually released (a
    multiple of K). The returned result is the accountant's evaluation at the
    returned T, so it is a guarantee there whatever the search did.

    Args:
        accountant: the accountant whose epsilon must stay within the target.
        setting: the release as a user states it (n, l, sigmas, bounds, class sizes); its T is ignored.
        target_epsilon: the epsilon not to exceed at ``delta``; positive and finite.
        delta: the delta of the (epsilon, delta) guarantee, in (0, 1).
        T_max: the largest T tried; a budget that lasts beyond it is returned as T_max with a note.
        time_budget: wall-clock seconds; at the deadline the largest feasible T found so far is returned
            with a note.

    Returns:
        A :class:`PointBudget`: ``T``, the target, ``result`` (the accountant's epsilon at T, <= target) and
        ``note`` (None, or that T_max was reached or the search stopped early).

    Raises:
        ValueError: a non-positive or non-finite target, delta outside (0, 1), T_max below one release, or a
            target that even the smallest release (one point; one per class for class-centric mixing) exceeds.
        UnsupportedReleaseError: (a ValueError) the accountant does not cover the setting.
    """
    if not (isinstance(target_epsilon, (int, float)) and math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ValueError(f"target epsilon must be a positive finite number. Found {target_epsilon}.")
    check_delta(delta)
    step = len(setting.class_sizes) if setting.class_sizes is not None else 1  # class-centric: floor(T/K) per class
    if T_max < step:
        raise ValueError(f"T_max must allow one point per class ({step} points). Found {T_max}.")
    deadline = time.perf_counter() + time_budget

    def result_at(units: int) -> EpsilonResult:
        return accountant.epsilon(accountant.release_for(replace(setting, T=units * step)), delta)

    lo, lo_res = 1, result_at(1)
    if lo_res.epsilon > target_epsilon:
        smallest = "one point" if step == 1 else f"one point per class ({step} points)"
        raise ValueError(
            f"even {smallest} costs epsilon = {lo_res.epsilon:.4g} > {target_epsilon:g} under "
            f"{accountant.name}: more noise (sigma) or a larger target is needed."
        )
    top = T_max // step
    hi = None  # the smallest infeasible count found
    while hi is None:  # gallop
        if lo == top:
            note = f"epsilon stays within the target up to T = {top * step:,}, the largest T searched"
            return PointBudget(top * step, target_epsilon, lo_res, note)
        if time.perf_counter() > deadline:
            return PointBudget(lo * step, target_epsilon, lo_res, _LATE_T_OPEN)
        trial = min(4 * lo, top)
        res = result_at(trial)
        if res.epsilon <= target_epsilon:
            lo, lo_res = trial, res
        else:
            hi = trial
    while hi - lo > 1:  # bisect: lo feasible, hi not
        if time.perf_counter() > deadline:
            return PointBudget(lo * step, target_epsilon, lo_res, _LATE_T.format(hi * step, _percent(hi / lo - 1)))
        mid = (lo + hi) // 2
        res = result_at(mid)
        if res.epsilon <= target_epsilon:
            lo, lo_res = mid, res
        else:
            hi = mid
    return PointBudget(lo * step, target_epsilon, lo_res, None)
