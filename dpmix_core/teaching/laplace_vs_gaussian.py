"""Lesson 2: Laplace vs Gaussian on a DP mean image and a DP class histogram."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpmix_core.mechanisms import (
    GaussianRelease,
    LaplaceRelease,
    dp_histogram,
    dp_mean,
)
from dpmix_core.mechanisms.outputs import DPStatistic
from dpmix_core.privacy.checks import check_delta, check_epsilon, check_positive_int

try:  # a dependency of scikit-learn; optional here
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None
from dpmix_core.teaching.common import (
    _COLORS,
    GAUSSIAN_CALIBRATIONS,
    REPLACE_ONE,
    Release,
    _check_images,
    _check_labels_1d,
    _gray_heatmap,
    _image_axes,
    _image_shape,
    _layout,
    _streams,
)

__all__ = [
    "MeanImageComparison",
    "HistogramComparison",
    "ReleaseRow",
    "gaussian_method_for",
    "noise_std",
    "guarantee_text",
    "release_table",
    "dp_mean_images",
    "dp_histograms",
    "mean_images_figure",
    "histogram_figure",
]


def gaussian_method_for(epsilon: float, calibration: str = "auto") -> str:
    """Which Gaussian analysis certifies sigma: "auto" = classic for eps < 1, analytic (Balle & Wang 2018) from 1 on."""
    epsilon = check_epsilon(epsilon)
    if calibration not in GAUSSIAN_CALIBRATIONS:
        raise ValueError(f"calibration must be one of {GAUSSIAN_CALIBRATIONS}. Found {calibration!r}.")
    if calibration == "auto":
        return "classic" if epsilon < 1 else "analytic"
    if calibration == "classic" and epsilon >= 1:
        raise ValueError(
            f"The classic Gaussian calibration (Dwork & Roth Thm. A.1) holds only for ε < 1; found ε = {epsilon:g}. "
            "Use the analytic calibration (Balle & Wang 2018), which is exact for every ε."
        )
    return calibration


def noise_std(release: Release) -> float:
    """Standard deviation of the noise per coordinate: sqrt(2) b for Laplace, sigma for Gaussian."""
    if isinstance(release, GaussianRelease):
        return float(release.sigma)
    return math.sqrt(2.0) * float(release.scale)


def guarantee_text(release: Release) -> str:
    """ "pure ε-DP (δ = 0)" for Laplace, "(ε, δ)-DP" with the calibration for Gaussian."""
    if isinstance(release, GaussianRelease):
        return f"({release.epsilon:g}, {release.delta:.0e})-DP, {release.method} calibration"
    return f"pure {release.epsilon:g}-DP (δ = 0)"


@dataclass(frozen=True)
class ReleaseRow:
    """One released statistic with the adjacency and sensitivity formula it was calibrated for."""

    statistic: str
    release: Release
    adjacency: str
    sensitivity_formula: str = ""


def release_table(rows: Sequence[ReleaseRow]) -> pd.DataFrame:
    """One line per release: mechanism, ε, δ, guarantee, sensitivity, noise, adjacency, description."""
    out = []
    for row in rows:
        rel = row.release
        gaussian = isinstance(rel, GaussianRelease)
        norm = "L2 Δ₂" if gaussian else "L1 Δ₁"
        formula = f" = {row.sensitivity_formula}" if row.sensitivity_formula else ""
        out.append(
            {
                "statistic": row.statistic,
                "mechanism": "Gaussian" if gaussian else "Laplace",
                "ε": rel.epsilon,
                "δ": f"{rel.delta:.0e}" if gaussian else "0",
                "guarantee (by construction)": guarantee_text(rel),
                "sensitivity": f"{norm}{formula} = {rel.sensitivity:.4g}",
                "noise": f"σ = {rel.sigma:.4g}" if isinstance(rel, GaussianRelease) else f"b = Δ₁/ε = {rel.scale:.4g}",
                "noise std per coordinate": noise_std(rel),
                "adjacency": row.adjacency,
                "description": rel.describe(),
            }
        )
    return pd.DataFrame(out)


@dataclass(frozen=True)
class MeanImageComparison:
    """True mean image of one class next to its Laplace and Gaussian DP versions (noisy pixels clamped to [0, 1])."""

    label: int
    n: int  # images of this class (treated as public)
    image_shape: tuple[int, ...]
    true: np.ndarray  # flat (d,), in [0, 1]
    laplace: DPStatistic
    gaussian: DPStatistic

    def image(self, which: str) -> np.ndarray:
        """ "true", "laplace" or "gaussian", reshaped to the image shape."""
        values = {"true": self.true, "laplace": self.laplace.value, "gaussian": self.gaussian.value}
        if which not in values:
            raise ValueError(f"which must be one of {tuple(values)}. Found {which!r}.")
        return np.asarray(values[which]).reshape(self.image_shape)

    @property
    def dim(self) -> int:
        """Numbers released: pixels per image."""
        return int(np.prod(self.image_shape))

    @property
    def laplace_rmse(self) -> float:
        """Root-mean-square error per pixel of the released Laplace image."""
        return float(np.sqrt(np.mean((self.laplace.value - self.true) ** 2)))

    @property
    def gaussian_rmse(self) -> float:
        """Root-mean-square error per pixel of the released Gaussian image."""
        return float(np.sqrt(np.mean((self.gaussian.value - self.true) ** 2)))

    def rows(self) -> list[ReleaseRow]:
        d = self.dim
        what = f"mean image (class {self.label})"
        adj = f"replace-one in class {self.label} (n = {self.n} public)"
        return [
            ReleaseRow(what, self.laplace.release, adj, f"d·w/n = {d}·1/{self.n}"),
            ReleaseRow(what, self.gaussian.release, adj, f"√d·w/n = √{d}·1/{self.n}"),
        ]


def dp_mean_images(
    x: np.ndarray,
    y: np.ndarray,
    *,
    label: int,
    epsilon: float,
    delta: float,
    calibration: str = "auto",
    num_classes: int = 10,
    seed: int | None = None,
) -> MeanImageComparison:
    """DP mean image of class ``label`` by Laplace (pure eps-DP) and by Gaussian ((eps, delta)-DP), same eps.

    x: uint8 images (n, H, W) or (n, d) (pixels/255) or floats in [0, 1]; y: int labels.
    Sensitivities (replace-one, pixels in [0, 1]): L1 d/n_c, L2 sqrt(d)/n_c.
    """
    x = _check_images(x, y)
    k = check_positive_int("num_classes (K)", num_classes)
    y = _check_labels_1d(y, k)
    if isinstance(label, bool) or not isinstance(label, numbers.Integral) or not 0 <= label < k:
        raise ValueError(f"Unknown class {label!r}: choose a class in 0..{k - 1}.")
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    method = gaussian_method_for(epsilon, calibration)
    mask = y == label
    if not mask.any():
        raise ValueError(f"Unknown class {label!r}: no image has this label.")
    rows = x[mask].reshape(int(mask.sum()), -1)
    bounds = None if rows.dtype == np.uint8 else (0.0, 1.0)
    true = rows.astype(np.float64).mean(axis=0) / 255.0 if bounds is None else np.clip(rows, 0, 1).mean(axis=0)
    lap_rng, gau_rng = _streams(seed, 2)
    lap = dp_mean(rows, epsilon=epsilon, mechanism="laplace", bounds=bounds, clamp=True, seed=lap_rng)
    gau = dp_mean(
        rows, epsilon=epsilon, delta=delta, mechanism="gaussian", method=method, bounds=bounds, clamp=True, seed=gau_rng
    )
    return MeanImageComparison(int(label), len(rows), _image_shape(x), true, lap, gau)


@dataclass(frozen=True)
class HistogramComparison:
    """True class counts next to their Laplace and Gaussian DP versions."""

    true: np.ndarray  # (K,) int
    laplace: DPStatistic
    gaussian: DPStatistic

    def frame(self, label_names: Sequence[str] | None = None) -> pd.DataFrame:
        """Long table: class, release ("true", "Laplace", "Gaussian"), count."""
        k = len(self.true)
        names = list(label_names) if label_names is not None else [str(i) for i in range(k)]
        if len(names) != k:
            raise ValueError(f"label_names must name {k} classes. Found {len(names)}.")
        parts = {"true": self.true.astype(np.float64), "Laplace": self.laplace.value, "Gaussian": self.gaussian.value}
        return pd.DataFrame(
            [{"class": names[i], "release": r, "count": float(v[i])} for r, v in parts.items() for i in range(k)]
        )

    def rows(self) -> list[ReleaseRow]:
        return [
            ReleaseRow("class histogram", self.laplace.release, REPLACE_ONE, "|−1| + |+1|"),
            ReleaseRow("class histogram", self.gaussian.release, REPLACE_ONE, "√((−1)² + 1²)"),
        ]


def dp_histograms(
    y: np.ndarray,
    *,
    num_classes: int,
    epsilon: float,
    delta: float,
    calibration: str = "auto",
    seed: int | None = None,
) -> HistogramComparison:
    """DP class histogram by Laplace (L1 sensitivity 2) and Gaussian (L2 sensitivity sqrt 2), replace-one, same eps."""
    k = check_positive_int("num_classes (K)", num_classes)
    y = _check_labels_1d(y, k)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    method = gaussian_method_for(epsilon, calibration)
    lap_rng, gau_rng = _streams(seed, 2)
    lap = dp_histogram(y, num_classes=k, epsilon=epsilon, mechanism="laplace", seed=lap_rng)
    gau = dp_histogram(
        y, num_classes=k, epsilon=epsilon, delta=delta, mechanism="gaussian", method=method, seed=gau_rng
    )
    return HistogramComparison(np.bincount(y, minlength=k), lap, gau)


def mean_images_figure(cmp: MeanImageComparison, *, label_name: str | None = None) -> go.Figure:
    """Three grayscale images: true mean, Laplace DP mean, Gaussian DP mean (pixel intensity 0–1)."""
    if len(cmp.image_shape) != 2:
        raise ValueError(f"mean_images_figure needs 2-D images. Found image shape {cmp.image_shape}.")
    lap, gau = cast(LaplaceRelease, cmp.laplace.release), cast(GaussianRelease, cmp.gaussian.release)
    titles = [
        f"True mean (n = {cmp.n:,})",
        f"Laplace, ε = {lap.epsilon:g}<br>RMSE {cmp.laplace_rmse:.3f}",
        f"Gaussian ({gau.method}), ε = {gau.epsilon:g}, δ = {gau.delta:.0e}<br>RMSE {cmp.gaussian_rmse:.3f}",
    ]
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles, horizontal_spacing=0.04)
    for col, which in enumerate(("true", "laplace", "gaussian"), start=1):
        fig.add_trace(
            _gray_heatmap(
                cmp.image(which),
                zmin=0.0,
                zmax=1.0,
                showscale=col == 3,
                colorbar={"title": {"text": "pixel<br>intensity"}, "len": 0.9},
            ),
            row=1,
            col=col,
        )
    _image_axes(fig, 1, 3)
    name = label_name if label_name is not None else str(cmp.label)
    fig.update_annotations(font={"size": 15})
    return _layout(fig, f"Mean image of digit {name}: exact vs DP (noisy pixels clamped to [0, 1])", 470, top=110)


def histogram_figure(cmp: HistogramComparison, *, label_names: Sequence[str] | None = None) -> go.Figure:
    """Top: grouped bars of true, Laplace and Gaussian counts per class. Bottom: the noise each added (DP − true)."""
    frame = cmp.frame(label_names)
    lap, gau = cast(LaplaceRelease, cmp.laplace.release), cast(GaussianRelease, cmp.gaussian.release)
    names = {
        "true": "true counts",
        "Laplace": f"Laplace (ε = {lap.epsilon:g}, b = {lap.scale:.3g})",
        "Gaussian": f"Gaussian (ε = {gau.epsilon:g}, δ = {gau.delta:.0e}, σ = {gau.sigma:.3g})",
    }
    colors = {"true": _COLORS["true"], "Laplace": _COLORS["Laplace"], "Gaussian": _COLORS["Gaussian"]}
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.6, 0.4],
        vertical_spacing=0.1,
        subplot_titles=["counts", "noise added (DP count − true count)"],
    )
    true = frame[frame["release"] == "true"]["count"].to_numpy()
    for rel, part in frame.groupby("release", sort=False):
        fig.add_trace(
            go.Bar(
                x=part["class"],
                y=part["count"],
                name=names[rel],
                marker_color=colors[rel],
                legendgroup=rel,
                hovertemplate="class %{x}: %{y:.1f}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        if rel != "true":
            fig.add_trace(
                go.Bar(
                    x=part["class"],
                    y=part["count"].to_numpy() - true,
                    name=names[rel],
                    marker_color=colors[rel],
                    legendgroup=rel,
                    showlegend=False,
                    hovertemplate="class %{x}: %{y:+.2f}<extra></extra>",
                ),
                row=2,
                col=1,
            )
    fig.update_layout(barmode="group")
    fig.update_xaxes(type="category")
    fig.update_xaxes(title="class (digit)", row=2, col=1)
    fig.update_yaxes(title="images", row=1, col=1)
    fig.update_yaxes(title="noise", zeroline=True, zerolinecolor="#888", row=2, col=1)
    fig.update_annotations(font={"size": 15})
    fig = _layout(fig, f"Class histogram of {int(cmp.true.sum()):,} labels: exact vs DP", 600, top=70)
    fig.update_layout(legend={"y": -0.14})
    return fig
