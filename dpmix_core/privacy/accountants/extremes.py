"""Noise at the ends of the double range settles epsilon by itself, for every accountant and any float input.

One composed step, whitened, compares N(0, I) with N(v, I), ||v|| <= 1/z (z the release's
noise multiplier): total variation t = 2 Phi(1/(2z)) - 1 <= min(1, 1/(z sqrt(2 pi))). The
step uses the differing record only with probability gamma (l/n or q; otherwise both
outputs have the same law), so its total variation is at most gamma t (joint convexity),
and by coupling T independent steps the release's total variation is at most
1 - (1 - gamma t)^T. A mechanism with total variation s is (0, s)-DP.

Where that does not reach delta but z is beyond any accountant's numerics (z >= Z_HUGE,
where z^-2 underflows), the T-fold Gaussian is mu-GDP with mu = sqrt(T)/z (Dong, Roth, Su
2019, Cor. 3.3), sampling only helps (their Thm. 4.2 / the same convexity argument), and
delta(eps) <= Phi(-eps/mu + mu/2) gives eps = mu (mu/2 - Phi^-1(delta)).

The same mu-GDP bound, computed exactly (:func:`unsampled_gaussian_epsilon`), holds for any z: the release with
the differing record in every step bounds every subsampled one. pld-poisson reports it where its grid and RDP
are looser (tiny z, where subsampling barely helps and the PLD grid overflows).
"""

from __future__ import annotations

import math

from scipy.special import ndtri

from dpmix_core.privacy.analysis.gdp import LOG_SQRT_2PI, gdp_epsilon
from dpmix_core.privacy.events import AccountedRelease

__all__ = [
    "Z_HUGE",
    "Z_TINY",
    "at_most_unsampled",
    "settled_by_noise",
    "total_variation_bound",
    "unsampled_gaussian_epsilon",
]

Z_HUGE = 1e100  # z^-2 < 1e-200: RDP/PLD numerics below double resolution
Z_TINY = 1e-100  # z^-2 > 1e200: RDP/PLD numerics overflow; every bound is inf


def total_variation_bound(release: AccountedRelease) -> float:
    """1 - (1 - gamma min(1, 1/(z sqrt(2 pi))))^T, without overflow: the release is (0, this)-DP."""
    z = release.noise_multiplier()
    if math.isinf(z):
        return 0.0
    log_t = 0.0 if z == 0.0 else min(0.0, -math.log(z) - LOG_SQRT_2PI)
    step = release.sampling_rate * math.exp(log_t)
    if step >= 1.0:
        return 1.0
    return min(1.0, -math.expm1(release.num_points * math.log1p(-step)))


def unsampled_gaussian_epsilon(release: AccountedRelease, delta: float) -> float:
    """epsilon of the T Gaussian steps with the differing record in every step: mu-GDP, mu = sqrt(T)/z (Dong, Roth,
    Su 2019, Cor. 3.3), exact; an upper bound for the subsampled release (module docstring). inf without noise."""
    z = release.noise_multiplier()
    if z == 0.0:
        return math.inf
    log_mu = 0.5 * math.log(release.num_points) - math.log(z)
    return gdp_epsilon(delta, math.exp(log_mu)) if log_mu < 300.0 else math.inf


def settled_by_noise(
    release: AccountedRelease, delta: float
) -> tuple[float, None, tuple[tuple[str, float], ...], str] | None:
    """(epsilon, None, details, reason) when the noise alone settles epsilon (module docstring), else None."""
    z = release.noise_multiplier()
    if z == 0.0:
        return None
    tv = total_variation_bound(release)
    details = (("noise_multiplier", z), ("total_variation_bound", tv))
    if tv <= delta:
        return (
            0.0,
            None,
            details,
            (
                f"the release is (0, {tv:.2g})-DP by total variation (1 - (1 - gamma min(1, 1/(z sqrt(2 pi))))^T "
                "<= delta): noise this large, or records used this rarely, reveal nothing beyond delta"
            ),
        )
    if z <= Z_TINY:
        return (
            math.inf,
            None,
            details,
            (f"noise multiplier z = {z:.3g} is below {Z_TINY:g}: every bound diverges (noise far too small)"),
        )
    if z >= Z_HUGE:
        mu = math.exp(0.5 * math.log(release.num_points) - math.log(z))
        eps = mu * (mu / 2.0 - float(ndtri(delta)))
        return (
            eps,
            None,
            details + (("mu", mu),),
            (
                f"noise multiplier z = {z:.3g} is beyond double-precision accounting; "
                "showing the mu-GDP bound of the unsampled Gaussian (mu = sqrt(T)/z)"
            ),
        )
    return None


def at_most_unsampled(
    result: tuple[float, float | None, tuple[tuple[str, float], ...], str | None],
    release: AccountedRelease,
    delta: float,
) -> tuple[float, float | None, tuple[tuple[str, float], ...], str | None]:
    """An accountant's (epsilon, order, details, reason), or the unsampled mu-GDP bound where that is smaller.

    Subsampling never costs privacy (module docstring), so the exact bound of the same T Gaussian steps with the
    differing record in every step is valid too; it wins where an accountant's numerics are looser (tiny z, where
    a PLD grid overflows; huge z, where a Thm. 27 evaluation fails and the fallback caps its orders).
    """
    eps, order, details, reason = result
    unsampled = unsampled_gaussian_epsilon(release, delta)
    if not unsampled < eps:
        return result
    return (
        unsampled,
        None,
        details + (("unsampled_gaussian_epsilon", unsampled),),
        (f"{reason}; " if reason else "")
        + (
            f"the same T Gaussian steps without subsampling give {unsampled:.4g} (mu-GDP, mu = sqrt(T)/z, "
            f"exact), below the {eps:.4g} above; subsampling never costs privacy, so that bound is shown"
        ),
    )
