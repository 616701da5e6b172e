"""Private feature ranges: where each feature's records lie inside loose public bounds, from noisy histograms.

What it is for: a model trained by DP-SGD on features scaled to [0,1] by loose public bounds sees them crowded
into a sliver of [0,1] and stays at the constant predictor (docs: ``train --data-file``); standardising on the
records would read a statistic of them outside DP-SGD's epsilon. These ranges are that statistic, released with
Gaussian noise and accounted with the DP-SGD steps that use them.

The mechanism (a hierarchical histogram, as in private range and quantile estimation; Dwork & Roth 2014, §3.3 for
the Gaussian mechanism): ``rounds`` times, each feature's records are counted in ``bins`` equal bins over the
feature's current range (the public bounds at first) and N(0, (z_r sqrt(d))^2) is added to every count. A bin is
occupied when its noisy count exceeds ``threshold`` noise standard deviations; the range zooms in to the occupied
bins and one spare bin on each side when (a) that span is at most :data:`ZOOM_FILL` of the range, (b) its noisy
count is significant (above ``threshold`` sds of its summed noise, so one noisy empty bin does not move it) and
(c) the noisy count outside it is at most :data:`CLIPPED_SHARE` of the count inside;
otherwise the feature keeps its range. Everything after the noisy counts is post-processing, so the ranges are
exactly as private as the counts.

The rule is a heuristic, judged by what DP-SGD then learns (``bench/dpsgd_feature_ranges.py``, docs/PERFORMANCE.md):
a range narrows where the noisy counts say the records sit in a small part of it, and the tails beyond the
occupied bins are clipped. Where the noise is large against the records a feature has in a bin (a few hundred
records, many features, a small epsilon) the counts can mislead it: a range then stays at the public bounds, or
narrows onto part of the records. On the benchmark's five file-and-bounds pairs, 40 draws each at epsilon 1, 2
and 8 (600 draws): the feature clipped most lost a median 0-26 % of its values with 3 rounds, 0-50 % with 10 (a
round's noise is then sqrt(10/3) times larger); one feature lost more than half of them in 8 draws with 3 rounds, in
83 with 10. DP-SGD still learns more with 10 (docs/PERFORMANCE.md): a clipped tail costs its linear model less than
a range left wide; a zoom that also demanded few records outside with one noise sd to spare, or a span holding 90 %
of n as every feature's noisy totals estimate it, clipped less and learned less
(``bench/dpsgd_feature_ranges.py --clipping`` counts the clipping).

Features whose public bounds are exact (``exact``: a public category's one-hot features, 0 or 1) are not counted
and keep the bounds; d below is then the number of features counted.

Privacy: one record adds 1 to one bin of each of the d features per round, so a round's counts have L2
sensitivity sqrt(d) under add/remove-one adjacency (DP-SGD's; sqrt(2d) under replace-one) and noise
z_r sqrt(d) is the Gaussian mechanism with noise multiplier z_r. The rounds compose as ``rounds`` Gaussians with
z_r = z sqrt(rounds), exactly one Gaussian with multiplier z (Dong, Roth & Su 2022, Cor. 3.3: mu-GDP composes in
quadrature), which :meth:`FeatureRanges.dp_event` states as dp_accounting's SelfComposed(Gaussian(z_r), rounds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpmix_core.mechanisms._checks import check_features, check_positive_int, check_range

__all__ = [
    "RANGE_BINS",
    "RANGE_ROUNDS",
    "RANGE_THRESHOLD",
    "FeatureRanges",
    "bin_counts",
    "dp_feature_ranges",
    "ranges_event",
]

RANGE_BINS = 16  # bins a round
RANGE_ROUNDS = 3  # each zoom narrows by at most 16 / 3 (a spare bin each side): 3 rounds reach ~150 times
ZOOM_FILL = 0.5  # zoom in where the occupied bins (and one spare each side) span at most this share of the range
CLIPPED_SHARE = 0.1  # ... and the noisy counts outside them are at most this share of those inside
RANGE_THRESHOLD = 3.0  # noise sds: an empty bin passes with probability 0.13 % (one of 16 in a round: 2 %)


@dataclass(frozen=True)
class FeatureRanges:
    """Per-feature ranges [low, high] of the records, released with Gaussian noise (:func:`dp_feature_ranges`)."""

    low: np.ndarray  # (d,) float64
    high: np.ndarray  # (d,) float64, > low
    noise_multiplier: float  # z: the rounds together are one Gaussian with this multiplier (sensitivity 1)
    rounds: int
    bins: int
    exact: tuple[int, ...] = ()  # features not counted, kept at the public bounds (dp_feature_ranges)

    def __post_init__(self) -> None:
        low, high = np.asarray(self.low, dtype=np.float64), np.asarray(self.high, dtype=np.float64)
        if low.ndim != 1 or low.shape != high.shape or not (np.all(np.isfinite(low)) and np.all(high > low)):
            raise ValueError("feature ranges need finite (d,) low and high with high > low for every feature.")
        if not (isinstance(self.noise_multiplier, float) and self.noise_multiplier > 0):
            raise ValueError(f"noise multiplier must be a positive float. Found {self.noise_multiplier!r}.")
        check_positive_int("rounds", self.rounds)
        check_positive_int("bins", self.bins)

    @property
    def round_noise_multiplier(self) -> float:
        """z_r = z sqrt(rounds): each round's noise multiplier."""
        return self.noise_multiplier * math.sqrt(self.rounds)

    def scale(self, x: np.ndarray) -> np.ndarray:
        """``x`` (n, d) mapped to [0,1] by these ranges, values outside clipped: float32."""
        unit = (np.asarray(x, dtype=np.float64) - self.low) / (self.high - self.low)
        return np.clip(unit, 0.0, 1.0).astype(np.float32)

    def dp_event(self):
        """dp_accounting's event: SelfComposed(Gaussian(z_r), rounds), add/remove-one (module docstring)."""
        return ranges_event(self.noise_multiplier, self.rounds)

    def describe(self) -> str:
        kept = f"; {len(self.exact)} one-hot features kept at the public bounds, not counted" if self.exact else ""
        return (
            f"per-feature ranges from {self.rounds} rounds of {self.bins}-bin noisy histograms "
            f"(Gaussian, noise multiplier {self.round_noise_multiplier:.3g} a round, {self.noise_multiplier:.3g} "
            f"in all{kept})"
        )


def ranges_event(noise_multiplier: float, rounds: int, *, replace_one: bool = False):
    """The rounds of noisy histograms with total noise multiplier z as a dp_accounting event, known before any record is
    read: SelfComposed(Gaussian(z_r), rounds), z_r = z sqrt(rounds), under add/remove-one (sensitivity sqrt(d) against
    noise z_r sqrt(d)); under replace-one a replaced record moves one count of each feature down and another up, L2
    sensitivity sqrt(2d), so each round is a Gaussian with multiplier z_r / sqrt(2)."""
    import dp_accounting

    z_r = float(noise_multiplier) * math.sqrt(rounds) / (math.sqrt(2.0) if replace_one else 1.0)
    return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(z_r), rounds)


def bin_counts(X: np.ndarray, low: np.ndarray, high: np.ndarray, bins: int) -> np.ndarray:
    """(d, bins) counts of each feature's values in ``bins`` equal bins over [low_j, high_j] (values outside in the
    edge bins): one record adds 1 to one bin of each feature, so adding or removing it moves the counts by sqrt(d)."""
    width = (high - low) / bins
    index = np.clip(np.floor((X - low) / width), 0, bins - 1).astype(np.int64)  # (n, d) bin of each value
    return np.stack([np.bincount(index[:, j], minlength=bins) for j in range(X.shape[1])]).astype(np.float64)


def dp_feature_ranges(
    X: np.ndarray,
    *,
    noise_multiplier: float,
    bounds: tuple[float, float] = (0.0, 1.0),
    rounds: int = RANGE_ROUNDS,
    bins: int = RANGE_BINS,
    threshold: float = RANGE_THRESHOLD,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
    exact: Sequence[int] = (),
) -> FeatureRanges:
    """Each feature's range inside the public ``bounds`` by noisy hierarchical histograms (module docstring).

    Args:
        X: (n, d) finite records in the units of ``bounds``; values outside are counted in the edge bins.
        noise_multiplier: z > 0, the rounds' total noise multiplier (each round: z sqrt(rounds)).
        bounds: the public (low, high) bounds of every feature.
        rounds: histograms, each over the range the previous one found.
        bins: equal bins per feature a round.
        threshold: a bin is occupied when its noisy count exceeds this many noise standard deviations.
        seed: anything ``numpy.random.default_rng`` accepts.
        exact: features whose public bounds are exact (a public category's one-hot feature, 0 or 1): not counted,
            so the noise on the others' counts scales with the square root of the d' counted features, not d.

    Returns:
        :class:`FeatureRanges` (every range inside ``bounds``, at least one bin of its round wide).

    Raises:
        ValueError: X not a finite (n, d) array; bad bounds; z not positive; rounds or bins not positive ints;
            ``exact`` not distinct indices of fewer than all d features.
    """
    X = check_features(X).astype(np.float64)
    lo, hi = check_range("bounds", bounds)
    if not (isinstance(noise_multiplier, (int, float)) and math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise ValueError(f"noise multiplier must be positive and finite. Found {noise_multiplier!r}.")
    check_positive_int("rounds", rounds)
    check_positive_int("bins", bins)
    fixed = tuple(sorted({int(j) for j in exact}))
    if fixed and not (0 <= fixed[0] and fixed[-1] < X.shape[1] and len(fixed) < X.shape[1]):
        raise ValueError(f"exact features must be indices of fewer than all {X.shape[1]} features. Found {fixed}.")
    ranges = _zoom(np.delete(X, fixed, axis=1), float(noise_multiplier), lo, hi, rounds, bins, threshold, seed)
    low, high = np.full(X.shape[1], lo), np.full(X.shape[1], hi)
    counted = np.setdiff1d(np.arange(X.shape[1]), np.asarray(fixed, dtype=np.int64))
    low[counted], high[counted] = ranges
    return FeatureRanges(low, high, float(noise_multiplier), rounds, bins, fixed)


def _zoom(
    X: np.ndarray, noise_multiplier: float, lo: float, hi: float, rounds: int, bins: int, threshold: float, seed
) -> tuple[np.ndarray, np.ndarray]:
    """The (low, high) of each of X's d columns after ``rounds`` noisy zooms (:func:`dp_feature_ranges`)."""
    rng = np.random.default_rng(seed)
    d = X.shape[1]
    sd = noise_multiplier * math.sqrt(rounds) * math.sqrt(d)  # a round's noise on each count
    low, high = np.full(d, lo), np.full(d, hi)
    for _ in range(rounds):
        width = (high - low) / bins
        noisy = bin_counts(X, low, high, bins) + rng.normal(0.0, sd, size=(d, bins))
        occupied = noisy > threshold * sd
        for j in np.flatnonzero(occupied.any(axis=1)):  # a feature with no occupied bin keeps its range
            first, last = np.flatnonzero(occupied[j])[[0, -1]]
            first, last = max(first - 1, 0), min(last + 1, bins - 1)  # one bin spare on each side
            inside = noisy[j, first : last + 1].sum()
            outside = noisy[j].sum() - inside
            span = last - first + 1
            significant = inside > threshold * sd * math.sqrt(span)  # not one bin's noise (which passes 0.13 %)
            few_outside = outside <= CLIPPED_SHARE * inside
            if span <= bins * ZOOM_FILL and significant and few_outside:
                low[j], high[j] = low[j] + first * width[j], low[j] + (last + 1) * width[j]
    return low, high
