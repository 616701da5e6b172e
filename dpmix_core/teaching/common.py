"""Shared by the lessons: conventions, input checks, seeded random streams and figure helpers."""

from __future__ import annotations

import math
import numbers
from contextlib import contextmanager

import numpy as np
import plotly.graph_objects as go

from dpmix_core.mechanisms import (
    GaussianRelease,
    LaplaceLabelRelease,
    LaplaceRelease,
)

try:  # a dependency of scikit-learn; optional here
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None


Release = LaplaceRelease | GaussianRelease | LaplaceLabelRelease


LABEL_ENCODINGS = ("one-hot", "regression")


_TASKS = {"one-hot": "classification", "regression": "regression"}


GAUSSIAN_CALIBRATIONS = ("auto", "classic", "analytic")


REPLACE_ONE = "replace-one (n public)"


REPLACE_ONE_LONG = (
    "replace-one: n is public and neighbouring datasets differ by swapping one person's record for another"
)


LABEL_ADJACENCY = "one person's label changes (n and features public)"


_FONT = {"size": 15}


_COLORS = {
    "true": "#444444",
    "one-hot": "#1f77b4",
    "regression": "#d62728",
    "Laplace": "#ff7f0e",
    "Gaussian": "#2ca02c",
}


def _check_seed(seed: object) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0 or None. Found {seed!r}.")
    return int(seed)


def _streams(seed: int | None, count: int) -> list[np.random.Generator]:
    """``count`` independent generators spawned from one seed (None: fresh entropy)."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(_check_seed(seed)).spawn(count)]


def _check_encoding(encoding: str) -> str:
    if encoding not in LABEL_ENCODINGS:
        raise ValueError(f"encoding must be one of {LABEL_ENCODINGS}. Found {encoding!r}.")
    return encoding


def _check_labels_1d(y: object, num_classes: int) -> np.ndarray:
    if not isinstance(y, np.ndarray) or y.ndim != 1 or y.shape[0] < 1:
        raise ValueError(f"y must be a numpy array of shape (n,) with n >= 1. Found {getattr(y, 'shape', type(y))}.")
    if y.dtype.kind not in "iu":
        raise ValueError(f"y must hold integer class labels. Found dtype {y.dtype}.")
    if y.min() < 0 or y.max() >= num_classes:
        raise ValueError(f"y must lie in 0..{num_classes - 1}. Found {y.min()}..{y.max()}.")
    return y


def _check_images(x: object, y: np.ndarray | None = None) -> np.ndarray:
    if not isinstance(x, np.ndarray) or x.ndim < 2 or x.shape[0] < 1:
        raise ValueError(f"x must be a numpy array of images (n, H, W) or rows (n, d). Found {getattr(x, 'shape', x)}.")
    if y is not None and len(y) != len(x):
        raise ValueError(f"x and y must have the same length. Found {len(x)} and {len(y)}.")
    return x


def _image_shape(x: np.ndarray) -> tuple[int, ...]:
    return tuple(x.shape[1:]) if x.ndim >= 3 else (x.shape[1],)


@contextmanager
def _one_blas_thread():
    """Run BLAS/LAPACK on one thread (the PCA's eigh on 784 x 784 matrices).

    OpenBLAS's worker threads busy-wait: on a small shared machine (2 cores, a
    browser or a second session competing) a two-thread eigh that takes 0.05 s
    alone can take 1-6 s, while one thread stays at ~0.07 s. The limit is
    process-wide while it lasts and changes no result beyond rounding.
    """
    if threadpool_limits is None:  # pragma: no cover
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _layout(fig: go.Figure, title: str, height: int, *, top: int = 60) -> go.Figure:
    fig.update_layout(
        title={"text": title, "font": {"size": 18}, "x": 0.0, "xanchor": "left"},
        font=_FONT,
        height=height,
        margin={"l": 10, "r": 10, "t": top, "b": 10},
        legend={"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0.0},
    )
    return fig


def _log_ticks(values) -> list[float]:
    """Powers of ten spanning ``values`` (clean log-axis ticks: 0.1, 1, 10, …)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[v > 0]
    lo, hi = math.floor(math.log10(v.min())), math.ceil(math.log10(v.max()))
    return [10.0**e for e in range(lo, hi + 1)]


def _mark_epsilon(fig: go.Figure, current: float) -> None:
    """Dotted vertical line at the chosen ε on a log x-axis, labelled at the top (log axes place text in log10 units)."""
    fig.add_vline(x=current, line={"color": "grey", "dash": "dot"})
    fig.add_annotation(
        x=math.log10(current),
        y=1.0,
        yref="paper",
        text=f"ε = {current:g}",
        showarrow=False,
        xanchor="left",
        yanchor="top",
        xshift=4,
        font={"color": "#555"},
    )


def _gray_heatmap(img: np.ndarray, *, zmin: float, zmax: float, colorscale="gray", showscale=False, **kw) -> go.Heatmap:
    return go.Heatmap(
        z=np.asarray(img),
        zmin=zmin,
        zmax=zmax,
        colorscale=colorscale,
        showscale=showscale,
        hovertemplate="row %{y}, col %{x}: %{z:.3f}<extra></extra>",
        **kw,
    )


def _image_axes(fig: go.Figure, rows: int, cols: int) -> None:
    for i in range(rows * cols):
        suffix = "" if i == 0 else str(i + 1)
        fig.layout[f"xaxis{suffix}"].update(
            showticklabels=False, ticks="", showgrid=False, zeroline=False, constrain="domain"
        )
        fig.layout[f"yaxis{suffix}"].update(
            showticklabels=False,
            ticks="",
            showgrid=False,
            zeroline=False,
            autorange="reversed",
            scaleanchor=f"x{suffix}",
            constrain="domain",
        )
