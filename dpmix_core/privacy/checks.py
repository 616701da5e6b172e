"""The one set of scalar input checks (positive ints, sigmas, epsilon, delta, ranges): every message names the bad value.

Lowest layer, so release descriptions, accountants, mechanisms and lessons share them.
"""

from __future__ import annotations

import math
import numbers

__all__ = ["check_positive_int", "check_sigma", "check_positive", "check_epsilon", "check_delta", "check_range"]


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
