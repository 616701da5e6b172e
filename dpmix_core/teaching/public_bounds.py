"""Lesson 5: why public bounds set the noise, and how a small share of epsilon finds tighter ones.

A DP mean of n values known to lie in public bounds [low, high] moves by at most (high - low) / n when one person's
value is swapped for another (replace-one): its Gaussian noise grows in proportion to the bounds' width, however
narrow the values themselves are. Bounds a form states (an age "between 0 and 1,000") can be hundreds of times wider
than the values, and so is the noise. The product's answer (:mod:`dpmix_core.synthesis.private_ranges`, the same
noisy histograms every table's release and DP-SGD use): spend a share of epsilon on finding where the values lie
inside the public bounds, then clip to that range and spend the rest on the mean.

Privacy of the two parts together, exactly: the ranges are one Gaussian mechanism (their rounds compose to one
Gaussian with noise multiplier z_r; under replace-one their sensitivity is sqrt(2), so they are mu_r-GDP with
mu_r = sqrt(2) / z_r), and the mean with noise sigma and sensitivity Delta = (b - a) / n is mu_m-GDP with
mu_m = Delta / sigma. Gaussian DP composes in quadrature (Dong, Roth & Su 2022, Cor. 3.3), so the pair is
sqrt(mu_r^2 + mu_m^2)-GDP, and a target (epsilon, delta) is met exactly by the mu of the Gaussian mechanism the
analytic calibration gives for it (Balle & Wang 2018): mu_m = sqrt(mu^2 - mu_r^2). Without ranges, mu_m = mu.

The lesson's data are synthetic ages (seeded), so it needs no dataset: a teacher can say "a survey's ages".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dpmix_core.mechanisms.descriptions import gaussian_sigma
from dpmix_core.privacy.checks import check_delta, check_epsilon, check_positive_int
from dpmix_core.synthesis.private_ranges import private_ranges, range_noise_multiplier
from dpmix_core.teaching.common import _check_seed, _layout

__all__ = [
    "BOUNDS_HIGHS",
    "BoundsLesson",
    "bounds_figure",
    "bounds_lesson",
    "survey_ages",
]

BOUNDS_HIGHS = (100.0, 1_000.0, 10_000.0, 100_000.0, 1_000_000.0)  # public upper bounds on an age (lower: 0)
_PLAIN, _RANGES = "public bounds as they are", "private range first"


def survey_ages(n: int, seed: int = 0) -> np.ndarray:
    """``n`` synthetic ages (normal, mean 45, sd 12, kept within 18-95), seeded: the lesson's private values."""
    rng = np.random.default_rng([check_positive_int("n", n), int(seed)])
    return np.clip(rng.normal(45.0, 12.0, n), 18.0, 95.0)


@dataclass(frozen=True)
class BoundsLesson:
    """The DP mean of ``values`` under each public upper bound, with and without a private range first."""

    n: int
    true_mean: float
    epsilon: float
    delta: float
    range_share: float
    draws: int
    rows: pd.DataFrame  # one row per (public upper bound, method): the range used, noise std, RMSE, epsilon

    def table(self) -> pd.DataFrame:
        return self.rows.copy()

    def sentences(self) -> list[str]:
        """What the chart shows, in words, at the narrowest and widest public bounds."""
        plain = self.rows[self.rows["method"] == _PLAIN].set_index("public upper bound")["error (RMSE)"]
        ranges = self.rows[self.rows["method"] == _RANGES].set_index("public upper bound")
        ranged = ranges["error (RMSE)"]
        low, high = plain.index.min(), plain.index.max()
        bias = ranges["bias (mean error, years)"][low]
        tight = (
            f"where the bounds already fit (0, {low:,.0f}) it costs: {ranged[low]:.3g} against {plain[low]:.3g} "
            "years, as the range takes a share of ε from the mean and, found anew with its own noise, may clip the "
            f"youngest or oldest ages (a bias that differs from draw to draw; {bias:+.2g} years on average here)"
            if ranged[low] > plain[low]
            else f"even at (0, {low:,.0f}): {ranged[low]:.3g} against {plain[low]:.3g} years"
        )
        return [
            f"With the public bounds as they are, the noise follows their width: an error of {plain[low]:.3g} years "
            f"at (0, {low:,.0f}), {plain[high]:,.4g} at (0, {high:,.0f}).",
            f"Spending {self.range_share:.0%} of ε on a private range first, the error stays between "
            f"{ranged.min():.3g} and {ranged.max():.3g} years whatever the bounds: at (0, {high:,.0f}) "
            f"{plain[high] / ranged[high]:,.0f} times smaller; {tight}.",
            f"Both lines are (ε = {self.epsilon:g}, δ = {self.delta:g})-DP for everything released (the range and "
            "the mean), exactly: two Gaussian mechanisms compose in quadrature (Gaussian DP).",
        ]


def _mean_noise(width: float, n: int, mu: float) -> float:
    """The DP mean's noise std: sensitivity width / n (replace-one) over the mean's GDP mu."""
    return width / n / mu


def bounds_lesson(
    values: np.ndarray,
    *,
    epsilon: float,
    delta: float = 1e-5,
    range_share: float = 0.1,
    highs: Sequence[float] = BOUNDS_HIGHS,
    draws: int = 100,
    seed: int = 0,
) -> BoundsLesson:
    """The DP mean of ``values`` (1-D, all >= 0) with public bounds (0, high) for each of ``highs``, once as they are
    and once after a private range at ``range_share`` of ``epsilon`` (module docstring): each over ``draws`` seeded
    draws of all the noise, its root-mean-square error against the true mean.

    Raises:
        ValueError: values not a non-empty 1-D finite array >= 0; epsilon, delta, range_share (in (0, 1)), highs (each
            positive) or draws out of range.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)) or x.min() < 0:
        raise ValueError("values must be a non-empty 1-D array of finite numbers >= 0 (the public lower bound is 0).")
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    if not (isinstance(range_share, (int, float)) and 0 < range_share < 1):
        raise ValueError(f"range share must be in (0, 1): the mean needs the rest of epsilon. Found {range_share!r}.")
    if not highs or any(not (isinstance(h, (int, float)) and 0 < h < math.inf) for h in highs):
        raise ValueError(f"public upper bounds must be positive and finite. Found {list(highs)!r}.")
    draws = check_positive_int("draws", draws)
    seed = _check_seed(seed) or 0
    n, true_mean = len(x), float(x.mean())
    mu = 1.0 / gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=1.0, method="analytic")  # the target's GDP mu
    z_r = range_noise_multiplier(range_share * epsilon, delta, "replace-one")
    mu_m = math.sqrt(max(mu**2 - (math.sqrt(2.0) / z_r) ** 2, 0.0))  # what the mean keeps (module docstring)
    rows = []
    for high in sorted(float(h) for h in highs):
        rng = np.random.default_rng([seed, int(high)])
        clipped = np.clip(x, 0.0, high)
        sigma = _mean_noise(high, n, mu)
        errors = clipped.mean() + rng.normal(0.0, sigma, draws) - true_mean
        rows.append(_row(high, _PLAIN, (0.0, high), sigma, errors, epsilon))
        found, ranged_errors, sigmas = [], [], []
        for draw in range(draws):
            ranges = private_ranges(
                x[:, None], (0.0, high), epsilon=range_share * epsilon, delta=delta, relation="replace-one", seed=draw
            )
            a, b = ranges.low[0], ranges.high[0]
            sigma_r = _mean_noise(b - a, n, mu_m)
            ranged_errors.append(np.clip(x, a, b).mean() + rng.normal(0.0, sigma_r) - true_mean)
            found.append((a, b))
            sigmas.append(sigma_r)
        a_median, b_median = np.median(np.array(found), axis=0)
        median = (float(a_median), float(b_median))
        rows.append(_row(high, _RANGES, median, float(np.median(sigmas)), np.array(ranged_errors), epsilon))
    frame = pd.DataFrame(rows)
    return BoundsLesson(n, true_mean, epsilon, delta, float(range_share), draws, frame)


def _row(high: float, method: str, bounds: tuple[float, float], sigma: float, errors: np.ndarray, eps: float) -> dict:
    return {
        "public upper bound": high,
        "method": method,
        "bounds the mean used (median)": f"({bounds[0]:,.4g}, {bounds[1]:,.4g})",
        "noise std (years)": sigma,
        "bias (mean error, years)": float(np.mean(errors)),
        "error (RMSE)": float(np.sqrt(np.mean(np.square(errors)))),
        "ε of everything released": eps,
    }


def bounds_figure(lesson: BoundsLesson) -> go.Figure:
    """The DP mean's error against the public upper bound, log-log: one line without, one with a private range."""
    fig = go.Figure()
    for method, colour, dash in ((_PLAIN, "#d62728", "solid"), (_RANGES, "#2ca02c", "dash")):
        part = lesson.rows[lesson.rows["method"] == method]
        fig.add_trace(
            go.Scatter(
                x=part["public upper bound"],
                y=part["error (RMSE)"],
                mode="lines+markers",
                name=method,
                line={"color": colour, "dash": dash, "width": 3},
                hovertemplate="public bounds (0, %{x:,.0f})<br>error %{y:.3g} years<extra>" + method + "</extra>",
            )
        )
    fig.update_xaxes(type="log", dtick=1, title="public upper bound on an age (lower bound 0)")
    fig.update_yaxes(type="log", dtick=1, title="error of the DP mean age (RMSE, years)")  # one label a decade
    title = (
        f"DP mean of {lesson.n:,} ages at ε = {lesson.epsilon:g}: the noise follows the public bounds, "
        "unless a private range is found first"
    )
    return _layout(fig, title, 420)
