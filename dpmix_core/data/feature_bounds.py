"""Public bounds per feature of one's own file: a table of ``column, low, high`` -> the bounds a release scales with.

A table of mixed units (an age, an income, a ratio) has no one pair of bounds that fits every column: with
(0, 200000) the ages fill a sliver of [0,1] and the noise, calibrated to the whole box, swamps them. Bounds per
column put every feature across [0,1]; the records still lie in [0,1]^d, the box every accountant assumes, so the
guarantee is the same. The bounds must be known without the private file (a form's limits, a codebook, a
regulation); a table of the file's own minima and maxima would read the private data outside the guarantee.

A bounds file is a CSV whose header is ``column,low,high``; each row names a feature column of the data file (for
a file without column names, e.g. an ``.npz``, its index 0..d-1). Columns the table leaves out take the ``default``
pair (the CLI's ``--feature-range``); without one, every feature must be listed. Everything else (a name the file
lacks, the label column, a column twice, low >= high, a cell that is not a number) is refused in one line.

The one-hot features of a text column's public categories (:mod:`dpmix_core.data.categories`) are 0 or 1: their
bounds are (0, 1), whatever the pair or the file says for the rest (:func:`with_category_bounds`); a bounds file
that gives one of them other bounds is refused.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Sequence

from dpmix_core.data.base import DatasetError
from dpmix_core.data.categories import Categories, one_hot_features
from dpmix_core.data.side_files import read_side_csv
from dpmix_core.privacy.checks import FeatureRange, check_feature_range, check_range, feature_range_vectors

__all__ = [
    "BOUNDS_FILE_HEADER",
    "MAX_BOUNDS_FILE_BYTES",
    "per_feature_bounds",
    "read_feature_bounds",
    "bounds_rows",
    "bounds_csv",
    "with_category_bounds",
]

BOUNDS_FILE_HEADER = ("column", "low", "high")
MAX_BOUNDS_FILE_BYTES = 4_000_000  # ~100,000 columns of long names: more than any data file the product reads


def _column_index(
    column: str, index: dict[str, int], feature_names: Sequence[str], d: int, label_column: str | None
) -> int:
    key = column.strip()
    if key in index:
        return index[key]
    if label_column is not None and key == label_column.strip():
        raise DatasetError(f"bounds: {column!r} is the label column, not a feature; leave it out.")
    if not feature_names and key.isdigit() and int(key) < d:
        return int(key)
    shown = ", ".join(repr(n) for n in feature_names[:8]) + (", …" if len(feature_names) > 8 else "")
    known = f"its feature columns are {shown}" if feature_names else f"name a feature by its index 0..{d - 1}"
    raise DatasetError(f"bounds: the data file has no feature column {column!r}; {known}.")


def per_feature_bounds(
    rows: Iterable[tuple[str, object, object]],
    *,
    feature_names: Sequence[str],
    d: int,
    default: tuple[float, float] | None = None,
    label_column: str | None = None,
    categories: Categories = (),
) -> FeatureRange:
    """The bounds of each of ``d`` features from ``(column, low, high)`` rows and the ``default`` pair, (0, 1) for the
    one-hot features of ``categories`` (module docstring); canonical
    (:func:`~dpmix_core.privacy.checks.check_feature_range`): all equal -> one pair."""
    if feature_names and len(feature_names) != d:
        raise ValueError(f"feature_names must name {d} features. Found {len(feature_names)}.")
    pairs: list[tuple[float, float] | None] = [None] * d
    one_hot = set(one_hot_features(feature_names, categories))
    index = {name.strip(): j for j, name in reversed(list(enumerate(feature_names)))}  # the first of equal names
    for column, low, high in rows:
        j = _column_index(str(column), index, feature_names, d, label_column)
        if pairs[j] is not None:
            raise DatasetError(f"bounds: column {column!r} is listed twice.")
        try:
            pair = (float(low), float(high))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise DatasetError(
                f"bounds of {column!r}: low and high must be numbers. Found {low!r}, {high!r}."
            ) from None
        if not (math.isfinite(pair[0]) and math.isfinite(pair[1]) and pair[0] < pair[1]):
            raise DatasetError(f"bounds of {column!r} must satisfy low < high, both finite. Found {low!r}, {high!r}.")
        if j in one_hot and pair != (0.0, 1.0):
            raise DatasetError(
                f"bounds of {column!r}: it is a category's one-hot feature (0 or 1), so its bounds are (0, 1). "
                f"Found {low!r}, {high!r}."
            )
        pairs[j] = pair
    for j in one_hot:
        pairs[j] = (0.0, 1.0)
    if default is not None:
        default = check_range("the default bounds", default)
    missing = [j for j, pair in enumerate(pairs) if pair is None]
    if missing and default is None:
        names = [repr(feature_names[j]) if feature_names else str(j) for j in missing[:5]]
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise DatasetError(
            f"bounds: no bounds for {', '.join(names)}{more}; list every feature column, or give default bounds "
            "for the rest (--feature-range LO,HI)."
        )
    return check_feature_range("bounds", [default if pair is None else pair for pair in pairs])


def read_feature_bounds(
    file: str | os.PathLike[str] | bytes,
    *,
    feature_names: Sequence[str],
    d: int,
    default: tuple[float, float] | None = None,
    label_column: str | None = None,
    categories: Categories = (),
) -> FeatureRange:
    """A bounds CSV (``column,low,high``; a path or its bytes) read into the bounds of ``d`` features (``categories``:
    see :func:`per_feature_bounds`)."""
    _, rows = read_side_csv(
        file, what="bounds", header=BOUNDS_FILE_HEADER, max_bytes=MAX_BOUNDS_FILE_BYTES, row="column"
    )
    return per_feature_bounds(
        ((row[0], row[1].strip(), row[2].strip()) for row in rows),
        feature_names=feature_names,
        d=d,
        default=default,
        label_column=label_column,
        categories=categories,
    )


def with_category_bounds(
    feature_range: FeatureRange | None, *, feature_names: Sequence[str], categories: Categories
) -> FeatureRange | None:
    """``feature_range`` with (0, 1) for each one-hot feature of ``categories`` (None stays None: every feature lies
    in [0,1] already, one-hot features too); canonical."""
    one_hot = one_hot_features(feature_names, categories)
    if feature_range is None or not one_hot:
        return feature_range
    lo, hi = feature_range_vectors(feature_range, len(feature_names))
    lo[list(one_hot)], hi[list(one_hot)] = 0.0, 1.0
    return check_feature_range("bounds", [(float(a), float(b)) for a, b in zip(lo, hi, strict=True)])


def bounds_rows(
    feature_range: FeatureRange, *, feature_names: Sequence[str], d: int, categories: Categories = ()
) -> list[dict]:
    """The bounds of each feature as rows ``{"column", "low", "high"}`` (a page's table, a bounds file's lines); the
    one-hot features of ``categories`` are left out (their bounds are (0, 1), nothing to fill in)."""
    lo, hi = feature_range_vectors(feature_range, d)
    names = list(feature_names) if len(feature_names) == d else [str(j) for j in range(d)]
    one_hot = set(one_hot_features(names, categories))
    return [
        {"column": name, "low": float(a), "high": float(b)}
        for j, (name, a, b) in enumerate(zip(names, lo, hi, strict=True))
        if j not in one_hot
    ]


def bounds_csv(
    feature_range: FeatureRange, *, feature_names: Sequence[str], d: int, categories: Categories = ()
) -> bytes:
    """The bounds of each feature as a bounds file (UTF-8 CSV, header ``column,low,high``; numbers that read back
    exactly; one-hot features left out): what :func:`read_feature_bounds` reads."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(BOUNDS_FILE_HEADER)
    for row in bounds_rows(feature_range, feature_names=feature_names, d=d, categories=categories):
        writer.writerow([row["column"], repr(row["low"]), repr(row["high"])])
    return buffer.getvalue().encode()
