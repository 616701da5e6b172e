"""Noise calibration: the smallest sigma_x (sigma_y = lambda * sigma_x) whose epsilon stays within a target."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scipy.optimize import brentq

from dpmix_core.privacy.accountants import Accountant, EpsilonResult, MixingSetting, UnsupportedReleaseError
from dpmix_core.privacy.accountants.base import check_delta
from dpmix_core.privacy.release import MixingRelease

__all__ = ["Calibration", "calibrate_sigma", "SIGMA_MAX"]

SIGMA_MAX = 1e4
_RTOL = 1e-5  # relative width of the final bracket on sigma


@dataclass(frozen=True)
class Calibration:
    sigma_x: float
    sigma_y: float
    target_epsilon: float
    result: EpsilonResult  # epsilon at the returned sigma: never above the target

    def to_json(self) -> dict:
        out = self.result.to_json()
        out.update(sigma_x=self.sigma_x, sigma_y=self.sigma_y, target_epsilon=self.target_epsilon)
        return out


def calibrate_sigma(
    accountant: Accountant,
    setting: MixingSetting | MixingRelease,
    *,
    target_epsilon: float,
    delta: float,
    sigma_ratio: float = 1.0,
    sigma_max: float = SIGMA_MAX,
) -> Calibration:
    """sigma_x reaching eps <= target by monotone root finding on log sigma.

    epsilon decreases in sigma; we keep a bracket [lo, hi] with eps(lo) > target
    >= eps(hi), shrink it (Brent on log eps - log target, bisection while eps is
    infinite) and return hi, so the returned noise never overshoots the budget
    (Opacus' get_noise_multiplier once returned sigma whose eps exceeded the
    target by ~0.5). A target that needs sigma > sigma_max is a ValueError.

    ``setting`` is either user input (each accountant builds its paper's release)
    or the exact release a mechanism makes (its sigmas are replaced).
    """
    if not (isinstance(target_epsilon, (int, float)) and math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ValueError(f"target epsilon must be a positive finite number. Found {target_epsilon}.")
    if not (math.isfinite(sigma_ratio) and sigma_ratio > 0):
        raise ValueError(f"sigma ratio lambda must be a positive finite number. Found {sigma_ratio}.")
    check_delta(delta)

    if isinstance(setting, MixingRelease) and not accountant.supports(setting):
        raise UnsupportedReleaseError(
            f"{accountant.name} does not cover {setting.sampling.value} sampling with {setting.adjacency.value} adjacency."
        )

    def result_at(sigma_x: float) -> EpsilonResult:
        sigma_y = sigma_ratio * sigma_x
        if isinstance(setting, MixingRelease):
            return accountant.epsilon(setting.with_sigma(sigma_x, sigma_y), delta)
        return accountant.epsilon(accountant.release_for(replace(setting, sigma_x=sigma_x, sigma_y=sigma_y)), delta)

    top = result_at(sigma_max)
    if top.epsilon > target_epsilon:
        raise ValueError(
            f"target epsilon {target_epsilon:g} is out of reach for {accountant.name}: even sigma_x = {sigma_max:g} "
            f"gives epsilon = {top.epsilon:.4g}."
        )
    hi, hi_res = sigma_max, top
    lo = min(1.0, sigma_max / 2.0)
    lo_res = result_at(lo)
    while lo_res.epsilon <= target_epsilon:  # walk down until the target is exceeded
        hi, hi_res = lo, lo_res
        lo /= 8.0
        if lo < 1e-12:
            return Calibration(hi, sigma_ratio * hi, target_epsilon, hi_res)
        lo_res = result_at(lo)
    while not math.isfinite(lo_res.epsilon) and hi / lo > 1 + _RTOL:  # bisect out of the infinite zone
        mid = math.sqrt(lo * hi)
        mid_res = result_at(mid)
        if mid_res.epsilon <= target_epsilon:
            hi, hi_res = mid, mid_res
        else:
            lo, lo_res = mid, mid_res

    if hi / lo > 1 + _RTOL:
        log_target = math.log(target_epsilon)
        cache: dict[float, EpsilonResult] = {}

        def f(log_sigma: float) -> float:
            res = result_at(math.exp(log_sigma))
            cache[log_sigma] = res
            return math.log(max(res.epsilon, 1e-300)) - log_target

        root = brentq(f, math.log(lo), math.log(hi), xtol=_RTOL / 4, rtol=1e-12, maxiter=100)
        for log_sigma, res in cache.items():  # tightest feasible point seen
            if res.epsilon <= target_epsilon and math.exp(log_sigma) < hi:
                hi, hi_res = math.exp(log_sigma), res
        candidate = math.exp(root) * (1 + _RTOL)
        if candidate < hi:
            res = result_at(candidate)
            if res.epsilon <= target_epsilon:
                hi, hi_res = candidate, res
    return Calibration(hi, sigma_ratio * hi, target_epsilon, hi_res)
