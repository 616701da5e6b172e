"""DP statistics for teaching (dp-stats): mean, variance and class histogram with Laplace or Gaussian noise.

Adjacency throughout: replace-one (n is public; one record is swapped). Data
are clipped to the public bounds [low, high] first; that clipping is what makes
the sensitivity true.
"""

from __future__ import annotations

import math

import numpy as np

from dpmix_core.mechanisms._checks import (
    check_delta,
    check_epsilon,
    check_features,
    check_labels,
    check_positive_int,
    check_range,
)
from dpmix_core.mechanisms.descriptions import GAUSSIAN_METHODS, GaussianRelease, LaplaceRelease
from dpmix_core.mechanisms.outputs import DPStatistic

__all__ = ["NOISE_MECHANISMS", "dp_mean", "dp_variance", "dp_histogram", "mean_sensitivity", "variance_sensitivity"]

NOISE_MECHANISMS = ("laplace", "gaussian")


def mean_sensitivity(*, n: int, dim: int, width: float = 1.0) -> tuple[float, float]:
    """(L1, L2) replace-one sensitivity of the mean of n vectors in [a, a+w]^dim: (dim w/n, sqrt(dim) w/n)."""
    return dim * width / n, math.sqrt(dim) * width / n


def variance_sensitivity(*, n: int, dim: int, width: float = 1.0) -> tuple[float, float]:
    """(L1, L2) replace-one sensitivity of the population variance (1/n) sum (x - mean)^2 per coordinate: (n-1) w^2 / n^2 each.

    Proof: var = 1/(2n^2) sum_{i,j} (x_i - x_j)^2; swapping x_1 changes only the
    n-1 terms (x_1 - x_j)^2, each in [0, w^2]. Tight (all others at a, x_1 from a to a+w).
    """
    s = (n - 1) * width**2 / n**2
    return dim * s, math.sqrt(dim) * s


def dp_mean(
    X: np.ndarray,
    *,
    epsilon: float,
    delta: float | None = None,
    mechanism: str = "laplace",
    bounds: tuple[float, float] | None = None,
    method: str = "classic",
    clamp: bool = False,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
) -> DPStatistic:
    """DP mean of bounded data (dp-stats): mean + Lap(d w/(n eps)) or N(0, sigma^2) with Delta_2 = sqrt(d) w/n (Dwork & Roth 2014, Ch. 3).

    X: (n,) or (n, d); uint8 is read as pixels/255 in [0,1]; other data need
    ``bounds`` (default (0, 1)) and are clipped to them. ``clamp`` clips the
    noisy mean back to the bounds (post-processing).

    Args:
        X: (n,) values or (n, d) vectors, integers or floats.
        epsilon: the mean's epsilon; positive and finite (< 1 for the classic Gaussian).
        delta: None for "laplace" (pure epsilon-DP); in (0, 1) for "gaussian".
        mechanism: "laplace" (scale = L1 sensitivity / epsilon) or "gaussian" (sigma calibrated by ``method``).
        bounds: public (low, high) bounds of every coordinate, in the units of X; None: [0, 1] (uint8 X:
            pixels/255).
        method: Gaussian calibration: "classic" (epsilon < 1) or "analytic" (any epsilon); unused for Laplace.
        clamp: clip the noisy mean to the bounds (post-processing).
        seed: anything ``numpy.random.default_rng`` accepts.

    Returns:
        :class:`DPStatistic`: ``value`` float64 of shape () for (n,) X or (d,) for (n, d) X (in the bounds'
        units; pixels/255 for uint8 X without bounds), its :class:`LaplaceRelease` or
        :class:`GaussianRelease`, and notes.

    Raises:
        ValueError: X not a finite numeric (n,) or (n, d) array; bad bounds; epsilon not positive and finite;
            delta given for Laplace, missing or outside (0, 1) for Gaussian; an unknown mechanism or method;
            epsilon >= 1 with the classic Gaussian.
    """
    Xs, lo, hi, n, dim, notes = _bounded(X, bounds)
    value = Xs.mean(axis=0)
    l1, l2 = mean_sensitivity(n=n, dim=dim, width=hi - lo)
    what = f"mean of n={n} values in [{lo:g}, {hi:g}]^{dim}"
    out, release = _add_noise(value, l1, l2, what, epsilon, delta, mechanism, method, seed)
    if clamp:
        out = np.asarray(np.clip(out, lo, hi))
        notes.append(f"noisy mean clamped to [{lo:g}, {hi:g}] (post-processing)")
    return DPStatistic(out, release, tuple(notes))


def dp_variance(
    X: np.ndarray,
    *,
    epsilon: float,
    delta: float | None = None,
    mechanism: str = "laplace",
    bounds: tuple[float, float] | None = None,
    method: str = "classic",
    clamp: bool = True,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
) -> DPStatistic:
    """DP population variance per coordinate: var + noise with sensitivity (n-1) w^2/n^2 per coordinate (see ``variance_sensitivity``).

    ``clamp`` (default) clips to the feasible [0, w^2/4] (post-processing).

    Args:
        X: (n,) values or (n, d) vectors, integers or floats.
        epsilon: the variance's epsilon; positive and finite (< 1 for the classic Gaussian).
        delta: None for "laplace" (pure epsilon-DP); in (0, 1) for "gaussian".
        mechanism: "laplace" (scale = L1 sensitivity / epsilon) or "gaussian" (sigma calibrated by ``method``).
        bounds: public (low, high) bounds of every coordinate, width w = high - low, in the units of X; None:
            [0, 1] (uint8 X: pixels/255).
        method: Gaussian calibration: "classic" (epsilon < 1) or "analytic" (any epsilon); unused for Laplace.
        clamp: clip the noisy variance to [0, w^2/4] (post-processing).
        seed: anything ``numpy.random.default_rng`` accepts.

    Returns:
        :class:`DPStatistic`: ``value`` float64 population variance (divided by n), shape () for (n,) X or
        (d,) for (n, d) X, in squared units of the bounds; its release and notes.

    Raises:
        ValueError: as :func:`dp_mean`.
    """
    Xs, lo, hi, n, dim, notes = _bounded(X, bounds)
    value = Xs.var(axis=0)
    w = hi - lo
    l1, l2 = variance_sensitivity(n=n, dim=dim, width=w)
    what = f"population variance of n={n} values in [{lo:g}, {hi:g}]^{dim}"
    out, release = _add_noise(value, l1, l2, what, epsilon, delta, mechanism, method, seed)
    if clamp:
        out = np.asarray(np.clip(out, 0.0, w * w / 4))
        notes.append(f"noisy variance clamped to [0, {w * w / 4:g}] (post-processing)")
    return DPStatistic(out, release, tuple(notes))


def dp_histogram(
    y: np.ndarray,
    *,
    num_classes: int,
    epsilon: float,
    delta: float | None = None,
    mechanism: str = "laplace",
    method: str = "classic",
    postprocess: bool = False,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
) -> DPStatistic:
    """DP class histogram: counts + Lap(2/eps) (L1 sensitivity 2 under replace-one) or Gaussian with Delta_2 = sqrt(2).

    ``postprocess`` clamps at 0 and rounds to integers (post-processing).

    Args:
        y: (n,) integer class labels in 0..K-1 (whole-number floats accepted), n >= 1.
        num_classes: K, the number of bins.
        epsilon: the histogram's epsilon; positive and finite (< 1 for the classic Gaussian).
        delta: None for "laplace" (pure epsilon-DP); in (0, 1) for "gaussian".
        mechanism: "laplace" (scale 2 / epsilon per count) or "gaussian" (sigma for Delta_2 = sqrt(2)).
        method: Gaussian calibration: "classic" (epsilon < 1) or "analytic" (any epsilon); unused for Laplace.
        postprocess: clamp at 0 and round (post-processing).
        seed: anything ``numpy.random.default_rng`` accepts.

    Returns:
        :class:`DPStatistic`: ``value`` float64 (K,) noisy counts (not fractions), its release and notes.

    Raises:
        ValueError: y not a non-empty (n,) array of integer labels in 0..K-1; K < 1; and the epsilon, delta,
            mechanism and method errors of :func:`dp_mean`.
    """
    k = check_positive_int("num_classes (K)", num_classes)
    if not isinstance(y, np.ndarray):
        raise ValueError(f"y must be a numpy array of shape (n,). Found {type(y).__name__}.")
    if y.ndim != 1 or y.shape[0] < 1:
        raise ValueError(f"y must have shape (n,) with n >= 1. Found shape {y.shape}.")
    y = check_labels(y, n=y.shape[0], num_classes=k)
    counts = np.bincount(y, minlength=k).astype(np.float64)
    what = f"class counts of n={len(y)} labels over K={k} classes (replace-one moves one count down and one up)"
    out, release = _add_noise(counts, 2.0, math.sqrt(2.0), what, epsilon, delta, mechanism, method, seed)
    notes = []
    if postprocess:
        out = np.round(np.maximum(out, 0.0))
        notes.append("counts clamped at 0 and rounded (post-processing)")
    return DPStatistic(out, release, tuple(notes))


def _bounded(X: np.ndarray, bounds: tuple[float, float] | None):
    X = check_features(X, allow_1d=True)
    notes = []
    if X.dtype == np.uint8 and bounds is None:
        Xs = X.astype(np.float64) / 255.0
        lo, hi = 0.0, 1.0
        notes.append("uint8 data read as pixels/255 in [0, 1]")
    else:
        lo, hi = check_range("bounds", (0.0, 1.0) if bounds is None else bounds)
        Xs = np.clip(X.astype(np.float64), lo, hi)
        notes.append(f"data clipped to the public bounds [{lo:g}, {hi:g}]")
    dim = 1 if X.ndim == 1 else X.shape[1]
    return Xs, lo, hi, X.shape[0], dim, notes


def _add_noise(value, l1, l2, what, epsilon, delta, mechanism, method, seed):
    epsilon = check_epsilon(epsilon)
    rng = np.random.default_rng(seed)
    value = np.asarray(value, dtype=np.float64)
    if mechanism == "laplace":
        if delta is not None:
            raise ValueError(
                "delta is only used by the Gaussian mechanism; the Laplace mechanism is pure eps-DP. "
                f"Found delta={delta!r}."
            )
        release = LaplaceRelease(epsilon=epsilon, sensitivity=l1, what=what)
        return np.asarray(value + rng.laplace(0.0, release.scale, size=value.shape)), release
    if mechanism == "gaussian":
        if delta is None:
            raise ValueError("the Gaussian mechanism needs delta in (0, 1). Found delta=None.")
        check_delta(delta)
        if method not in GAUSSIAN_METHODS:
            raise ValueError(f"method must be one of {GAUSSIAN_METHODS}. Found {method!r}.")
        release = GaussianRelease.calibrated(epsilon=epsilon, delta=delta, sensitivity=l2, what=what, method=method)
        return np.asarray(value + rng.normal(0.0, release.sigma, size=value.shape)), release
    raise ValueError(f"mechanism must be one of {NOISE_MECHANISMS}. Found {mechanism!r}.")
