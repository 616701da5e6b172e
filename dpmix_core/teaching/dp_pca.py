"""Lesson 3: Analyze-Gauss DP-PCA components next to the exact ones (dp-stats poster)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dpmix_core.mechanisms import (
    GaussianRelease,
    analyze_gauss_pca,
)
from dpmix_core.mechanisms.pca import clip_rows_to_unit_ball
from dpmix_core.privacy.checks import check_delta, check_epsilon, check_positive_int

try:  # a dependency of scikit-learn; optional here
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None
from dpmix_core.teaching.common import (
    _check_images,
    _check_seed,
    _image_shape,
    _layout,
    _one_blas_thread,
    _streams,
)
from dpmix_core.teaching.laplace_vs_gaussian import gaussian_method_for, guarantee_text

__all__ = [
    "PCAComparison",
    "subsample_indices",
    "pca_preprocess",
    "nonprivate_pca",
    "orient_components",
    "pca_comparison",
    "pca_grid_figure",
    "image_mosaic",
]


def subsample_indices(n: int, max_samples: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of a uniform subsample of min(n, max_samples) records (all of them when n <= max_samples)."""
    n = check_positive_int("n", n)
    m = check_positive_int("max_samples", max_samples)
    if n <= m:
        return np.arange(n)
    return np.sort(np.random.default_rng(_check_seed(seed)).choice(n, size=m, replace=False))


def pca_preprocess(x: np.ndarray) -> np.ndarray:
    """What Analyze-Gauss sees: rows flattened, uint8 read as pixels/255, each row clipped to ||x|| <= 1 (float64)."""
    x = _check_images(x)
    rows = x.reshape(len(x), -1)
    rows = rows.astype(np.float64) / 255.0 if rows.dtype == np.uint8 else rows.astype(np.float64)
    return clip_rows_to_unit_ball(rows)


def nonprivate_pca(x: np.ndarray, num_components: int) -> tuple[np.ndarray, np.ndarray]:
    """(components (k, d), eigenvalues (k,)): top eigenvectors of X^T X / n after :func:`pca_preprocess`, no noise.

    The same (uncentred, row-clipped) second-moment matrix Analyze-Gauss perturbs,
    so the rows of the DP grid are comparable with this one.
    """
    Xf = pca_preprocess(x)
    k = check_positive_int("num_components (k)", num_components)
    if k > Xf.shape[1]:
        raise ValueError(f"num_components (k) must not exceed the dimension d={Xf.shape[1]}. Found k={k}.")
    with _one_blas_thread():
        return _top_eigen(Xf.T @ Xf / len(Xf), k)


def _top_eigen(A: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    values, vectors = np.linalg.eigh(A)
    top = np.argsort(values)[::-1][:k]
    return vectors[:, top].T.copy(), values[top].copy()


def orient_components(components: np.ndarray) -> np.ndarray:
    """Fix each row's arbitrary sign so that its entry of largest magnitude is positive (post-processing)."""
    C = np.asarray(components, dtype=np.float64)
    idx = np.argmax(np.abs(C), axis=1)
    signs = np.sign(C[np.arange(len(C)), idx])
    signs[signs == 0] = 1.0
    return C * signs[:, None]


@dataclass(frozen=True)
class PCAComparison:
    """Top-k components per row: non-private first, then Analyze-Gauss at each epsilon (rows of the poster's grid)."""

    epsilons: tuple[float | None, ...]  # None = non-private
    components: np.ndarray  # (rows, k, d), each row's components orthonormal, signs oriented
    releases: tuple[GaussianRelease | None, ...]
    captured: tuple[float, ...]  # variance captured / non-private top-k variance (1.0 for the non-private row)
    n_used: int
    n_total: int
    image_shape: tuple[int, ...]
    delta: float
    exact_eigenvalues: np.ndarray  # (k,) top eigenvalues of the exact X^T X / n

    def images(self) -> np.ndarray:
        """(rows, k, *image_shape)."""
        return self.components.reshape(*self.components.shape[:2], *self.image_shape)

    def noise_spectral_norm(self, row: int) -> float:
        """Typical spectral norm 2 sigma sqrt(d) of this row's symmetric Gaussian noise matrix (Wigner; 0 if exact)."""
        rel = self.releases[row]
        return 0.0 if rel is None else 2.0 * rel.sigma * math.sqrt(self.components.shape[2])

    def row_labels(self) -> list[str]:
        return ["non-private" if rel is None else f"ε = {rel.epsilon:g} ({rel.method})" for rel in self.releases]

    def table(self) -> pd.DataFrame:
        """One line per row: ε, δ, calibration, sensitivity, σ and the share of the non-private variance captured."""
        out = []
        for label, rel, cap in zip(self.row_labels(), self.releases, self.captured):
            out.append(
                {
                    "row": label,
                    "ε": "∞" if rel is None else f"{rel.epsilon:g}",
                    "δ": "—" if rel is None else f"{rel.delta:.0e}",
                    "guarantee (by construction)": "none (exact PCA)" if rel is None else guarantee_text(rel),
                    "L2 sensitivity √2/n": "—" if rel is None else f"{rel.sensitivity:.3g}",
                    "noise σ per matrix entry": "0" if rel is None else f"{rel.sigma:.3g}",
                    "variance captured vs exact top-k": f"{100 * cap:.1f} %",
                }
            )
        return pd.DataFrame(out)


def pca_comparison(
    x: np.ndarray,
    *,
    epsilons: Sequence[float] = (10.0, 2.0, 0.1),
    num_components: int = 10,
    delta: float = 1e-5,
    max_samples: int = 5000,
    calibration: str = "auto",
    seed: int | None = None,
    subsample_seed: int = 0,
) -> PCAComparison:
    """Analyze-Gauss DP-PCA (Dwork et al. 2014) at each epsilon next to exact PCA of the same matrix.

    At most ``max_samples`` images are used (a fixed uniform subsample drawn with
    ``subsample_seed``, so a new ``seed`` changes only the noise). The guarantee
    is for that subsample, n_used public; no amplification by subsampling is claimed.
    """
    x = _check_images(x)
    eps_list = [check_epsilon(e) for e in epsilons]
    if not eps_list:
        raise ValueError("epsilons must hold at least one value.")
    delta = check_delta(delta)
    methods = [gaussian_method_for(e, calibration) for e in eps_list]
    k = check_positive_int("num_components (k)", num_components)
    idx = subsample_indices(len(x), max_samples, subsample_seed)
    Xf = pca_preprocess(np.ascontiguousarray(x[idx]))
    if k > Xf.shape[1]:
        raise ValueError(f"num_components (k) must not exceed the dimension d={Xf.shape[1]}. Found k={k}.")
    with _one_blas_thread():
        A = Xf.T @ Xf / len(Xf)
        exact, exact_values = _top_eigen(A, k)
        total = float(exact_values.sum())
        releases: list[GaussianRelease | None] = [None]
        comps, captured = [orient_components(exact)], [1.0]
        for eps, method, rng in zip(eps_list, methods, _streams(seed, len(eps_list))):
            res = analyze_gauss_pca(Xf, num_components=k, epsilon=eps, delta=delta, method=method, seed=rng)
            comps.append(orient_components(res.components))
            releases.append(res.release)
            cap = float(np.trace(res.components @ A @ res.components.T)) / total if total > 0 else float("nan")
            captured.append(cap)
    return PCAComparison(
        (None, *eps_list),
        np.stack(comps),
        tuple(releases),
        tuple(captured),
        len(idx),
        len(x),
        _image_shape(x),
        delta,
        exact_values,
    )


def image_mosaic(images: np.ndarray, *, gap: int = 3) -> np.ndarray:
    """Tile (rows, cols, H, W) images into one (rows·(H+gap)−gap, cols·(W+gap)−gap) array, NaN in the gaps.

    Each tile is divided by its own largest |value|, so every image spans [−1, 1]
    (eigenvectors have no common scale). One array = one heatmap trace, which the
    browser draws far faster than one subplot per image.
    """
    imgs = np.asarray(images, dtype=np.float64)
    if imgs.ndim != 4:
        raise ValueError(f"images must have shape (rows, cols, H, W). Found {imgs.shape}.")
    rows, cols, h, w = imgs.shape
    scale = np.max(np.abs(imgs), axis=(2, 3), keepdims=True)
    imgs = imgs / np.where(scale > 0, scale, 1.0)
    out = np.full((rows * (h + gap) - gap, cols * (w + gap) - gap), np.nan)
    for r in range(rows):
        for c in range(cols):
            out[r * (h + gap) : r * (h + gap) + h, c * (w + gap) : c * (w + gap) + w] = imgs[r, c]
    return out


def pca_grid_figure(pca: PCAComparison) -> go.Figure:
    """Grid of component images: rows = non-private and each ε, columns = PC 1..k (each image on its own ± scale)."""
    if len(pca.image_shape) != 2:
        raise ValueError(f"pca_grid_figure needs 2-D images. Found image shape {pca.image_shape}.")
    imgs = pca.images()
    rows, k, h, w = imgs.shape
    gap = 3
    fig = go.Figure(
        go.Heatmap(
            z=image_mosaic(imgs, gap=gap).astype(np.float32),  # float32: half the payload, same picture
            zmin=-1.0,
            zmax=1.0,
            colorscale="gray",
            showscale=False,
            hoverongaps=False,
            hovertemplate="%{z:.2f} (scaled)<extra></extra>",
        )
    )
    fig.update_xaxes(
        tickvals=[c * (w + gap) + (w - 1) / 2 for c in range(k)],
        ticktext=[f"PC {c + 1}" for c in range(k)],
        side="top",
        tickfont={"size": 14},
        showgrid=False,
        zeroline=False,
        ticks="",
        constrain="domain",
    )
    fig.update_yaxes(
        tickvals=[r * (h + gap) + (h - 1) / 2 for r in range(rows)],
        ticktext=[label.replace(" (", "<br>(") for label in pca.row_labels()],
        autorange="reversed",
        scaleanchor="x",
        tickfont={"size": 14},
        showgrid=False,
        zeroline=False,
        ticks="",
        constrain="domain",
        constraintoward="top",  # narrow containers: keep the grid under its title
    )
    fig.update_layout(plot_bgcolor="white")
    title = f"Top-{k} principal components: exact vs Analyze-Gauss (δ = {pca.delta:.0e}, n = {pca.n_used:,})"
    return _layout(fig, title, 90 + 100 * rows, top=80)  # about square cells at the page's width
