"""Array checks shared by the mechanisms (the scalar ones live in :mod:`dpmix_core.privacy.checks`)."""

from __future__ import annotations

import numpy as np

from dpmix_core.privacy.checks import (
    FeatureRange,
    check_delta,
    check_epsilon,
    check_feature_range,
    check_positive,
    check_positive_int,
    check_range,
    check_sigma,
    describe_feature_range,
    feature_range_vectors,
)

__all__ = [
    "check_features",
    "check_labels",
    "check_positive_int",
    "check_sigma",
    "check_epsilon",
    "check_delta",
    "check_range",
    "check_positive",
    "FeatureRange",
    "check_feature_range",
    "feature_range_vectors",
    "describe_feature_range",
]


def check_features(X: object, *, name: str = "X", allow_1d: bool = False) -> np.ndarray:
    """A 2-D (n, d) numeric array without NaN or infinity (1-D allowed where stated)."""
    if not isinstance(X, np.ndarray):
        raise ValueError(f"{name} must be a numpy array of shape (n, d). Found {type(X).__name__}.")
    if X.ndim != 2 and not (allow_1d and X.ndim == 1):
        shape = "(n,) or (n, d)" if allow_1d else "(n, d) (flatten images first, e.g. X.reshape(len(X), -1))"
        raise ValueError(f"{name} must have shape {shape}. Found shape {X.shape}.")
    if X.shape[0] < 1 or (X.ndim == 2 and X.shape[1] < 1):
        raise ValueError(f"{name} must have at least one row and one column. Found shape {X.shape}.")
    if X.dtype == np.bool_ or not (np.issubdtype(X.dtype, np.integer) or np.issubdtype(X.dtype, np.floating)):
        raise ValueError(f"{name} must hold integers or floats. Found dtype {X.dtype}.")
    if np.issubdtype(X.dtype, np.floating):
        bad = ~np.isfinite(X)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"{name} contains {int(bad.sum())} NaN or infinite value(s); the first is {X[where]} at index {where}."
            )
    return X


def check_labels(y: object, *, n: int, num_classes: int, name: str = "y") -> np.ndarray:
    """Integer class labels of shape (n,) in 0..num_classes-1 (floats must be whole numbers)."""
    check_positive_int("num_classes (K)", num_classes)
    if not isinstance(y, np.ndarray):
        raise ValueError(f"{name} must be a numpy array of shape (n,). Found {type(y).__name__}.")
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) to match X. Found shape {y.shape}.")
    if np.issubdtype(y.dtype, np.floating):
        bad = ~np.isfinite(y) | (y != np.round(y))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name} must hold integer class labels. Found {y[i]} at index {i}.")
    elif y.dtype == np.bool_ or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"{name} must hold integer class labels. Found dtype {y.dtype}.")
    out_of_range = (y < 0) | (y >= num_classes)
    if out_of_range.any():
        i = int(np.argmax(out_of_range))
        raise ValueError(
            f"{name} must be in 0..{num_classes - 1} (num_classes={num_classes}). Found {y[i]} at index {i}."
        )
    return y.astype(np.int64, copy=False)
