"""A release of a table in the table's own units and columns: post-processing of a [0,1] release.

A release that scales a table's records into [0,1]^d with public bounds (dpmix "unit", class-centric
"unit", local) mixes x' = (x - low) / (high - low), column by column. Mixing averages records and the
map is affine, so a released value mapped back, value * (high - low) + low, is the average of the
mixed records in their own units plus the noise scaled by the column's width. The map uses the public
bounds alone, so it is post-processing (Dwork & Roth 2014, Prop. 2.1): the release's ε is unchanged.

Releases that clip norms (Poisson, dpmix "clip") or z-score (class-centric "zscore") have no such map:
clipping is not invertible, so their values stay in the release's space. Neither do images (their
records are pixels, not columns) nor feature releases (ScatterNet coefficients are not the table's).

The table a recipient reads (``synthesize --data-file F --out FILE.csv``; Mixed samples' CSV download):

    label column | the table's feature columns (its units) | one score column per class, "label=class"

The label column holds the class whose released score is largest (the thesis trains on that argmax);
the score columns hold the released, noisy label vector, so nothing released is lost. A text column read
with public categories (:mod:`dpmix_core.data.categories`) comes back the same way: its word (the category
whose released share is largest) just before its one-hot shares. The privacy card beside the file says so
(``released.csv_units = "data"``), and :func:`table_layout` rebuilds the header from the card, so the file
reads back (``train --release``, ``verify``) into the release's space; the word columns, derived from the
numbers beside them, are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpmix_core.data.categories import Categories, category_feature
from dpmix_core.privacy.checks import FeatureRange, feature_range_vectors

__all__ = ["DEFAULT_LABEL_COLUMN", "RecordUnits", "TableLayout", "record_units", "table_layout"]

DEFAULT_LABEL_COLUMN = "label"  # a table's label column when the data does not name one (an .npz upload)


@dataclass(frozen=True, eq=False)
class RecordUnits:
    """The affine map between a [0,1] release and its records' units: x = x' * (high - low) + low, per column."""

    low: np.ndarray  # (d,) float64
    high: np.ndarray  # (d,) float64

    def __post_init__(self) -> None:
        low, high = np.asarray(self.low, dtype=np.float64), np.asarray(self.high, dtype=np.float64)
        if low.ndim != 1 or low.shape != high.shape or not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ValueError(f"low and high must be finite vectors of one length. Found {low.shape} and {high.shape}.")
        if not (high > low).all():
            raise ValueError("every column needs low < high.")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    @property
    def dim(self) -> int:
        return int(self.low.size)

    def to_records(self, x: np.ndarray) -> np.ndarray:
        """Released rows (m, d) in [0,1]'s space, in the records' units (float64)."""
        return np.asarray(x, dtype=np.float64) * (self.high - self.low) + self.low

    def to_release(self, x: np.ndarray) -> np.ndarray:
        """Rows in the records' units back in the release's [0,1] space (float32, as releases are held)."""
        return ((np.asarray(x, dtype=np.float64) - self.low) / (self.high - self.low)).astype(np.float32)


def record_units(feature_range: FeatureRange | None, d: int, *, unit_scaled: bool) -> RecordUnits | None:
    """The map of a release of ``d`` table columns scaled to [0,1] by ``feature_range`` (None: records already in
    [0,1], the identity); None when the release is not [0,1]-scaled (``unit_scaled`` False: clipped, z-scored)."""
    if not unit_scaled:
        return None
    low, high = feature_range_vectors((0.0, 1.0) if feature_range is None else feature_range, d)
    return RecordUnits(low, high)


@dataclass(frozen=True)
class TableLayout:
    """Where each released value goes in the table: ``header``; ``features[j]``, the column of feature j (x[:, j]);
    ``scores[k]``, the column of label score k (y[:, k]); ``words``, the columns of words, each ``(column, feature
    indices, categories)``: the category whose one-hot feature is largest (the label column: over the scores)."""

    header: tuple[str, ...]
    features: tuple[int, ...]
    scores: tuple[int, ...]
    words: tuple[tuple[int, tuple[int, ...], tuple[str, ...]], ...]
    classes: tuple[str, ...]


def table_layout(
    d: int,
    feature_names: Sequence[str],
    label_column: str,
    label_names: Sequence[str],
    num_classes: int,
    categories: Categories = (),
) -> TableLayout:
    """The columns of a release in its table's units: the label column (the class with the largest score), the ``d``
    feature columns (the data's names, else x0, x1, ...), each text column of ``categories`` as its word (the
    category with the largest share) just before its one-hot features, then one score column per class,
    "label=class" (the class's name, else its number)."""
    features = list(feature_names) if len(feature_names) == d else [f"x{j}" for j in range(d)]
    classes = tuple(label_names) if len(label_names) == num_classes else tuple(str(k) for k in range(num_classes))
    label = label_column or DEFAULT_LABEL_COLUMN
    index = {name: j for j, name in enumerate(features)}
    starts = {}  # feature index of a text column's first one-hot feature -> (column, its features, categories)
    for column, cats in categories:
        idx = tuple(index.get(category_feature(column, c), -1) for c in cats)
        if min(idx) >= 0:
            starts[idx[0]] = (column, idx, tuple(cats))
    header, at, words = [label], [], []
    for j, name in enumerate(features):
        if j in starts:
            column, idx, cats = starts[j]
            words.append((len(header), idx, cats))
            header.append(column)
        at.append(len(header))
        header.append(name)
    scores = tuple(range(len(header), len(header) + num_classes))
    header += [f"{label}={name}" for name in classes]
    return TableLayout(tuple(header), tuple(at), scores, tuple(words), classes)
