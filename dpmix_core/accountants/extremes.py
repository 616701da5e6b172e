"""Noise so large that it settles epsilon by itself, for every accountant and any float input.

One composed step, whitened, compares N(0, I) with N(v, I), ||v|| <= 1/z (z the release's
noise multiplier). Its total variation is 2 Phi(1/(2z)) - 1 <= 1/(z sqrt(2 pi)); sampling
(Poisson or without replacement) mixes such pairs and cannot increase it (joint convexity),
and T steps add at most T times it (basic composition, Dwork & Roth 2014, Thm. 3.16). A
mechanism with total variation t is (0, t)-DP, so the release is (0, T / (z sqrt(2 pi)))-DP.

Where that does not reach delta but z is beyond any accountant's numerics (z >= Z_HUGE,
where z^-2 underflows), the T-fold Gaussian is mu-GDP with mu = sqrt(T)/z (Dong, Roth, Su
2019, Cor. 3.3), sampling only helps (their Thm. 4.2 / the same convexity argument), and
delta(eps) <= Phi(-eps/mu + mu/2) gives eps = mu (mu/2 - Phi^-1(delta)).
"""

from __future__ import annotations

import math

from scipy.special import ndtri

from dpmix_core.release import MixingRelease

__all__ = ["Z_HUGE", "large_noise_epsilon", "total_variation_bound"]

Z_HUGE = 1e100  # z^-2 < 1e-200: RDP/PLD numerics below double resolution
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def total_variation_bound(release: MixingRelease) -> float:
    """T / (z sqrt(2 pi)) in log space, capped at 1: the release is (0, this)-DP."""
    z = release.noise_multiplier()
    if z == 0.0:
        return 1.0
    if math.isinf(z):
        return 0.0
    log_tv = math.log(release.num_points) - math.log(z) - _LOG_SQRT_2PI
    return math.exp(min(log_tv, 0.0))


def large_noise_epsilon(
    release: MixingRelease, delta: float
) -> tuple[float, None, tuple[tuple[str, float], ...], str] | None:
    """(epsilon, None, details, reason) when the noise alone settles epsilon (module docstring), else None."""
    z = release.noise_multiplier()
    if z == 0.0:
        return None
    tv = total_variation_bound(release)
    details = (("noise_multiplier", z), ("total_variation_bound", tv))
    if tv <= delta:
        return 0.0, None, details, (
            f"noise so large that the release is (0, {tv:.2g})-DP by total variation (T/(z sqrt(2 pi)) <= delta)"
        )
    if z >= Z_HUGE:
        mu = math.exp(0.5 * math.log(release.num_points) - math.log(z))
        eps = mu * (mu / 2.0 - float(ndtri(delta)))
        return eps, None, details + (("mu", mu),), (
            f"noise multiplier z = {z:.3g} is beyond double-precision accounting; "
            "showing the mu-GDP bound of the unsampled Gaussian (mu = sqrt(T)/z)"
        )
    return None
