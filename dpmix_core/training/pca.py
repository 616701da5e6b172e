"""DP-PCA baseline: Analyze-Gauss projection (Dwork et al. 2014) of the training features, then a linear model.

The projection is the DP part; :func:`fit_projection` runs
:func:`dpmix_core.mechanisms.analyze_gauss_pca` (analytic Gaussian
calibration, valid for every epsilon) on the training rows and maps any
records onto the top-k noisy eigenvectors, with the same preprocessing
(rows clipped to ||x|| <= 1). ``epsilon = inf`` is exact, non-private PCA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpmix_core.mechanisms import analyze_gauss_pca
from dpmix_core.mechanisms.pca import clip_rows_to_unit_ball

__all__ = ["Projection", "fit_projection"]


@dataclass(frozen=True)
class Projection:
    components: np.ndarray  # (k, d), orthonormal rows
    epsilon: float
    delta: float | None
    notes: tuple[str, ...]

    def transform(self, x: np.ndarray) -> np.ndarray:
        """float32 (n, k): rows clipped to the unit ball, then projected."""
        if x.shape[0] == 0:
            return np.zeros((0, self.components.shape[0]), dtype=np.float32)
        return (clip_rows_to_unit_ball(x.reshape(x.shape[0], -1)) @ self.components.T).astype(np.float32)


def fit_projection(x: np.ndarray, *, num_components: int, epsilon: float, delta: float, seed: int) -> Projection:
    """Top-k Analyze-Gauss components of float features x (n, d) (pixels in [0,1], or scattering features).

    Args:
        x: (n, ...) float training features, flattened to (n, d): pixels in [0,1] or scattering features.
            Rows are clipped to ||x|| <= 1 before the second-moment matrix.
        num_components: k, the projection's dimension, 1 <= k <= d.
        epsilon: the projection's epsilon (positive; ``math.inf`` gives exact, non-private PCA).
        delta: the projection's delta, in (0, 1) (unused when epsilon is inf).
        seed: seeds the Gaussian noise.

    Returns:
        A :class:`Projection`: ``components`` (k, d) orthonormal rows, ``epsilon``, ``delta`` (None when
        epsilon is inf) and notes; ``transform`` maps records to float32 (n, k).

    Raises:
        ValueError: k above d, or, for finite epsilon, the errors of
            :func:`~dpmix_core.mechanisms.analyze_gauss_pca` (k < 1, epsilon not positive, delta outside (0, 1)).
    """
    x = x.reshape(x.shape[0], -1)
    if num_components > x.shape[1]:
        raise ValueError(f"pca_components must not exceed the feature dimension {x.shape[1]}. Found {num_components}.")
    if math.isinf(epsilon):
        xc = clip_rows_to_unit_ball(x)
        vals, vecs = np.linalg.eigh(xc.T @ xc / x.shape[0])
        top = np.argsort(vals)[::-1][:num_components]
        return Projection(
            vecs[:, top].T.copy(),
            math.inf,
            None,
            (f"exact PCA (epsilon = inf, no noise): top-{num_components} eigenvectors",),
        )
    res = analyze_gauss_pca(
        x, num_components=num_components, epsilon=epsilon, delta=delta, method="analytic", seed=seed
    )
    notes = (f"Analyze-Gauss DP-PCA: {res.release.describe()}",) + res.notes
    return Projection(res.components, float(epsilon), float(delta), notes)
