"""RDP amplification by subsampling without replacement (Wang, Balle, Kasiviswanathan 2019).

The bound used by DPMix (Lee et al., ISIT 2019) and DP-CDA (Theorem 1): for a
base mechanism with RDP eps(alpha), subsampling a fraction gamma without
replacement gives, for integer alpha >= 2,

    eps'(alpha) <= 1/(alpha-1) * log(1 + gamma^2 C(alpha,2) min{4(e^{eps(2)}-1), 2 e^{eps(2)}}
                   + 4 sum_{j=3..alpha} gamma^j C(alpha,j) sqrt(B(2 floor(j/2)) B(2 ceil(j/2))))

with B(k) = sum_{i=0..k} (-1)^i C(k,i) e^{(i-1) eps(i)}   (WBK 2019, Theorem 9 / arXiv 1808.00087).

DP-CDA prints B(ceil(j/2)) inside the sum; the source theorem has B(2 ceil(j/2)),
which is what we use (B of an odd order is not a moment and can be negative).

For the Gaussian base mechanism eps(alpha) = alpha * r, and B(k) for even k is the
central moment E_q[(p/q - 1)^k] of the likelihood ratio L = exp(mu Z - mu^2/2),
Z ~ N(0,1), mu^2 = 2r. The alternating sum cancels catastrophically in floating
point, so we integrate the positive integrand in log space instead.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import gammaln, logsumexp

__all__ = ["log_gaussian_central_moments", "wbk_subsampled_gaussian_rdp"]

_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(160)
_HALF_WIDTH = 12.0  # log-integrand is concave with curvature <= -1: e^{-72} beyond this


def _log_abs_expm1(a: np.ndarray) -> np.ndarray:
    """log|e^a - 1|, stable for all finite a."""
    with np.errstate(divide="ignore"):
        return np.maximum(a, 0.0) + np.log(-np.expm1(-np.abs(a)))


def _bisect(fun, lo: np.ndarray, hi: np.ndarray, iters: int = 80) -> np.ndarray:
    """Vectorised bisection for an increasing function with fun(lo) < 0 < fun(hi)."""
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        positive = fun(mid) > 0
        hi = np.where(positive, mid, hi)
        lo = np.where(positive, lo, mid)
    return 0.5 * (lo + hi)


def _log_integral(log_f, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log of int_a^b exp(log_f(z)) dz by Gauss-Legendre, row-wise for arrays a, b."""
    half = 0.5 * (b - a)
    z = (0.5 * (a + b))[:, None] + half[:, None] * _GL_NODES[None, :]
    return logsumexp(log_f(z) + np.log(_GL_WEIGHTS)[None, :], axis=1) + np.log(half)


@lru_cache(maxsize=256)
def _log_moments_cached(r: float, k_max: int) -> tuple[float, ...]:
    mu = math.sqrt(2.0 * r)
    z0 = mu / 2.0  # L(z0) = 1
    ks = np.arange(2, k_max + 1, 2, dtype=float)
    ks_col = ks[:, None]
    log_norm = -0.5 * math.log(2.0 * math.pi)

    def log_integrand(z: np.ndarray) -> np.ndarray:
        return ks_col * _log_abs_expm1(mu * z - r) - 0.5 * z * z + log_norm

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        # Right of z0 the mode solves z = k mu / (1 - e^{-a}); left of it z = -k mu / (e^{-a} - 1).
        right = _bisect(
            lambda z: z - ks * mu / -np.expm1(-(mu * z - r)),
            np.full_like(ks, z0 + 1e-12),
            z0 + ks * mu + np.sqrt(ks) + 2.0,
        )
        left = _bisect(
            lambda z: z + ks * mu / np.expm1(-(mu * z - r)),
            min(z0, 0.0) - np.sqrt(ks) - 2.0,
            np.full_like(ks, z0 - 1e-12),
        )
        log_right = _log_integral(log_integrand, np.maximum(z0, right - _HALF_WIDTH), right + _HALF_WIDTH)
        log_left = _log_integral(log_integrand, left - _HALF_WIDTH, np.minimum(z0, left + _HALF_WIDTH))
    log_b = np.logaddexp(log_right, log_left)
    # B(2) has the closed form e^{2r} - 1; use it (the quadrature agrees to ~1e-12).
    log_b[0] = _log_expm1(2.0 * r)
    return tuple(float(v) for v in log_b)


def _log_expm1(x: float) -> float:
    """log(e^x - 1) for x > 0 without overflow."""
    return x + math.log(-math.expm1(-x)) if x > 1.0 else math.log(math.expm1(x))


def log_gaussian_central_moments(r: float, k_max: int) -> np.ndarray:
    """log B(k) for k = 0..k_max (NaN at odd k): WBK 2019 Thm. 9 moments for eps(alpha) = alpha*r.

    B(k) = sum_i (-1)^i C(k,i) e^{r i (i-1)} = E[(L-1)^k] with L the Gaussian
    likelihood ratio; B(0) = 1. Only even k are needed by the bound.
    """
    if not (r > 0 and math.isfinite(r)):
        raise ValueError(f"r must be positive and finite. Found {r}.")
    out = np.full(k_max + 1, np.nan)
    out[0] = 0.0
    if k_max >= 2:
        out[2::2] = _log_moments_cached(float(r), int(k_max) - int(k_max) % 2)
    return out


def wbk_subsampled_gaussian_rdp(gamma: float, r: float, orders: np.ndarray) -> np.ndarray:
    """eps'(alpha) of the Gaussian (eps(alpha)=alpha*r) subsampled w/o replacement at rate gamma (WBK Thm. 9).

    Integer orders >= 2 only. Returns +inf where r is infinite (no noise).
    """
    orders = np.asarray(orders, dtype=int)
    if orders.size == 0 or orders.min() < 2:
        raise ValueError("orders must be integers >= 2.")
    if not 0 < gamma <= 1:
        raise ValueError(f"Sampling rate must be in (0, 1]. Found {gamma}.")
    if math.isinf(r):
        return np.full(orders.shape, math.inf)
    a_max = int(orders.max())
    k_max = 2 * math.ceil(a_max / 2)
    log_b = log_gaussian_central_moments(r, k_max)

    j = np.arange(2, a_max + 1)
    log_mix = 0.5 * (log_b[2 * (j // 2)] + log_b[2 * ((j + 1) // 2)])
    # j = 2 term: min{4 (e^{eps(2)} - 1), 2 e^{eps(2)}} with eps(2) = 2r.
    log_mix[0] = min(math.log(4.0) + _log_expm1(2.0 * r), math.log(2.0) + 2.0 * r)
    log_mix[1:] += math.log(4.0)
    alpha = orders[:, None].astype(float)
    jj = j[None, :].astype(float)
    log_comb = gammaln(alpha + 1) - gammaln(jj + 1) - gammaln(np.maximum(alpha - jj, 0) + 1)
    terms = jj * math.log(gamma) + log_comb + log_mix[None, :]
    terms = np.where(jj <= alpha, terms, -np.inf)
    log_a = logsumexp(np.concatenate([np.zeros((len(orders), 1)), terms], axis=1), axis=1)
    return log_a / (orders - 1)
