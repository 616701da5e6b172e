"""The one set of scalar input checks (positive ints, sigmas, epsilon, delta, ranges): every message names the bad value.

Lowest layer, so release descriptions, accountants, mechanisms and lessons share them.

Public bounds of float features (:data:`FeatureRange`) come in two shapes: one ``(low, high)`` pair for every
feature, or one pair per feature (columns in different units: an age, an income). :func:`check_feature_range`
canonicalises them (per-feature pairs that are all equal are the one pair, so the same scaling is the same run),
and :func:`feature_range_vectors` gives the bounds a table of ``d`` features is scaled with.
"""

from __future__ import annotations

import math
import numbers
from typing import TypeAlias

import numpy as np

__all__ = [
    "check_positive_int",
    "check_sigma",
    "check_positive",
    "check_epsilon",
    "check_delta",
    "check_range",
    "FeatureRange",
    "check_feature_range",
    "feature_range_vectors",
    "describe_feature_range",
    "json_feature_range",
]

# One (low, high) for every feature, or one (low, high) per feature.
FeatureRange: TypeAlias = tuple[float, float] | tuple[tuple[float, float], ...]


def check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer. Found {value!r}.")
    return int(value)


def check_sigma(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0. Found {value!r}.")
    return float(value)


def check_positive(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number. Found {value!r}.")
    return float(value)


def check_epsilon(value: object) -> float:
    return check_positive("epsilon", value)


def check_delta(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < float(value) < 1:
        raise ValueError(f"delta must be in (0, 1). Found {value!r}.")
    return float(value)


def check_range(name: str, value: object) -> tuple[float, float]:
    """A public (low, high) pair with low < high, both finite."""
    try:
        lo_raw, hi_raw = value  # type: ignore[misc]
        lo, hi = float(lo_raw), float(hi_raw)  # type: ignore[has-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high) of numbers. Found {value!r}.") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"{name} must satisfy low < high, both finite. Found {value!r}.")
    return lo, hi


def _is_pair_of_numbers(value: object) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in value)
    )


def check_feature_range(name: str, value: object) -> FeatureRange:
    """Public bounds of float features: a (low, high) pair, or a sequence of per-feature pairs (all equal: the pair)."""
    if _is_pair_of_numbers(value):
        return check_range(name, value)
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) == 0:
        raise ValueError(f"{name} must be a pair (low, high) or one pair per feature. Found {value!r}.")
    pairs = tuple(check_range(f"{name} of feature {j}", pair) for j, pair in enumerate(value))
    return pairs[0] if len(set(pairs)) == 1 else pairs


def _bounds_table(name: str, feature_range: object) -> np.ndarray:
    """The checked bounds as a float64 (m, 2) table: m = 1 for one pair for every feature."""
    return np.atleast_2d(np.asarray(check_feature_range(name, feature_range), dtype=np.float64))


def feature_range_vectors(
    feature_range: FeatureRange, d: int, *, name: str = "feature_range"
) -> tuple[np.ndarray, np.ndarray]:
    """The (low, high) bounds of each of ``d`` features as two float64 arrays of shape (d,)."""
    table = _bounds_table(name, feature_range)
    if len(table) == 1:
        return np.full(d, table[0, 0]), np.full(d, table[0, 1])
    if len(table) != d:
        raise ValueError(f"{name} gives bounds for {len(table)} features; the data has {d}.")
    return table[:, 0].copy(), table[:, 1].copy()


def describe_feature_range(feature_range: FeatureRange) -> str:
    """The bounds in words: "(0, 1)", or "per feature (8 features, lows -60000 to 0.4, highs 1.6 to 180000)"."""
    table = _bounds_table("feature_range", feature_range)
    lows, highs = table[:, 0], table[:, 1]
    if len(table) == 1:
        return f"({lows[0]:g}, {highs[0]:g})"
    return (
        f"per feature ({len(table)} features, lows {lows.min():g} to {lows.max():g}, "
        f"highs {highs.min():g} to {highs.max():g})"
    )


def json_feature_range(feature_range: FeatureRange) -> list:
    """The bounds as JSON stores them: ``[low, high]``, or ``[[low, high], ...]`` one a feature."""
    table = _bounds_table("feature_range", feature_range)
    return table[0].tolist() if len(table) == 1 else table.tolist()
