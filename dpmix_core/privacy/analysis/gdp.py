"""Gaussian differential privacy (Dong, Roth, Su 2019) and its CLT for Poisson subsampling."""

from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtri

__all__ = ["poisson_clt_mu", "gdp_delta", "gdp_epsilon", "combined_noise_multiplier"]


def combined_noise_multiplier(z_x: float, z_y: float) -> float:
    """z = (1/z_x^2 + 1/z_y^2)^(-1/2) (DPFMix Lemma 2.2)."""
    if z_x <= 0 or z_y <= 0:
        return 0.0
    return 1.0 / math.sqrt(1.0 / z_x**2 + 1.0 / z_y**2)


def poisson_clt_mu(q: float, num_steps: int, noise_multiplier: float) -> float:
    """mu = q sqrt(T) sqrt(e^{1/z^2} - 1) (DPFMix Thm. 2.1; Bu et al. 2020, Thm. 5). inf if no noise."""
    if noise_multiplier <= 0:
        return math.inf
    log_x = -2.0 * math.log(noise_multiplier)  # x = 1/z^2 in log space: no overflow at z = 1e-200
    if log_x > 690.0:
        return math.inf
    x = math.exp(log_x)
    if x > 1.0:
        log_expm1 = x + math.log(-math.expm1(-x))
    else:
        log_expm1 = log_x if x < 1e-12 else math.log(math.expm1(x))  # expm1(x) = x (1 + x/2 + ...)
    log_mu = math.log(q) + 0.5 * math.log(num_steps) + 0.5 * log_expm1
    return math.exp(log_mu) if log_mu < 700 else math.inf


def _log_gdp_delta(eps: float, mu: float) -> float:
    """log delta(eps) for mu-GDP, computed as log(a - b) with a, b from log_ndtr."""
    log_a = float(log_ndtr(-eps / mu + mu / 2.0))
    log_b = eps + float(log_ndtr(-eps / mu - mu / 2.0))
    if log_b >= log_a:
        return -math.inf
    return log_a + math.log(-math.expm1(log_b - log_a))


def gdp_delta(eps: float, mu: float) -> float:
    """delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Dong-Roth-Su 2019, Cor. 2.13)."""
    if mu <= 0:
        return 0.0
    return math.exp(_log_gdp_delta(eps, mu))


def gdp_epsilon(delta: float, mu: float) -> float:
    """Smallest eps >= 0 with delta(eps) <= delta for mu-GDP; inf for mu = inf."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1). Found {delta}.")
    if math.isinf(mu):
        return math.inf
    if mu <= 0:
        return 0.0
    # delta(eps) <= Phi(-eps/mu + mu/2), so this eps is always enough; for large mu it is
    # also tight, and it avoids cancellation in the two-term formula.
    simple_bound = mu * (mu / 2.0 - float(ndtri(delta)))  # -ndtri(delta), not ndtri(1 - delta): exact at delta = 1e-300
    if mu > 40.0:
        return simple_bound
    log_delta = math.log(delta)
    if _log_gdp_delta(0.0, mu) <= log_delta:
        return 0.0
    hi = max(simple_bound, 1e-9)
    return brentq(lambda e: _log_gdp_delta(e, mu) - log_delta, 0.0, hi, xtol=1e-12, rtol=1e-12)
