"""Gaussian differential privacy (Dong, Roth, Su 2019) and its CLT for Poisson subsampling."""

from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtri

__all__ = ["LOG_SQRT_2PI", "poisson_clt_mu", "gdp_delta", "gdp_epsilon", "combined_noise_multiplier"]


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


# below, the two terms of delta(eps) agree in all but ~log10(1/(mu x^3)) digits and their difference is rounding
# (eps = 0 "exactly" at mu = 1e-20, delta = 1e-50, where the true eps is 1.1e-19); the bound used there is within
# 0.05 % of the exact eps at mu <= 1e-4 (checked against 400-digit mpmath)
SMALL_MU = 1e-4
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _log_gdp_delta_upper(x: float, mu: float) -> float:
    """log of mu phi(max(0, x - mu/2)) - mu x Phi(-x - mu/2) >= delta(eps = mu x) for mu-GDP, without cancellation.

    Phi(-x + mu/2) - Phi(-x - mu/2) is phi integrated over an interval of width mu, at most mu times phi's largest
    value there; e^eps Phi(-x - mu/2) is at least (1 + eps) Phi(-x - mu/2). What is left after the subtraction is
    about 1/x^2 of the first term, so the difference keeps all but a couple of its digits at any mu.
    """
    log_a = math.log(mu) - 0.5 * max(0.0, x - mu / 2.0) ** 2 - LOG_SQRT_2PI
    if x <= 0.0:
        return log_a
    log_b = math.log(mu) + math.log(x) + float(log_ndtr(-x - mu / 2.0))
    if log_b >= log_a:
        return -math.inf
    return log_a + math.log(-math.expm1(log_b - log_a))


def _small_mu_epsilon(delta: float, mu: float) -> float:
    """An eps with delta(eps) <= delta for mu < SMALL_MU, from the cancellation-free upper bound on delta(eps)."""
    if math.erf(mu / (2.0 * math.sqrt(2.0))) <= delta:  # delta(0) = 2 Phi(mu/2) - 1, exact
        return 0.0
    log_delta = math.log(delta)
    if _log_gdp_delta_upper(0.0, mu) <= log_delta:
        return 0.0
    # where mu phi(x - mu/2) = delta the bound is below delta: the root lies in [0, x_hi]
    x_hi = mu / 2.0 + math.sqrt(max(0.0, 2.0 * (math.log(mu) - log_delta - LOG_SQRT_2PI))) + 1e-9
    x = brentq(lambda t: _log_gdp_delta_upper(t, mu) - log_delta, 0.0, x_hi, xtol=1e-13, rtol=1e-13)
    while _log_gdp_delta_upper(x, mu) > log_delta:  # brentq may land a hair below the root
        x *= 1.0 + 1e-12
    return mu * x


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
    if mu < SMALL_MU:
        return _small_mu_epsilon(delta, mu)
    log_delta = math.log(delta)
    if _log_gdp_delta(0.0, mu) <= log_delta:
        return 0.0
    hi = max(simple_bound, 1e-9)
    return brentq(lambda e: _log_gdp_delta(e, mu) - log_delta, 0.0, hi, xtol=1e-12, rtol=1e-12)
