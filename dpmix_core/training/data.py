"""Inputs for training and evaluation: subsets, the feature space of a release, labels as tensors.

The model trains on what was released and is evaluated on the real, untouched
test split mapped into *the same feature space* the mechanism used (e.g.
pixels/255 for DPMix, z-score + clip for DP-CDA, clip to ||x|| <= Cx for
Poisson mixing). That map uses only public constants or, where the mechanism
itself read statistics of the private training set (z-scoring without public
constants), exactly the statistics the mechanism used; its caveat travels in
the release notes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from dpmix_core.data import Dataset
from dpmix_core.mechanisms.mixing import clip_rows, column_mean, column_std, row_norms, unit_features
from dpmix_core.privacy.checks import FeatureRange
from dpmix_core.synthesis.pipeline import SynthesisConfig, public_zscore_arrays, scaling_range

__all__ = [
    "SUBSET_SEED",
    "subset_indices",
    "subsample",
    "flat",
    "pixels01",
    "record_feature_map",
    "release_feature_map",
    "release_scale",
    "one_hot",
    "split_validation",
    "rms_scale",
    "standardize_constants",
    "standardizer",
]

SUBSET_SEED = 20240601  # train/test limits take the same subset for every run seed


def subset_indices(n: int, limit: int | None) -> np.ndarray | None:
    """Sorted indices of a fixed random subset of size ``limit`` (None when no limit applies)."""
    if limit is None or limit >= n:
        return None
    rng = np.random.default_rng(SUBSET_SEED)
    return np.sort(rng.choice(n, size=limit, replace=False))


def subsample(ds: Dataset, *, train_limit: int | None, test_limit: int | None) -> Dataset:
    """The dataset restricted to fixed random subsets of its splits (the 'quick' variants)."""
    tr = subset_indices(ds.n_train, train_limit)
    te = subset_indices(len(ds.x_test), test_limit) if ds.x_test is not None else None
    if tr is None and te is None:
        return ds
    x_train, y_train = (ds.x_train, ds.y_train) if tr is None else (ds.x_train[tr], ds.y_train[tr])
    if te is None or ds.x_test is None or ds.y_test is None:
        x_test, y_test = ds.x_test, ds.y_test
    else:
        x_test, y_test = ds.x_test[te], ds.y_test[te]
    note = []
    if tr is not None:
        note.append(f"train subset {len(tr)}/{ds.n_train}")
    if te is not None:
        note.append(f"test subset {len(te)}/{0 if ds.x_test is None else len(ds.x_test)}")
    return replace(
        ds, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test, source=f"{ds.source} ({', '.join(note)})"
    )


def flat(x: np.ndarray) -> np.ndarray:
    """(n, ...) -> (n, d) without copying when possible (n may be 0)."""
    return x.reshape(x.shape[0], math.prod(x.shape[1:]))


def pixels01(x: np.ndarray) -> np.ndarray:
    """float32 (n, d): uint8 pixels / 255; float features as they are."""
    x = flat(x)
    if x.dtype == np.uint8:
        out = x.astype(np.float32)
        out *= np.float32(1 / 255)
        return out
    return x.astype(np.float32, copy=True)


def record_feature_map(feature_range: FeatureRange | None) -> Callable[[np.ndarray], np.ndarray]:
    """raw records (n, ...) -> float32 (n, d) for a model trained on the records themselves (non-private, DP-SGD,
    DP-PCA, label-only Laplace's features): :func:`pixels01` without bounds; with public ``feature_range``, min-max
    scaled to [0,1] and clipped (:func:`~dpmix_core.mechanisms.mixing.unit_features`), as a [0,1] release scales
    the records it mixes, so a baseline and a release of one's own file learn from the same features."""
    if feature_range is None:
        return pixels01

    def scaled(x: np.ndarray) -> np.ndarray:
        return unit_features(flat(x), feature_range)[0]

    return scaled


def release_scale(released_x: np.ndarray, clip: float) -> float:
    """The factor of the "release-scale" test loader: the released points' median norm over the clip radius ``clip``
    (a clipped test image of norm ``clip`` then has the median released norm; read off the release alone).

    A released DP-CDA point is the mean of l clipped records plus noise whose norm, sigma * sqrt(d), dominates at
    small l; a BatchNorm CNN's running statistics fit that scale, not the clipped test images' (REPRODUCTION 3b).
    """
    if len(released_x) == 0:
        raise ValueError("the release has no points to read its scale from.")
    return float(np.median(row_norms(flat(np.asarray(released_x)))) / clip)


def release_feature_map(
    config: SynthesisConfig, x_train: np.ndarray, *, clip: bool = True
) -> Callable[[np.ndarray], np.ndarray]:
    """raw records (n, d) -> float32 features in the space of the release made with ``config`` on ``x_train``.

    Mirrors :mod:`dpmix_core.mechanisms.mixing`: [0,1] scaling (DPMix, local,
    class-centric 'unit'), z-score + clip to ||x|| <= c (class-centric
    'zscore'), scale + clip to ||x|| <= Cx (Poisson). label-laplace: pixels/255.
    With private ranges (``config.range_epsilon``) the bounds are the ranges the release computed on ``x_train``
    (the same, deterministic). ``clip=False`` leaves the class-centric z-score unclipped
    (``RunConfig.test_inputs = "unclipped"``: DP-CDA's test loader read as z-scoring only); it is refused for the
    other maps (``config.zscore_clipped`` is False).
    """
    if not clip and not config.zscore_clipped:
        raise ValueError(f"only a class-centric z-score release has a clip to lift; found {config.mechanism!r}.")
    mech = config.mechanism
    if mech == "label-laplace":  # the records' own features
        return record_feature_map(config.feature_range)
    bounds = scaling_range(config, flat(x_train))  # the public bounds, or the release's private ranges inside them
    if config.unit_scaled:

        def unit(x: np.ndarray) -> np.ndarray:
            feats, scale, _ = unit_features(flat(x), bounds)
            out = feats.astype(np.float32, copy=True)
            if scale != 1.0:
                out *= np.float32(1 / scale)
            return out

        return unit
    if mech == "class-centric":
        x_train = flat(x_train)
        d = x_train.shape[1]
        constants = public_zscore_arrays(config, d)
        if constants is not None:
            mean, std = constants.mean, constants.std
        else:  # "zscore-private": the statistics the mechanism computed from the private training set (not covered)
            train32 = x_train.astype(np.float32)
            mean = column_mean(train32)
            std = column_std(train32, mean)
        std = np.where(std == 0, 1.0, std)
        mean32, std32 = mean.astype(np.float32), std.astype(np.float32)

        def zscore(x: np.ndarray) -> np.ndarray:
            feats = flat(x).astype(np.float32)
            feats -= mean32
            feats /= std32
            return clip_rows(feats, config.clip) if clip else feats

        return zscore

    def poisson(x: np.ndarray) -> np.ndarray:  # mechanism == "poisson"
        x = flat(x)
        if bounds is not None:
            feats, _, _ = unit_features(x, bounds)
            feats = feats.astype(np.float32, copy=True)
        else:
            feats = pixels01(x)
        return clip_rows(feats, config.clip_x)

    return poisson


def one_hot(y: np.ndarray, num_classes: int) -> np.ndarray:
    """float32 (n, K) one-hot rows."""
    return np.eye(num_classes, dtype=np.float32)[np.asarray(y, dtype=np.int64)]


def split_validation(x: np.ndarray, y: np.ndarray, fraction: float, rng: np.random.Generator):
    """A random ``fraction`` of the rows held out: (x_train, y_train, x_val, y_val).

    Args:
        x: (n, ...) records.
        y: (n, ...) labels matching ``x`` row for row.
        fraction: the share of rows held out, a fraction in [0, 1) (not a percentage); round(fraction * n)
            rows go to validation (0 gives an empty validation split).
        rng: the numpy Generator choosing the rows.

    Returns:
        (x_train, y_train, x_val, y_val): copies of the chosen rows, each part in the original row order.

    Raises:
        ValueError: the fraction would hold out every row.
    """
    n = x.shape[0]
    n_val = int(round(fraction * n))
    if n_val >= n:
        raise ValueError(f"validation fraction {fraction} leaves no training rows out of {n}.")
    order = rng.permutation(n)
    tr, va = np.sort(order[n_val:]), np.sort(order[:n_val])
    return x[tr], y[tr], x[va], y[va]


def standardize_constants(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, 1 / standard deviation) of each feature over the rows of ``x`` (n, ...), float32 with the shape of a
    row; a constant feature (or an empty ``x``) gets 1, so ``(x - mean) * inv_std`` never divides by zero."""
    if not len(x):
        return np.zeros(x.shape[1:], np.float32), np.ones(x.shape[1:], np.float32)
    mean = np.asarray(np.mean(x, axis=0, dtype=np.float64))
    std = np.asarray(np.std(x, axis=0, dtype=np.float64))
    inv = np.divide(1.0, std, out=np.ones_like(std), where=std > 0)
    return mean.astype(np.float32), inv.astype(np.float32)


def standardizer(x: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``a -> (a - mean) / std`` with each feature's mean and standard deviation over the rows of ``x``
    (:func:`standardize_constants`): the map applied alike to training, validation and test inputs."""
    mean, inv_std = standardize_constants(x)
    return lambda a: (a - mean) * inv_std


def rms_scale(x: np.ndarray) -> float:
    """1 / root-mean-square of the entries (1.0 for an all-zero array)."""
    rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if x.size else 0.0
    return 1.0 / rms if rms > 0 else 1.0
