"""Analyze-Gauss DP-PCA (Dwork, Talwar, Thakurta, Zhang 2014, Alg. 1), as in the dp-stats poster.

Convention used here (n public, replace-one adjacency):

* each row is clipped to ||x|| <= 1 (x <- x / max(1, ||x||));
* A = X^T X / n (d x d);
* swapping x for x' changes A by E = (x x^T - x' x'^T) / n with
  ||x x^T - x' x'^T||_F^2 = ||x||^4 + ||x'||^4 - 2 (x.x')^2 <= 2, so the
  Frobenius sensitivity is sqrt(2)/n (tight at x = e_1, x' = e_2). The
  triangle inequality gives 2/n, valid but loose. What is released is the upper
  triangle with the diagonal, whose L2 change is sqrt((||E||_F^2 + sum_i E_ii^2)/2)
  <= ||E||_F, so Delta_2 = sqrt(2)/n;
* noise: a symmetric matrix with i.i.d. N(0, sigma^2) upper triangle (diagonal
  included), mirrored, sigma = Delta_2 sqrt(2 ln(1.25/delta)) / eps (classic,
  eps < 1) or the analytic Gaussian sigma (Balle & Wang 2018).

DTTZ state it for A = X^T X under add/remove-one, where Delta = 1 (||x x^T||_F = ||x||^2 <= 1).
"""

from __future__ import annotations

import math

import numpy as np

from dpmix_core.mechanisms._checks import (
    FeatureRange,
    check_delta,
    check_epsilon,
    check_features,
    check_positive_int,
    describe_feature_range,
    feature_range_vectors,
)
from dpmix_core.mechanisms.descriptions import GAUSSIAN_METHODS, GaussianRelease
from dpmix_core.mechanisms.outputs import DPPCAResult

__all__ = ["analyze_gauss_pca", "pca_sensitivity", "symmetric_gaussian_noise", "clip_rows_to_unit_ball"]


def pca_sensitivity(*, n: int) -> float:
    """L2 sensitivity sqrt(2)/n of the upper triangle of X^T X / n, rows in the unit ball, replace-one (see module doc)."""
    return math.sqrt(2.0) / check_positive_int("n", n)


def clip_rows_to_unit_ball(X: np.ndarray) -> np.ndarray:
    """x <- x / max(1, ||x||) row by row (float64 copy)."""
    Xf = np.asarray(X, dtype=np.float64).copy()
    norms = np.linalg.norm(Xf, axis=1)
    Xf /= np.maximum(norms, 1.0)[:, None]
    return Xf


def symmetric_gaussian_noise(*, dim: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Symmetric (dim x dim) noise: upper triangle incl. diagonal i.i.d. N(0, sigma^2), mirrored below (DTTZ 2014, Alg. 1)."""
    dim = check_positive_int("dim", dim)
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma must be a finite number >= 0. Found {sigma!r}.")
    iu = np.triu_indices(dim)
    E = np.zeros((dim, dim))
    E[iu] = rng.normal(0.0, sigma, size=len(iu[0]))
    return np.triu(E) + np.triu(E, 1).T


def analyze_gauss_pca(
    X: np.ndarray,
    *,
    num_components: int,
    epsilon: float,
    delta: float,
    method: str = "classic",
    feature_range: FeatureRange | None = None,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
) -> DPPCAResult:
    """Analyze-Gauss (Dwork et al. 2014, Alg. 1): top-k eigenvectors of X^T X / n + E, E symmetric Gaussian with Delta_2 = sqrt(2)/n.

    uint8 X is read as pixels/255; ``feature_range`` min-max scales other data
    with public bounds first (optional: the row clipping alone bounds the norm).

    Args:
        X: (n, d) features, integers or floats; every row is clipped to ||x|| <= 1 before A = X^T X / n.
        num_components: k, the number of eigenvectors returned, 1 <= k <= d.
        epsilon: the release's epsilon; positive and finite, and < 1 for ``method="classic"``.
        delta: the release's delta, in (0, 1).
        method: how sigma is calibrated: "classic" (Dwork & Roth Thm. A.1, epsilon < 1) or "analytic"
            (Balle & Wang 2018, any epsilon).
        feature_range: public (low, high) bounds of X, or one pair per feature, for min-max scaling to [0,1]; None:
            uint8 X is divided
            by 255, other X is used as given.
        seed: anything ``numpy.random.default_rng`` accepts.

    Returns:
        :class:`DPPCAResult`: ``components`` (k, d) orthonormal rows, largest noisy eigenvalue first;
        ``eigenvalues`` (k,); ``noisy_second_moment`` (d, d) symmetric; the :class:`GaussianRelease`
        (Delta_2 = sqrt(2)/n, replace-one) and notes.

    Raises:
        ValueError: X not a finite (n, d) numeric array; k < 1 or k > d; epsilon not positive and finite (or
            >= 1 with "classic"); delta outside (0, 1); an unknown method; a bad ``feature_range``.
    """
    X = check_features(X)
    n, d = X.shape
    k = check_positive_int("num_components (k)", num_components)
    if k > d:
        raise ValueError(f"num_components (k) must not exceed the dimension d={d}. Found k={k}.")
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if method not in GAUSSIAN_METHODS:
        raise ValueError(f"method must be one of {GAUSSIAN_METHODS}. Found {method!r}.")
    notes = []
    if feature_range is not None:
        lo, hi = feature_range_vectors(feature_range, d)
        Xf = (np.clip(X.astype(np.float64), lo, hi) - lo) / (hi - lo)
        notes.append(f"features min-max scaled with the public bounds {describe_feature_range(feature_range)}")
    elif X.dtype == np.uint8:
        Xf = X.astype(np.float64) / 255.0
        notes.append("uint8 features read as pixels/255")
    else:
        Xf = X
    Xf = clip_rows_to_unit_ball(Xf)
    notes.append("each row clipped to ||x|| <= 1")
    A = Xf.T @ Xf / n
    release = GaussianRelease.calibrated(
        epsilon=epsilon,
        delta=delta,
        sensitivity=pca_sensitivity(n=n),
        what=f"upper triangle of X^T X / n (d={d}, n={n}, rows ||x|| <= 1, replace-one)",
        method=method,
    )
    rng = np.random.default_rng(seed)
    noisy = A + symmetric_gaussian_noise(dim=d, sigma=release.sigma, rng=rng)
    eigenvalues, vectors = np.linalg.eigh(noisy)
    top = np.argsort(eigenvalues)[::-1][:k]
    components = vectors[:, top].T.copy()
    notes.append(f"top-{k} eigenvectors of the noisy matrix (post-processing)")
    return DPPCAResult(components, eigenvalues[top].copy(), noisy, release, tuple(notes))
