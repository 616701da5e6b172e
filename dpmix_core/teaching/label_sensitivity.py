"""Lesson 1: sensitivity of labels (one-hot vs 0..9) and label-only Laplace (MNIST label-DP project)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dpmix_core.mechanisms import (
    LaplaceLabelRelease,
    laplace_label_release,
)
from dpmix_core.mechanisms.label_dp import label_sensitivity as mechanism_label_sensitivity
from dpmix_core.privacy.checks import check_epsilon, check_positive_int

try:  # a dependency of scikit-learn; optional here
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None
from dpmix_core.teaching.common import (
    _COLORS,
    _TASKS,
    LABEL_ENCODINGS,
    _check_encoding,
    _check_labels_1d,
    _layout,
    _log_ticks,
    _mark_epsilon,
    _streams,
)

__all__ = [
    "LabelChangeExample",
    "label_sensitivity",
    "label_change_example",
    "label_noise_scale",
    "label_noise_scales",
    "label_release_accuracy",
    "label_scale_figure",
    "label_accuracy_figure",
]


def label_sensitivity(encoding: str, num_classes: int = 10) -> float:
    """Delta_f (L1) of one person's label: 2 for one-hot vectors, K-1 for the label as a number 0..K-1.

    One-hot: changing label a to b (a != b) turns a 1 into 0 and a 0 into 1, so the
    L1 distance is 2 whatever a and b are. A number: |a - b| <= K - 1 (0 <-> 9 for digits).
    """
    task = "classification" if _check_encoding(encoding) == "one-hot" else "regression"
    return mechanism_label_sensitivity(task, num_classes)


@dataclass(frozen=True)
class LabelChangeExample:
    """One person's label changes from ``old_label`` to ``new_label``: how far each encoding moves."""

    old_label: int
    new_label: int
    num_classes: int
    one_hot_old: np.ndarray  # (K,)
    one_hot_new: np.ndarray  # (K,)
    one_hot_distance: float  # always 2
    number_distance: float  # |old - new|
    one_hot_sensitivity: float  # 2
    number_sensitivity: float  # K - 1

    def table(self) -> pd.DataFrame:
        """Rows: one-hot and number encodings; before, after, L1 distance, worst case over all label pairs."""

        def vec(v: np.ndarray) -> str:
            return "[" + " ".join(str(int(a)) for a in v) + "]"

        return pd.DataFrame(
            [
                {
                    "encoding": "one-hot",
                    "before": vec(self.one_hot_old),
                    "after": vec(self.one_hot_new),
                    "L1 distance": self.one_hot_distance,
                    "worst case Δf": self.one_hot_sensitivity,
                },
                {
                    "encoding": f"number 0…{self.num_classes - 1}",
                    "before": str(self.old_label),
                    "after": str(self.new_label),
                    "L1 distance": self.number_distance,
                    "worst case Δf": self.number_sensitivity,
                },
            ]
        )


def label_change_example(old_label: int, new_label: int, num_classes: int = 10) -> LabelChangeExample:
    """The worked example: L1 distance of the one-hot vectors (2) and of the numbers (|old - new|)."""
    k = check_positive_int("num_classes (K)", num_classes)
    for name, value in (("old_label", old_label), ("new_label", new_label)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value < k:
            raise ValueError(f"{name} must be a class in 0..{k - 1}. Found {value!r}.")
    if old_label == new_label:
        raise ValueError(
            f"Neighbouring datasets differ in this person's label: pick two different labels. Found {old_label} twice."
        )
    eye = np.eye(k)
    a, b = eye[old_label], eye[new_label]
    return LabelChangeExample(
        int(old_label),
        int(new_label),
        k,
        a,
        b,
        float(np.abs(a - b).sum()),
        float(abs(int(old_label) - int(new_label))),
        label_sensitivity("one-hot", k),
        label_sensitivity("regression", k),
    )


def _label_release(epsilon: float, encoding: str, num_classes: int, n: int = 1) -> LaplaceLabelRelease:
    k = check_positive_int("num_classes (K)", num_classes)
    return LaplaceLabelRelease(
        epsilon=check_epsilon(epsilon),
        sensitivity=label_sensitivity(encoding, k),
        n=n,
        task=_TASKS[encoding],
    )


def label_noise_scale(epsilon: float, encoding: str, num_classes: int = 10) -> float:
    """Laplace scale b = Delta_f / eps of label-only Laplace (the mechanism's own description computes it)."""
    return _label_release(epsilon, encoding, num_classes).scale


def label_noise_scales(epsilons: Iterable[float], num_classes: int = 10) -> pd.DataFrame:
    """Long table: epsilon, encoding, sensitivity, scale b = Delta_f/eps and noise std sqrt(2) b, for both encodings."""
    rows = []
    for eps in epsilons:
        for enc in LABEL_ENCODINGS:
            rel = _label_release(eps, enc, num_classes)
            rows.append(
                {
                    "epsilon": float(eps),
                    "encoding": enc,
                    "sensitivity": rel.sensitivity,
                    "scale": rel.scale,
                    "std": math.sqrt(2.0) * rel.scale,
                }
            )
    if not rows:
        raise ValueError("epsilons must hold at least one value.")
    return pd.DataFrame(rows)


def label_release_accuracy(
    y: np.ndarray, *, num_classes: int, epsilons: Iterable[float], seed: int | None = None
) -> pd.DataFrame:
    """Fraction of labels that survive label-only Laplace, per epsilon and encoding.

    One-hot: argmax of the noisy vector (post-processing). Regression: the noisy
    number clamped to [0, K-1] and rounded (post-processing). Runs
    :func:`~dpmix_core.mechanisms.laplace_label_release` on the labels; the
    features do not touch the label noise, so a one-column placeholder stands in
    for them (cheap even for 60,000 images).
    """
    k = check_positive_int("num_classes (K)", num_classes)
    y = _check_labels_1d(y, k)
    eps_list = [check_epsilon(e) for e in epsilons]
    if not eps_list:
        raise ValueError("epsilons must hold at least one value.")
    placeholder = np.zeros((len(y), 1), dtype=np.uint8)
    streams = _streams(seed, 2 * len(eps_list))
    rows = []
    for i, eps in enumerate(eps_list):
        for j, enc in enumerate(LABEL_ENCODINGS):
            out = laplace_label_release(
                placeholder,
                y,
                num_classes=k,
                epsilon=eps,
                task=_TASKS[enc],
                postprocess=enc == "regression",
                seed=streams[2 * i + j],
            )
            guess = out.hard_labels() if enc == "one-hot" else out.y[:, 0].astype(np.int64)
            rows.append(
                {
                    "epsilon": eps,
                    "encoding": enc,
                    "accuracy": float(np.mean(guess == y)),
                    "scale": cast(LaplaceLabelRelease, out.release).scale,
                }
            )
    return pd.DataFrame(rows)


def label_scale_figure(scales: pd.DataFrame, *, current: float | None = None) -> go.Figure:
    """Laplace scale b = Δf/ε vs ε (log-log), one line per label encoding."""
    fig = go.Figure()
    for enc, part in scales.groupby("encoding", sort=False):
        s = part["sensitivity"].iloc[0]
        fig.add_trace(
            go.Scatter(
                x=part["epsilon"],
                y=part["scale"],
                mode="lines+markers",
                name=f"{enc} (Δf = {s:g})",
                line={"color": _COLORS.get(enc), "width": 3},
                hovertemplate="ε = %{x:g}<br>b = %{y:.3g}<extra></extra>",
            )
        )
    if current is not None:
        _mark_epsilon(fig, current)
    fig.update_xaxes(title="ε (privacy budget, log scale)", type="log", tickvals=_log_ticks(scales["epsilon"]))
    fig.update_yaxes(title="Laplace scale b = Δf/ε", type="log", tickvals=_log_ticks(scales["scale"]))
    return _layout(fig, "Laplace noise scale per label coordinate", 460)


def label_accuracy_figure(acc: pd.DataFrame, *, current: float | None = None, n: int | None = None) -> go.Figure:
    """Share of labels recovered after label-only Laplace vs ε, one line per encoding."""
    fig = go.Figure()
    for enc, part in acc.groupby("encoding", sort=False):
        how = "argmax of noisy one-hot" if enc == "one-hot" else "noisy number, rounded"
        fig.add_trace(
            go.Scatter(
                x=part["epsilon"],
                y=100 * part["accuracy"],
                mode="lines+markers",
                name=f"{enc}: {how}",
                line={"color": _COLORS.get(enc), "width": 3},
                hovertemplate="ε = %{x:g}<br>%{y:.1f} % correct<extra></extra>",
            )
        )
    if current is not None:
        _mark_epsilon(fig, current)
    fig.update_xaxes(title="ε (privacy budget, log scale)", type="log", tickvals=_log_ticks(acc["epsilon"]))
    fig.update_yaxes(title="labels still correct (%)", range=[0, 103])
    where = f" (n = {n:,})" if n else ""
    return _layout(fig, f"Released labels still correct{where}", 460)
